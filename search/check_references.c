/* check_references.c — every problem's reference checked before a run trusts
 * it (docs/search.md, "Checking the references"). At every start, each
 * problem that is not skipped already has its verdict looked up in the
 * cache (evaluator/evaluator.h, kevo problems check's): a pass is
 * taken as it is; a problem without one has its reference checked against
 * itself (a self-check task on the run's own queue, all such problems at
 * once) and the verdict kept. A problem whose reference failed, kept or
 * fresh, is skipped like a problem without seeds: said on the progress
 * output and as a `skipped` event, nothing of it evaluated (what a fresh
 * run stores of it waits for a later start), and a run with no problem
 * left is refused, naming them. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "evaluator/evaluator.h"
#include "search/run_state.h"

#define MAX_POLLFDS 256

/* One problem whose verdict is not kept: its task and what came of it. */
typedef struct {
    int problem; /* index into r->problems */
    char key[KV_SHA256_HEX_LEN];
    int submitted, done;
} pending;

/* Why each problem is skipped ("" for one that is not). */
typedef struct {
    char why[KV_JOB_MSG_MAX];
} reason;

static void warn(const char *msg, void *ctx)
{
    kv_run_say(ctx, "warning", NULL, "message", "warning: ", msg);
}

static void say_checked(kv_run *r, const kv_problem *p, int ok, int cached, int64_t at,
                        const char *message)
{
    cJSON *ev = kv_run_event_new(r, "problem_check");
    cJSON_AddStringToObject(ev, "problem", p->name);
    cJSON_AddBoolToObject(ev, "ok", ok);
    cJSON_AddBoolToObject(ev, "cached", cached);
    if (at > 0)
        cJSON_AddNumberToObject(ev, "checked_at", (double)at);
    if (!ok)
        cJSON_AddStringToObject(ev, "message", message);
    kv_run_event_emit(r, ev);
}

/* Marks problem i skipped because its reference failed: why. */
static void skip(kv_run *r, int i, const char *why, reason *rs)
{
    kv_run_problem *p = &r->problems[i];
    p->skipped = 1;
    snprintf(rs[i].why, sizeof rs[i].why, "%s", why);
    kv_err msg;
    kv_err_set(&msg, "problem %s skipped: %s; fix the reference and run kevo problems check %s",
               p->problem.name, why, p->problem.name);
    kv_run_say(r, "skipped", p->problem.name, "reason", "", msg.msg);
}

/* A self-check's report for pd: the verdict kept, the problem skipped if
 * its reference failed. */
static void take_report(kv_run *r, pending *pd, const kv_eval_report *rep, reason *rs)
{
    const kv_problem *p = &r->problems[pd->problem].problem;
    kv_pcheck v;
    kv_err err = {{0}};
    pd->done = 1;
    if (kv_pcheck_from_report(&v, p, r->cfg->world, rep, &err) != 0) {
        /* it crashed, hung or did not run: no verdict on its code to keep */
        say_checked(r, p, 0, 0, 0, err.msg);
        skip(r, pd->problem, err.msg, rs);
        return;
    }
    if (r->env->cache_dir && kv_pcheck_put(r->env->cache_dir, pd->key, &v, &err) != 0) {
        kv_err w;
        kv_err_set(&w, "the verdict on the reference of %s is not kept: %s", p->name, err.msg);
        warn(w.msg, r);
    }
    say_checked(r, p, v.ok, 0, v.checked_at, v.message);
    if (!v.ok)
        skip(r, pd->problem, v.message, rs);
}

static pending *pending_of(pending *pd, int n, uint64_t id)
{
    for (int i = 0; i < n; i++)
        if ((uint64_t)pd[i].problem + 1 == id && pd[i].submitted && !pd[i].done)
            return &pd[i];
    return NULL;
}

/* Submits the self-checks of pd and drives the run's queue until every
 * report is back: 0; 1 when a second stop request came first (the run then
 * stops at once, the rest unchecked); -1 when kevo itself failed. */
