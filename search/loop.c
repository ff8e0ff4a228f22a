/* loop.c — the coordinator's poll() loop (search.h): keep the evaluator
 * busy (unfinished evaluations first, then new proposals) and the mutator's
 * requests in flight; take results and proposals, watch the budgets and the
 * stop requests. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "search/run_state.h"

#define MAX_POLLFDS 256
/* Proposals that may come back empty (no move, duplicate) in one fill before
 * the loop polls again. */
#define FILL_TRIES 32
/* Empty proposals in a row after which, with nothing left to evaluate, the
 * search space counts as exhausted (a resumed run has nothing in flight, so
 * one unlucky fill must not end it). */
#define EXHAUSTED_AFTER 2048

/* Why the run takes no new work, or NULL. */
static const char *budget_reason(kv_run *r)
{
    const kv_cfg_budget *b = &r->cfg->budget;
    /* committed: tasks in flight, and programs that have no result yet (each
     * will take one evaluation; a follow-up stage may be dropped instead) */
    int committed = 0, all_done = 1;
    for (const kv_run_task *t = r->tasks; t; t = t->next)
        committed += t->submitted || t->stage == KV_STAGE_SEED || t->stage == KV_STAGE_SCREEN;
    committed += kv_run_mut_in_flight(r); /* each request may become a candidate */
    if (b->evaluations > 0 && (int64_t)r->state.evaluations + committed >= b->evaluations)
        return "evaluation budget spent";
    if (b->wall_hours > 0 && r->wall_at_start + kv_run_elapsed_s(r) >= b->wall_hours * 3600)
        return "wall-time budget spent";
    const char *llm = kv_run_mut_budget(r, 0);
    if (llm)
        return llm;
    for (int i = 0; i < r->n_problems; i++)
        all_done = all_done && (r->problems[i].done || r->problems[i].skipped);
    if (all_done)
        return "target speedup reached on every problem";
    return NULL;
}

static int is_new(const kv_run_task *t)
{
    return t->stage == KV_STAGE_SEED || t->stage == KV_STAGE_SCREEN;
}

/* The next task to submit: a program without result (already counted
 * against the budget) always, a follow-up stage only within the budget. */
static kv_run_task *next_waiting(kv_run *r)
{
    int within = budget_reason(r) == NULL;
    for (kv_run_task *t = r->tasks; t; t = t->next)
        if (!t->submitted && (is_new(t) || within))
            return t;
    return NULL;
}

/* Submits waiting tasks while the evaluator has room. */
static int submit_waiting(kv_run *r, kv_err *err)
{
    kv_evalq q = r->env->evalq;
    kv_run_task *w;
    while (q.ops->capacity(q.self) > 0 && (w = next_waiting(r)) != NULL) {
        kv_eval_task et = {.id = w->id,
                           .problem = &r->problems[w->problem].problem,
                           .src = w->src,
                           .len = w->len,
                           .stage = w->stage};
        if (q.ops->submit(q.self, &et, err) != 0)
            return -1;
        w->submitted = 1;
    }
    return 0;
}

/* Submits waiting tasks, then asks the mutator for new proposals while no
 * task waits for room in the evaluator (a proposal would only queue up
 * behind it), the mutator has room (the template mutator: as many as the
 * evaluator takes now; the LLM mutator: its concurrency) and the budgets
 * allow, the most the requests in flight can still cost counted. What a
 * mutator answers at once is taken at once. 0, or -1 on failure. */
static int fill(kv_run *r, kv_err *err)
{
    kv_evalq q = r->env->evalq;
    kv_mutator m = r->mut;
    for (int tries = 0;; tries++) {
        if (submit_waiting(r, err) != 0)
            return -1;
        if (next_waiting(r) || tries >= FILL_TRIES || budget_reason(r) || kv_run_mut_budget(r, 1) ||
            kv_run_mut_failing(r) || m.ops->room(m.self, q.ops->capacity(q.self)) <= 0)
            return 0;
        int rc = kv_run_mut_ask(r, err);
        if (rc < 0 || kv_run_mut_take(r, err) != 0)
            return -1;
        if (rc == 2) /* its cost does not fit now */
            return 0;
    }
}

/* Nothing in flight, nothing to submit, and proposals keep coming back empty. */
static int idle(kv_run *r)
{
    return next_waiting(r) == NULL && r->env->evalq.ops->in_flight(r->env->evalq.self) == 0 &&
           kv_run_mut_in_flight(r) == 0 && r->fruitless >= EXHAUSTED_AFTER;
}

static void drain(int fd)
{
    char buf[64];
    while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {
    }
}

