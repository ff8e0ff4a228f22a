/* restore.c — putting a snapshot back as the run's archive (snapshot.h):
 * copy it next to the archive, move the archive and its lock file aside
 * (never deleted), rename the copy into place. */
#include "archive/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"

int kv_file_stamp(char *out, size_t cap)
{
    /* basic ISO 8601 as in the snapshots' names: no ':' in file names */
    time_t secs = (time_t)(kv_wall_ns() / 1000000000);
    struct tm tm;
    return gmtime_r(&secs, &tm) && strftime(out, cap, "%Y%m%dT%H%M%SZ", &tm) != 0 ? 0 : -1;
}

int kv_archive_unused(const char *archive, const char *doing, kv_err *err)
{
    char lock[PATH_MAX];
    if (snprintf(lock, sizeof lock, "%s-lock", archive) >= (int)sizeof lock)
        return kv_err_set(err, "%s: path too long", archive);
    int fd = open(lock, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : kv_err_errno(err, errno, "open %s", lock);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    int rc = fcntl(fd, F_GETLK, &fl);
    int e = errno;
    close(fd);
    if (rc != 0)
        return kv_err_errno(err, e, "%s: fcntl(F_GETLK)", lock);
    if (fl.l_type != F_UNLCK)
        return kv_err_set(err,
                          "%s is open in process %ld (a kevo run, or a reader); stop it "
                          "before %s",
                          archive, (long)fl.l_pid, doing);
    return 0;
}

int kv_move_aside(const char *path, const char *tag, const char *stamp, int keep, char *out,
                  size_t cap, kv_err *err)
{
    out[0] = 0;
    if (access(path, F_OK) != 0)
        return errno == ENOENT ? 0 : kv_err_errno(err, errno, "%s", path);
    for (int n = 0; n < 100; n++) {
        int len = n ? snprintf(out, cap, "%s%s-%s.%d", path, tag, stamp, n)
                    : snprintf(out, cap, "%s%s-%s", path, tag, stamp);
        if (len < 0 || (size_t)len >= cap)
            return kv_err_set(err, "%s: path too long", path);
        /* link + unlink: a rename that never replaces what is there */
        if (link(path, out) == 0) {
            if (!keep && unlink(path) != 0)
                return kv_err_errno(err, errno, "removing %s after linking it as %s", path, out);
            return 0;
        }
        if (errno != EEXIST)
            return kv_err_errno(err, errno, "moving %s aside as %s", path, out);
    }
    return kv_err_set(err, "moving %s aside: too many earlier copies", path);
}

/* The restore itself, with the run's writer lock held. */
static int restore_locked(const char *run_dir, const char *archive, const char *lock,
                          const char *snapshot, kv_restore_info *info, kv_err *err)
{
    char stamp[32];
    if (kv_archive_unused(archive, "restoring", err) != 0)
        return -1;
    if (snapshot) {
        if (kv_snapshot_verify(snapshot, &info->from, err) != 0)
            return kv_err_prefix(err, "cannot restore from %s", snapshot);
    } else {
        int rc = kv_snapshot_newest(run_dir, &info->from, err);
        if (rc == KV_NOTFOUND)
            return kv_err_prefix(err, "%s: nothing to restore", run_dir);
        if (rc != 0)
            return -1;
    }

    kv_atomic_file af;
    if (kv_atomic_open(&af, archive, err) != 0)
        return -1;
    if (kv_copy_into(info->from.path, &af, SIZE_MAX, err) != 0) {
        kv_atomic_abandon(&af);
        return -1;
    }
    if (kv_file_stamp(stamp, sizeof stamp) != 0) {
        kv_atomic_abandon(&af);
        return kv_err_set(err, "%s: no time for the name of the old archive", run_dir);
    }
    if (kv_move_aside(archive, ".damaged", stamp, 0, info->aside, sizeof info->aside, err) != 0 ||
        kv_move_aside(lock, ".damaged", stamp, 0, info->lock_aside, sizeof info->lock_aside, err) !=
            0) {
        kv_atomic_abandon(&af);
        return -1;
    }
    if (kv_atomic_commit(&af, err) != 0)
        return kv_err_prefix(err,
                             "%s was moved aside as %s, but the snapshot %s could not be "
                             "put in its place",
                             archive, info->aside[0] ? info->aside : "(none)", info->from.path);
    kv_snapshot_info now_info;
    if (kv_snapshot_verify(archive, &now_info, err) != 0)
        return kv_err_prefix(err, "restored from %s, but the archive does not open",
                             info->from.path);
    info->programs = now_info.programs;
    return 0;
}

int kv_archive_restore(const char *run_dir, const char *snapshot, kv_restore_info *info,
                       kv_err *err)
{
    memset(info, 0, sizeof *info);
    char archive[PATH_MAX], lock_path[PATH_MAX];
    struct stat st;
    if (stat(run_dir, &st) != 0)
        return kv_err_errno(err, errno, "run directory %s", run_dir);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err, "run directory %s: not a directory", run_dir);
    if (kv_path_join(archive, sizeof archive, run_dir, KV_ARCHIVE_FILE, err) != 0 ||
        snprintf(lock_path, sizeof lock_path, "%s-lock", archive) >= (int)sizeof lock_path)
        return kv_err_set(err, "%s: path too long", run_dir);
    kv_run_lock *lock;
    if (kv_run_lock_take(run_dir, &lock, err) != 0)
        return kv_err_prefix(err, "cannot restore");
    int rc = restore_locked(run_dir, archive, lock_path, snapshot, info, err);
    kv_run_lock_release(lock);
    return rc;
}