static int run_checks(kv_run *r, pending *pd, int n, reason *rs, kv_err *err)
{
    kv_evalq q = r->env->evalq;
    for (int left = n; left > 0;) {
        if (*r->env->stop >= 2)
            return 1;
        for (int i = 0; i < n && q.ops->capacity(q.self) > 0; i++) {
            if (pd[i].submitted)
                continue;
            kv_eval_task t = {.id = (uint64_t)pd[i].problem + 1,
                              .problem = &r->problems[pd[i].problem].problem,
                              .stage = KV_STAGE_FULL,
                              .baseline = 1,
                              .selfcheck = 1};
            if (q.ops->submit(q.self, &t, err) != 0)
                return -1;
            pd[i].submitted = 1;
        }
        if (q.ops->step(q.self, err) != 0)
            return -1;
        kv_eval_done d;
        while (q.ops->take(q.self, &d) == 0) {
            pending *got = pending_of(pd, n, d.id);
            if (got) {
                take_report(r, got, &d.report, rs);
                left--;
            }
            kv_eval_report_free(&d.report);
            if (!got)
                return kv_err_set(err,
                                  "evaluator: a report for task %llu, which is no "
                                  "problem's self-check",
                                  (unsigned long long)d.id);
        }
        if (left == 0)
            break;
        struct pollfd fds[MAX_POLLFDS];
        int timeout = 1000; /* a stop request interrupts poll (EINTR) */
        int k = q.ops->pollfds(q.self, fds, MAX_POLLFDS, &timeout);
        if (k < 0)
            return kv_err_set(err, "evaluator: too many descriptors to poll");
        if (timeout < 0 || timeout > 1000)
            timeout = 1000;
        if (poll(fds, (nfds_t)k, timeout) < 0 && errno != EINTR)
            return kv_err_errno(err, errno, "poll");
    }
    return 0;
}

/* The refusal of a run none of whose problems is left: those whose
 * reference failed, each with why. */
static int refuse(const kv_run *r, const reason *rs, kv_err *err)
{
    int failed = 0, last = -1;
    for (int i = 0; i < r->n_problems; i++)
        if (rs[i].why[0]) {
            failed++;
            last = i;
        }
    if (failed == 1)
        return kv_err_set(
            err,
            "problem %s cannot be searched: %s; fix the reference and run "
            "kevo problems check %s%s",
            r->problems[last].problem.name, rs[last].why, r->problems[last].problem.name,
            r->n_problems > 1 ? " (no other problem of the run is left: see above)" : "");
    char list[768] = "";
    size_t used = 0;
    for (int i = 0; i < r->n_problems && used < sizeof list; i++) {
        if (!rs[i].why[0])
            continue;
        int k = snprintf(list + used, sizeof list - used, "%s%s: %.200s", used ? "; " : "",
                         r->problems[i].problem.name, rs[i].why);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return kv_err_set(err,
                      "no problem of the run is left to search; the references of %d "
                      "failed (%s); fix them and run kevo problems check on each",
                      failed, list);
}

/* Forgets the work a resumed run took up for the problems now skipped: it
 * stays in the archive for a later start. */
static void drop_skipped_tasks(kv_run *r)
{
    kv_run_task *t = r->tasks;
    while (t) {
        kv_run_task *next = t->next;
        if (r->problems[t->problem].skipped) {
            kv_run_unlink(r, t);
            kv_run_task_free(t);
        }
        t = next;
    }
}

int kv_run_check_problems(kv_run *r, kv_err *err)
{
    pending *pd = calloc((size_t)r->n_problems, sizeof *pd);
    reason *rs = calloc((size_t)r->n_problems, sizeof *rs);
    if (!pd || !rs) {
        free(pd);
        free(rs);
        return kv_err_set(err, "out of memory");
    }
    int n = 0, rc = 0;
    for (int i = 0; rc == 0 && i < r->n_problems; i++) {
        const kv_problem *p = &r->problems[i].problem;
        if (r->problems[i].skipped)
            continue; /* no seed: nothing of it runs (seedless.c) */
        if (kv_pcheck_key(p, r->cfg->world, pd[n].key, err) != 0) {
            rc = -1;
            break;
        }
        kv_pcheck v;
        int found = r->env->cache_dir
                        ? kv_pcheck_get(r->env->cache_dir, pd[n].key, &v, warn, r, err)
                        : KV_NOTFOUND;
        if (found < 0) {
            rc = -1;
        } else if (found == 0) {
            say_checked(r, p, v.ok, 1, v.checked_at, v.message);
            if (!v.ok)
                skip(r, i, v.message, rs);
        } else {
            pd[n++].problem = i;
        }
    }
    if (rc == 0 && n > 0) {
        if (r->env->progress)
            fprintf(r->env->progress,
                    "kevo: checking the reference%s of %d problem%s against "
                    "%s (kevo problems check)\n",
                    n == 1 ? "" : "s", n, n == 1 ? "" : "s", n == 1 ? "itself" : "themselves");
        rc = run_checks(r, pd, n, rs, err);
    }
    if (rc == 0) {
        int left = 0;
        for (int i = 0; i < r->n_problems; i++)
            left += !r->problems[i].skipped;
        if (left == 0)
            rc = refuse(r, rs, err);
        drop_skipped_tasks(r);
    }
    free(pd);
    free(rs);
    return rc < 0 ? -1 : 0;
}