int kv_search_run(const kv_search_env *env, kv_err *err)
{
    kv_run r;
    int rc = kv_run_open(&r, env, err);
    int opened = rc == 0;
    kv_evalq q = env->evalq;
    const char *why = NULL;
    while (rc == 0) {
        if (*env->stop >= 2) {
            why = "stopped at once (second signal)";
            break;
        }
        /* on a stop request, the mutator's requests in flight are abandoned;
         * when a budget is spent, what they give is still taken */
        int stopping = *env->stop >= 1 || (budget_reason(&r) != NULL && !next_waiting(&r) &&
                                           kv_run_mut_in_flight(&r) == 0);
        /* a failing mutator: what is queued and in flight finishes, then an error */
        stopping |=
            kv_run_mut_failing(&r) != NULL && !next_waiting(&r) && kv_run_mut_in_flight(&r) == 0;
        if (*env->stop == 0 && (rc = fill(&r, err)) != 0)
            break;
        if (q.ops->in_flight(q.self) == 0 && (stopping || idle(&r))) {
            why = *env->stop >= 1          ? "stopped (signal)"
                  : budget_reason(&r)      ? budget_reason(&r)
                  : kv_run_mut_failing(&r) ? "the mutator is failing"
                                           : "nothing left to try (2048 proposals in a row were "
                                             "duplicates or no move, and no evaluation is pending)";
            break;
        }
        struct pollfd fds[MAX_POLLFDS];
        int timeout = 1000, n = 0;
        if (env->stop_fd >= 0)
            fds[n++] = (struct pollfd){.fd = env->stop_fd, .events = POLLIN};
        int t = 1000;
        int k = q.ops->pollfds(q.self, fds + n, MAX_POLLFDS - n, &t);
        if (k < 0) {
            rc = kv_err_set(err, "evaluator: too many descriptors to poll");
            break;
        }
        n += k;
        if (t >= 0 && t < timeout)
            timeout = t;
        /* after a stop request the mutator is left alone: what it has in
         * flight is abandoned */
        kv_mutator m = r.mut;
        int mut = *env->stop == 0;
        if (mut) {
            t = 1000;
            k = m.ops->pollfds(m.self, fds + n, MAX_POLLFDS - n, &t);
            if (k < 0) {
                rc = kv_err_set(err, "mutator: too many descriptors to poll");
                break;
            }
            n += k;
            if (t >= 0 && t < timeout)
                timeout = t;
        }
        if (q.ops->in_flight(q.self) == 0 && (!mut || m.ops->in_flight(m.self) == 0))
            timeout = 0; /* nothing will wake the loop: keep proposing */
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            rc = kv_err_errno(err, errno, "poll");
            break;
        }
        drain(env->stop_fd);
        if (q.ops->step(q.self, err) != 0) {
            rc = -1;
            break;
        }
        if (mut && (m.ops->step(m.self, err) != 0 || kv_run_mut_take(&r, err) != 0)) {
            rc = -1;
            break;
        }
        kv_eval_done d;
        while (rc == 0 && q.ops->take(q.self, &d) == 0) {
            rc = kv_run_handle_done(&r, &d, err);
            kv_eval_report_free(&d.report);
        }
        kv_run_progress(&r, 0);
        kv_run_hook_tick(&r); /* before the snapshot's tick: never beside its thread */
        kv_run_snapshot_tick(&r);
    }
    if (rc == 0 && r.archive) {
        /* the wall time spent, even when nothing was committed lately */
        kv_txn *t = NULL;
        memcpy(r.state.rng, r.rng.s, sizeof r.state.rng);
        r.state.wall_s = r.wall_at_start + kv_run_elapsed_s(&r);
        if (kv_write_begin(r.archive, &t, err) != 0)
            rc = -1;
        else if (kv_put_state(t, &r.state, err) != 0) {
            kv_txn_abort(t);
            rc = -1;
        } else if (kv_txn_commit(t, err) != 0) /* frees t either way */
            rc = -1;
    }
    if (rc == 0 && *env->stop == 0 && kv_run_mut_failing(&r)) /* everything stored: now the error */
        rc = kv_err_set(err,
                        "%s; what was found so far is stored, and `kevo run %s` resumes the "
                        "run once that is mended (the mutator is set up afresh at each "
                        "start: an LLM key is read again)",
                        kv_run_mut_failing(&r), kv_run_dir(&r));
    if (opened) {
        kv_run_snapshot_exit(&r); /* after the last commit, whatever ended the run */
        kv_run_hook_exit(&r);
    }
    if (r.archive) {
        kv_run_progress(&r, 1);
        cJSON *ev = kv_run_event_new(&r, rc == 0 ? "stop" : "error");
        cJSON_AddStringToObject(ev, "reason", rc == 0 ? why : err->msg);
        cJSON_AddNumberToObject(ev, "wall_s", r.state.wall_s);
        /* this process's proposals, and those that gave nothing to evaluate */
        cJSON_AddNumberToObject(ev, "proposals", (double)r.proposals);
        cJSON_AddNumberToObject(ev, "duplicates", (double)r.duplicates);
        cJSON_AddNumberToObject(ev, "no_moves", (double)r.no_moves);
        kv_run_event_emit(&r, ev);
        if (env->progress)
            fprintf(env->progress, "%skevo: %s\n", env->progress_tty ? "\n" : "",
                    rc == 0 ? why : "stopped on an error");
    }
    kv_run_close(&r);
    return rc == 0 ? 0 : -1;
}
