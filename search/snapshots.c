/* snapshots.c — the run's hot snapshots of its archive (archive/snapshot.h):
 * every snapshots.interval_min minutes on a thread of their own, so that the
 * loop goes on while LMDB copies, and one at every exit of a run that opened
 * (after its last commit). Each is an event of the log; a failed one is an
 * event and a line of the progress output, and does not stop the run: the
 * archive itself is whole, and the snapshots already there are kept. */
#include "common/text.h"
#include "archive/snapshot.h"
#include "search/run_state.h"

static void report(kv_run *r, int rc, const kv_snapshot_info *info, const kv_err *err,
                   const char *when)
{
    cJSON *ev = kv_run_event_new(r, rc == 0 ? "snapshot" : "snapshot_error");
    cJSON_AddStringToObject(ev, "when", when);
    if (rc == 0) {
        cJSON_AddStringToObject(ev, "path", info->path);
        cJSON_AddNumberToObject(ev, "programs", (double)info->programs);
        cJSON_AddNumberToObject(ev, "bytes", (double)info->bytes);
        cJSON_AddNumberToObject(ev, "seconds", info->seconds);
    } else {
        cJSON_AddStringToObject(ev, "message", err->msg);
    }
    kv_run_event_emit(r, ev);
    FILE *out = r->env->progress;
    char shown[4 * sizeof err->msg];
    if (out && rc != 0)
        fprintf(out, "%skevo: snapshot failed: %s\n", r->env->progress_tty ? "\n" : "",
                KV_TERM(shown, err->msg));
    else if (out && rc == 0 && when[0] == 'e')
        fprintf(out, "%skevo: snapshot %s (%llu programs, %.2f s)\n",
                r->env->progress_tty ? "\n" : "", KV_TERM(shown, info->path),
                (unsigned long long)info->programs, info->seconds);
}

/* Takes the result of the snapshot in flight, waiting for it unless
 * only_if_done. */
static void collect(kv_run *r, int only_if_done)
{
    if (!r->snapshot || (only_if_done && !kv_snapshot_done(r->snapshot)))
        return;
    kv_snapshot_info info;
    kv_err err = {{0}};
    int rc = kv_snapshot_finish(r->snapshot, &info, &err);
    r->snapshot = NULL;
    report(r, rc, &info, &err, "interval");
}

void kv_run_snapshot_tick(kv_run *r)
{
    collect(r, 1);
    double every = r->cfg->snapshots.interval_min * 60;
    double now = kv_run_elapsed_s(r);
    if (every <= 0 || r->snapshot || !r->archive || now < r->next_snapshot_s)
        return;
    r->next_snapshot_s = now + every;
    kv_err err = {{0}};
    if (kv_snapshot_start(r->archive, r->cfg->snapshots.keep, &r->snapshot, &err) != 0)
        report(r, -1, NULL, &err, "interval");
}

void kv_run_snapshot_wait(kv_run *r)
{
    collect(r, 0);
}

void kv_run_snapshot_exit(kv_run *r)
{
    collect(r, 0);
    if (!r->archive)
        return;
    kv_snapshot_info info;
    kv_err err = {{0}};
    int rc = kv_snapshot_take(r->archive, r->cfg->snapshots.keep, &info, &err);
    report(r, rc, &info, &err, "exit");
}
