/* damage.c — the messages that name a damaged or changed archive, with the
 * newest snapshot that can replace it and the commands that do. */
#include "archive/internal.h"

#include <stdio.h>

#include "common/clock.h"
#include "archive/snapshot.h"

/* Control characters (from a path, say) would garble a terminal or a log. */
static void printable(kv_err *err)
{
    if (!err)
        return;
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

/* The newest good snapshot of run_dir: 0 with info and its time, else 1 with
 * *why saying why there is none (no directory, none verifies, ...). */
static int newest(const char *run_dir, kv_snapshot_info *info, char taken[32], kv_err *why)
{
    if (kv_snapshot_newest(run_dir, info, why) != 0)
        return 1;
    kv_format_utc(info->taken_ns, taken, 32);
    return 0;
}

int kv_damaged(kv_err *err, const char *path, const char *run_dir, const char *detail)
{
    if (!err)
        return -1;
    char d[512];
    snprintf(d, sizeof d, "%s", detail);
    kv_snapshot_info info;
    kv_err why = {{0}};
    char taken[32];
    if (!run_dir)
        kv_err_set(err, "%s: damaged (%s)", path, d);
    else if (newest(run_dir, &info, taken, &why) == 0)
        kv_err_set(err,
                   "%s: damaged (%s); the newest good snapshot is %s (%llu programs, taken "
                   "%s); 'kevo archive restore %s' puts it back",
                   path, d, info.path, (unsigned long long)info.programs, taken, run_dir);
    else
        kv_err_set(err, "%s: damaged (%s); no snapshot can replace it (%s)", path, d, why.msg);
    printable(err);
    return -1;
}

int kv_changed(kv_err *err, const kv_archive *a)
{
    if (!err)
        return -1;
    kv_snapshot_info info;
    kv_err why = {{0}};
    char taken[32];
    if (newest(a->dir, &info, taken, &why) == 0)
        kv_err_set(err,
                   "archive %s was changed by another process since this run's last commit "
                   "(%s); stopped before writing to it; the newest snapshot %s holds %llu "
                   "programs (taken %s); 'kevo archive restore %s' then 'kevo run %s' "
                   "resumes from it",
                   a->path, a->changed, info.path, (unsigned long long)info.programs, taken, a->dir,
                   a->dir);
    else
        kv_err_set(err,
                   "archive %s was changed by another process since this run's last commit "
                   "(%s); stopped before writing to it; no snapshot can replace it (%s)",
                   a->path, a->changed, why.msg);
    printable(err);
    return -1;
}
