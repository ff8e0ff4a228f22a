/* guard.c — the writer's check: before each write, the file at the
 * archive's path must still be the one LMDB has open and commits to, no
 * shorter than after our last commit, with sound header pages whose newest
 * commit is the last one LMDB's lock knows of. Another process that writes
 * into the file (not through LMDB) is caught here, before our next commit
 * could build on what it wrote; docs/archive.md says what this cannot see. */
#include "archive/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kv_guard_open(kv_archive *a, kv_err *err)
{
    int lfd, rc;
    struct stat lst, gst;
    if ((rc = mdb_env_get_fd(a->env, &lfd)) != 0)
        return kv_err_set(err, "%s: mdb_env_get_fd: %s", a->path, mdb_strerror(rc));
    if (fstat(lfd, &lst) != 0)
        return kv_err_errno(err, errno, "%s: fstat", a->path);
    a->guard_fd = open(a->path, O_RDONLY | O_CLOEXEC);
    if (a->guard_fd < 0)
        return kv_err_errno(err, errno, "%s: open", a->path);
    if (fstat(a->guard_fd, &gst) != 0) {
        kv_err_errno(err, errno, "%s: fstat", a->path);
        kv_guard_close(a);
        return -1;
    }
    if (gst.st_dev != lst.st_dev || gst.st_ino != lst.st_ino) {
        kv_guard_close(a);
        return kv_err_set(err, "%s: the file was replaced while it was being opened", a->path);
    }
    MDB_envinfo info;
    if ((rc = mdb_env_info(a->env, &info)) != 0) {
        kv_guard_close(a);
        return kv_err_set(err, "%s: mdb_env_info: %s", a->path, mdb_strerror(rc));
    }
    a->dev = lst.st_dev;
    a->ino = lst.st_ino;
    a->size = gst.st_size;
    a->txnid = (uint64_t)info.me_last_txnid;
    a->changed[0] = 0;
    return 0;
}

void kv_guard_close(kv_archive *a)
{
    if (a->guard_fd >= 0)
        close(a->guard_fd);
    a->guard_fd = -1;
}

/* What differs, into a->changed: 1, or 0 when nothing does; -1 when the
 * check itself cannot run (err). */
static int differs(kv_archive *a, uint64_t expect, kv_err *err)
{
    char *why = a->changed;
    size_t cap = sizeof a->changed;
    struct stat st;
    if (stat(a->path, &st) != 0) {
        if (errno != ENOENT)
            return kv_err_errno(err, errno, "%s: stat", a->path);
        snprintf(why, cap, "the file was removed or renamed");
        return 1;
    }
    if (st.st_dev != a->dev || st.st_ino != a->ino) {
        snprintf(why, cap, "the file was replaced: inode %llu, now %llu",
                 (unsigned long long)a->ino, (unsigned long long)st.st_ino);
        return 1;
    }
    if (fstat(a->guard_fd, &st) != 0)
        return kv_err_errno(err, errno, "%s: fstat", a->path);
    if (st.st_size < a->size) {
        snprintf(why, cap, "the file shrank from %lld to %lld bytes", (long long)a->size,
                 (long long)st.st_size);
        return 1;
    }
    kv_lmdb_meta m;
    if (kv_lmdb_read_header(a->guard_fd, st.st_size, &m, why, cap) != 0)
        return 1;
    if (expect ? m.txnid != expect : m.txnid < a->txnid) {
        snprintf(why, cap,
                 "its header's newest commit is transaction %llu, the last one %s is %llu",
                 (unsigned long long)m.txnid, expect ? "LMDB's lock knows of" : "this run made",
                 (unsigned long long)(expect ? expect : a->txnid));
        return 1;
    }
    return 0;
}

int kv_guard_check(kv_archive *a, uint64_t expect_txnid, kv_err *err)
{
    if (a->guard_fd < 0)
        return kv_err_set(err, "%s: not opened for writing", a->path);
    if (a->changed[0])
        return kv_changed(err, a); /* found before: stays refused */
    int rc = differs(a, expect_txnid, err);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        a->changed[0] = 0;
        return 0;
    }
    return kv_changed(err, a);
}

void kv_guard_committed(kv_archive *a, uint64_t txnid)
{
    struct stat st;
    a->txnid = txnid;
    if (a->guard_fd >= 0 && fstat(a->guard_fd, &st) == 0 && st.st_size > a->size)
        a->size = st.st_size;
}
