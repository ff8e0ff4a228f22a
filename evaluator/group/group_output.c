/* group_output.c — what the workers print: stdout and stderr (device printf
 * included) go into a pipe that the supervisor drains into the worker's log,
 * so a candidate's flood costs time, never the disk.
 *
 * Per job (and per start, before the first job), the first `cap` bytes go to
 * the log as they come; after that the last `cap` bytes are kept in a ring
 * and written when the job ends, behind a line saying how many bytes were
 * cut. A log past `log_max` bytes is renamed to <log>.1 (replacing the one
 * before) and started anew, so one worker's logs never exceed 2 x log_max. */
#define _GNU_SOURCE /* pipe2, O_PATH, dl_iterate_phdr */
#include "evaluator/group/group_internal.h"
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DRAIN_CHUNK 65536
#define FLUSH_DRAIN_MAX ((size_t)4 << 20) /* a job's end reads at most this much more */

void kv_out_init(kv_outcap *o)
{
    memset(o, 0, sizeof *o);
    o->fd = o->log = -1;
}

static int open_log(kv_outcap *o, kv_err *err)
{
    o->log = kv_open_own(o->path, 1, err);
    return o->log < 0 ? -1 : 0;
}

/* Writes to the log, rotating it first when it would grow past log_max.
 * Errors are dropped: a log that cannot be written must not stop a job. */
static void log_write(kv_outcap *o, const char *p, size_t n)
{
    struct stat st;
    if (o->log < 0)
        return;
    if (fstat(o->log, &st) == 0 && (size_t)st.st_size + n > o->log_max && st.st_size > 0) {
        char old[PATH_MAX + 4];
        snprintf(old, sizeof old, "%s.1", o->path);
        close(o->log);
        o->log = -1;
        if (rename(o->path, old) != 0 || open_log(o, NULL) != 0)
            return;
        o->start = 0;
        static const char cont[] =
            "--- kevo: log rotated; what came before is in the .1 file ---\n";
        if (write(o->log, cont, sizeof cont - 1) < 0)
            return;
    }
    while (n > 0) {
        ssize_t w = write(o->log, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

int kv_out_start(kv_outcap *o, const char *path, size_t cap, size_t log_max, const char *mark,
                 int *child_fd, kv_err *err)
{
    kv_out_close(o);
    snprintf(o->path, sizeof o->path, "%s", path);
    o->cap = cap;
    o->log_max = log_max > 2 * cap + 4096 ? log_max : 2 * cap + 4096;
    o->head_left = cap;
    o->cut = 0;
    o->ring_len = o->ring_pos = 0;
    if (!o->ring && !(o->ring = malloc(cap)))
        return kv_err_set(err, "output ring of %zu bytes: out of memory", cap);
    o->ring_cap = cap;
    if (open_log(o, err) != 0)
        return -1;
    log_write(o, mark, strlen(mark));
    struct stat st;
    if (fstat(o->log, &st) != 0) {
        int e = errno;
        kv_out_close(o);
        return kv_err_errno(err, e, "stat %s", path);
    }
    o->start = st.st_size;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        int e = errno;
        kv_out_close(o);
        return kv_err_errno(err, e, "pipe for the output of %s", path);
    }
    int fl = fcntl(p[0], F_GETFL);
    if (fl < 0 || fcntl(p[0], F_SETFL, fl | O_NONBLOCK) != 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        kv_out_close(o);
        return kv_err_errno(err, e, "fcntl O_NONBLOCK");
    }
    o->fd = p[0];
    *child_fd = p[1];
    return 0;
}

static void take(kv_outcap *o, const char *p, size_t n)
{
    if (o->head_left) {
        size_t k = n < o->head_left ? n : o->head_left;
        log_write(o, p, k);
        o->head_left -= k;
        p += k;
        n -= k;
    }
    for (; n > 0 && o->ring_cap;) { /* the ring keeps the last ring_cap bytes */
        size_t k = o->ring_cap - o->ring_pos;
        if (k > n)
            k = n;
        size_t over = o->ring_len + k > o->ring_cap ? o->ring_len + k - o->ring_cap : 0;
        o->cut += over;
        memcpy(o->ring + o->ring_pos, p, k);
        o->ring_pos = (o->ring_pos + k) % o->ring_cap;
        o->ring_len = o->ring_len + k - over;
        p += k;
        n -= k;
    }
}

size_t kv_out_drain(kv_outcap *o, size_t budget)
{
    char buf[DRAIN_CHUNK];
    size_t got = 0;
    while (o->fd >= 0 && got < budget) {
        ssize_t n = read(o->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0) { /* every writer is gone */
                close(o->fd);
                o->fd = -1;
            }
            break;
        }
        take(o, buf, (size_t)n);
        got += (size_t)n;
    }
    return got;
}

void kv_out_flush(kv_outcap *o)
{
    if (o->log < 0 && o->fd < 0)
        return;
    kv_out_drain(o, FLUSH_DRAIN_MAX);
    if (o->ring_len) {
        char line[128];
        int n = snprintf(line, sizeof line,
                         "\n--- kevo: %" PRIu64 " bytes of output cut here (the first and last "
                         "%zu KiB of each job are kept) ---\n",
                         o->cut, o->cap >> 10);
        if (o->cut)
            log_write(o, line, (size_t)n);
        size_t first = (o->ring_pos + o->ring_cap - o->ring_len) % o->ring_cap;
        size_t k = o->ring_cap - first < o->ring_len ? o->ring_cap - first : o->ring_len;
        log_write(o, o->ring + first, k);
        log_write(o, o->ring, o->ring_len - k);
    }
    o->ring_len = o->ring_pos = 0;
    o->cut = 0;
    o->head_left = o->cap;
}

void kv_out_close(kv_outcap *o)
{
    kv_out_flush(o);
    if (o->fd >= 0)
        close(o->fd);
    if (o->log >= 0)
        close(o->log);
    free(o->ring);
    char path[PATH_MAX];
    off_t start = o->start;
    memcpy(path, o->path, sizeof path);
    kv_out_init(o);
    memcpy(o->path, path, sizeof path); /* messages may still quote the log */
    o->start = start;
}
