/* progress.c — what a person watching sees (a status line on a terminal, a
 * plain line every progress_every_s otherwise) and the JSONL event log of
 * the run directory. */
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/json_out.h"
#include "common/clock.h"
#include "search/run_state.h"

double kv_run_elapsed_s(const kv_run *r)
{
    return (double)(kv_monotonic_ns() - r->t0_ns) * 1e-9;
}

cJSON *kv_run_event_new(const kv_run *r, const char *type)
{
    cJSON *ev = cJSON_CreateObject();
    if (!ev)
        return NULL;
    cJSON_AddNumberToObject(ev, "t", (double)kv_wall_ns() * 1e-9);
    cJSON_AddStringToObject(ev, "type", type);
    cJSON_AddNumberToObject(ev, "evaluations", (double)r->state.evaluations);
    return ev;
}

void kv_run_say(kv_run *r, const char *type, const char *problem, const char *key,
                const char *prefix, const char *text)
{
    cJSON *ev = kv_run_event_new(r, type);
    if (ev && problem)
        cJSON_AddStringToObject(ev, "problem", problem);
    if (ev)
        cJSON_AddStringToObject(ev, key, text);
    kv_run_event_emit(r, ev);
    char shown[8192]; /* a message (2 KiB) with every byte escaped */
    if (r->env->progress)
        fprintf(r->env->progress, "kevo: %s%s\n", prefix, KV_TERM(shown, text));
}

void kv_run_event_emit(kv_run *r, cJSON *ev)
{
    if (!ev)
        return;
    size_t replaced = 0;
    char *line = kv_json_print(ev, 0, &replaced);
    if (line && replaced) { /* the event says how many bytes were not UTF-8 */
        free(line);
        cJSON_AddNumberToObject(ev, "invalid_utf8", (double)replaced);
        line = kv_json_print(ev, 0, NULL);
    }
    if (line && r->events) {
        fprintf(r->events, "%s\n", line);
        fflush(r->events);
    }
    free(line);
    cJSON_Delete(ev);
}

/* The share of the GPU groups' time spent on jobs since the first minute
 * (the first minute compiles references and starts the groups). */
static double busy_fraction(kv_run *r, double now)
{
    kv_evalq q = r->env->evalq;
    double busy = q.ops->busy_s(q.self);
    int groups = q.ops->groups(q.self);
    if (!r->busy_marked && now >= 60) {
        r->busy_marked = 1;
        r->busy_at_minute = busy;
    }
    if (!r->busy_marked || groups <= 0 || now < 70) /* a few seconds say nothing yet */
        return -1;
    return (busy - r->busy_at_minute) / (groups * (now - 60));
}

void kv_run_progress(kv_run *r, int force)
{
    const kv_search_env *env = r->env;
    double now = kv_run_elapsed_s(r);
    double busy = busy_fraction(r, now);
    if (!env->progress)
        return;
    double every = env->progress_tty ? 1.0 : env->progress_every_s;
    if (!force && now - r->last_progress_s < every)
        return;
    r->last_progress_s = now;
    char line[1024];
    int n = 0;
    uint64_t done = r->state.evaluations;
    double hours = (r->state.wall_s > 0 ? r->state.wall_s : now) / 3600.0;
    n += snprintf(line + n, sizeof line - (size_t)n, "%llu", (unsigned long long)done);
    if (r->cfg->budget.evaluations)
        n += snprintf(line + n, sizeof line - (size_t)n, "/%lld",
                      (long long)r->cfg->budget.evaluations);
    n += snprintf(line + n, sizeof line - (size_t)n, " evals, %.0f/h, %.1f",
                  hours > 0 ? done / hours : 0, r->state.wall_s / 60.0);
    if (r->cfg->budget.wall_hours > 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "/%.1f", r->cfg->budget.wall_hours * 60);
    n += snprintf(line + n, sizeof line - (size_t)n, " min");
    if (busy >= 0)
        n += snprintf(line + n, sizeof line - (size_t)n, ", GPU busy %.0f%%", 100 * busy);
    int waiting = 0, flight = 0;
    for (const kv_run_task *t = r->tasks; t; t = t->next)
        t->submitted ? flight++ : waiting++;
    n += snprintf(line + n, sizeof line - (size_t)n, ", queue %d+%d", waiting, flight);
    if (r->cfg->mutator == KV_MUTATOR_LLM) {
        n += snprintf(line + n, sizeof line - (size_t)n, ", LLM %d in flight, %llu",
                      kv_run_mut_in_flight(r),
                      (unsigned long long)(r->state.tokens_in + r->state.tokens_out));
        if (r->cfg->budget.llm_tokens)
            n += snprintf(line + n, sizeof line - (size_t)n, "/%lld",
                          (long long)r->cfg->budget.llm_tokens);
        n += snprintf(line + n, sizeof line - (size_t)n, " tokens, $%.2f", r->state.cost_usd);
        if (r->cfg->budget.cost_usd > 0)
            n += snprintf(line + n, sizeof line - (size_t)n, "/%.2f", r->cfg->budget.cost_usd);
    }
    for (int i = 0; i < r->n_problems && n < (int)sizeof line - 64; i++) {
        char name[4 * KV_PROBLEM_NAME_MAX];
        KV_TERM(name, r->problems[i].problem.name);
        if (r->problems[i].skipped) /* nothing to vary (seedless.c) */
            n += snprintf(line + n, sizeof line - (size_t)n, " | %s skipped", name);
        else
            n += snprintf(line + n, sizeof line - (size_t)n, " | %s %.2fx", name,
                          r->problems[i].best);
        if (r->problems[i].implausible && n < (int)sizeof line - 32)
            n += snprintf(line + n, sizeof line - (size_t)n, ", %llu implausible",
                          (unsigned long long)r->problems[i].implausible);
    }
    if (env->progress_tty)
        fprintf(env->progress, "\r\033[K%s", line);
    else
        fprintf(env->progress, "kevo: %s\n", line);
    fflush(env->progress);
}
