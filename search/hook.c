/* hook.c — the caller's periodic hook of the run (search.h, kv_search_hook):
 * every hook.every_s seconds between the loop's polls, never while a
 * snapshot's thread runs (the hook may fork: a child of a threaded process
 * can deadlock on a lock that thread held), and once at the run's end. Each
 * call is an event of the log; a failed one is also a line of the progress
 * output, and the run goes on. */
#include <stdio.h>

#include "common/clock.h"
#include "common/text.h"
#include "search/run_state.h"

static void call(kv_run *r, const char *when)
{
    const kv_search_hook *h = &r->env->hook;
    const char *name = h->name ? h->name : "hook";
    kv_err err = {{0}};
    int64_t t0 = kv_monotonic_ns();
    int rc = h->fn(h->ctx, kv_run_dir(r), &err);
    double seconds = (double)(kv_monotonic_ns() - t0) / 1e9;
    char type[64];
    snprintf(type, sizeof type, "%s%s", name, rc == 0 ? "" : "_error");
    cJSON *ev = kv_run_event_new(r, type);
    cJSON_AddStringToObject(ev, "when", when);
    cJSON_AddNumberToObject(ev, "seconds", seconds);
    if (rc != 0)
        cJSON_AddStringToObject(ev, "message", err.msg);
    kv_run_event_emit(r, ev);
    FILE *out = r->env->progress;
    char shown[4 * sizeof err.msg];
    if (out && rc != 0)
        fprintf(out, "%skevo: %s failed (the run goes on): %s\n", r->env->progress_tty ? "\n" : "",
                name, KV_TERM(shown, err.msg));
}

void kv_run_hook_tick(kv_run *r)
{
    const kv_search_hook *h = &r->env->hook;
    double now = kv_run_elapsed_s(r);
    if (!h->fn || h->every_s <= 0 || r->snapshot || !r->archive || now < r->next_hook_s)
        return;
    r->next_hook_s = now + h->every_s;
    call(r, "interval");
}

void kv_run_hook_exit(kv_run *r)
{
    if (r->env->hook.fn && r->archive)
        call(r, "exit");
}
