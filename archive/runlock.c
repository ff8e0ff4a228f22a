/* runlock.c — one writer per run directory: an exclusive flock on
 * <run_dir>/kevo.lock, held from the first kv_run_lock_take of a process to
 * its last kv_run_lock_release (the archive's writer handle takes one, and
 * kevo run takes one before it starts anything). The file holds its
 * holder's pid and start time, for the message that refuses the next
 * writer. flock is released by the kernel when the holder dies, so a lock
 * file left by a killed process never blocks; the file itself is never
 * removed (removing it would let two writers lock two different files). */
#include "archive/archive.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"

#define MAX_LOCKS 16

struct kv_run_lock {
    dev_t dev; /* of the run directory */
    ino_t ino;
    int fd; /* of kevo.lock, flocked; -1 when the slot is free */
    int refs;
};

static pthread_mutex_t locks_mutex = PTHREAD_MUTEX_INITIALIZER;
static kv_run_lock locks[MAX_LOCKS];
static int locks_ready;

/* The slot held for the directory (dev, ino), else a free one (fd < 0),
 * else NULL. Called with locks_mutex held. */
static kv_run_lock *find_slot(dev_t dev, ino_t ino)
{
    if (!locks_ready) {
        for (int i = 0; i < MAX_LOCKS; i++)
            locks[i].fd = -1;
        locks_ready = 1;
    }
    kv_run_lock *free_slot = NULL;
    for (int i = 0; i < MAX_LOCKS; i++) {
        if (locks[i].fd >= 0 && locks[i].dev == dev && locks[i].ino == ino)
            return &locks[i];
        if (locks[i].fd < 0 && !free_slot)
            free_slot = &locks[i];
    }
    return free_slot;
}

/* The refusal, with what the holder wrote into the file ("kevo pid 1234
 * since 2026-..."), or without it when it has not written it yet. */
static int refuse(int fd, const char *run_dir, const char *path, kv_err *err)
{
    char holder[160];
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    if (n < 0)
        return kv_err_errno(err, errno, "read %s", path);
    holder[n] = 0;
    holder[strcspn(holder, "\n")] = 0;
    for (char *c = holder; *c; c++) /* it came from a file: no control characters */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return kv_err_set(err, "run directory %s is in use by %s; one writer per run", run_dir,
                      holder[0] ? holder : "another kevo process (starting)");
}

/* Says who holds the lock on fd: this process's pid and the time now. */
static int write_holder(int fd, const char *path, kv_err *err)
{
    char when[32], text[96];
    kv_format_utc(kv_wall_ns(), when, sizeof when);
    int len = snprintf(text, sizeof text, "kevo pid %ld since %s\n", (long)getpid(), when);
    if (ftruncate(fd, 0) != 0)
        return kv_err_errno(err, errno, "truncate %s", path);
    if (pwrite(fd, text, (size_t)len, 0) != len)
        return kv_err_errno(err, errno ? errno : EIO, "write %s", path);
    return 0;
}

/* Opens and flocks run_dir's lock file: its fd, or -1 with err. */
static int lock_file(const char *run_dir, kv_err *err)
{
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, run_dir, KV_RUN_LOCK_FILE, err) != 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        kv_err_errno(err, errno, "open %s", path);
        return -1;
    }
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? kv_err_errno(err, errno, "fstat %s", path) : 0;
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = kv_err_set(err, "%s is %s, not a regular file", path, kv_file_kind(st.st_mode));
    while (rc == 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        rc = errno == EWOULDBLOCK ? refuse(fd, run_dir, path, err)
                                  : kv_err_errno(err, errno, "flock %s", path);
    }
    if (rc == 0)
        rc = write_holder(fd, path, err);
    if (rc != 0) {
        close(fd); /* releases the lock if it was taken */
        return -1;
    }
    return fd;
}

int kv_run_lock_take(const char *run_dir, kv_run_lock **out, kv_err *err)
{
    *out = NULL;
    struct stat st;
    if (stat(run_dir, &st) != 0)
        return kv_err_errno(err, errno, "run directory %s", run_dir);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err, "run directory %s: not a directory", run_dir);
    pthread_mutex_lock(&locks_mutex);
    kv_run_lock *l = find_slot(st.st_dev, st.st_ino);
    int rc = 0;
    if (!l) {
        rc = kv_err_set(err, "run directory %s: this process holds %d run locks already", run_dir,
                        MAX_LOCKS);
    } else if (l->fd >= 0) {
        l->refs++; /* this process holds it already */
    } else {
        int fd = lock_file(run_dir, err);
        if (fd < 0)
            rc = -1;
        else
            *l = (kv_run_lock){.dev = st.st_dev, .ino = st.st_ino, .fd = fd, .refs = 1};
    }
    pthread_mutex_unlock(&locks_mutex);
    if (rc == 0)
        *out = l;
    return rc;
}

void kv_run_lock_release(kv_run_lock *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&locks_mutex);
    if (--l->refs == 0) {
        close(l->fd); /* the lock goes with it; nothing to report to anyone */
        l->fd = -1;
    }
    pthread_mutex_unlock(&locks_mutex);
}
