/* snapshot_job.c — a snapshot on a thread of its own (snapshot.h), so that
 * the coordinator's loop goes on while LMDB copies the archive. The thread
 * uses only the environment (LMDB allows a read transaction per thread, and
 * the handle is opened with MDB_NOTLS) and the map lock, which keeps a map
 * growth from remapping under the copy. */
#include "archive/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

struct kv_snapshot_job {
    pthread_t thread;
    kv_archive *a;
    int keep;
    int64_t now_ns;
    atomic_int done;
    int rc;
    kv_snapshot_info info;
    kv_err err;
};

static void *job_main(void *arg)
{
    kv_snapshot_job *j = arg;
    j->rc = kv_snapshot_run(j->a, j->keep, j->now_ns, &j->info, &j->err);
    atomic_store(&j->done, 1);
    return NULL;
}

int kv_snapshot_start(kv_archive *a, int keep, kv_snapshot_job **out, kv_err *err)
{
    *out = NULL;
    const char *no = kv_snapshot_refusal(a);
    if (no)
        return kv_err_set(err, "%s: no snapshot taken: %s", a->path, no);
    kv_snapshot_job *j = calloc(1, sizeof *j);
    if (!j)
        return kv_err_set(err, "out of memory");
    j->a = a;
    j->keep = keep;
    j->now_ns = kv_wall_ns();
    atomic_init(&j->done, 0);
    int rc = pthread_create(&j->thread, NULL, job_main, j);
    if (rc != 0) {
        free(j);
        return kv_err_errno(err, rc, "%s: starting a snapshot thread", a->path);
    }
    a->snapshotting = 1;
    *out = j;
    return 0;
}

int kv_snapshot_done(const kv_snapshot_job *j)
{
    return atomic_load(&((kv_snapshot_job *)j)->done);
}

int kv_snapshot_finish(kv_snapshot_job *j, kv_snapshot_info *info, kv_err *err)
{
    int rc = pthread_join(j->thread, NULL);
    if (rc != 0) /* cannot happen for a joinable thread of ours; the job stays allocated */
        return kv_err_errno(err, rc, "%s: waiting for the snapshot thread", j->a->path);
    j->a->snapshotting = 0;
    rc = j->rc;
    if (info)
        *info = j->info;
    if (rc != 0 && err)
        *err = j->err;
    free(j);
    return rc;
}
