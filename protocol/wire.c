/* wire.c — the supervisor/worker protocol's transport: a line
 * reader over the worker's socket, and a writer that never raises SIGPIPE
 * (protocol/protocol.h; docs/evaluator.md, "Supervisor and workers"). What
 * the lines hold is codec.c's. */
#include "protocol/protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"

/* How long a send waits for room in a full socket before it gives up. */
#define SEND_WAIT_MS 2000

/* ---- line reader ---------------------------------------------------------------------------- */

void kv_line_reader_init(kv_line_reader *r, int fd)
{
    r->fd = fd;
    r->buf = NULL;
    r->len = r->cap = 0;
    r->eof = 0;
}

void kv_line_reader_free(kv_line_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

int kv_line_reader_fill(kv_line_reader *r, kv_err *err)
{
    /* A line of KV_PROTO_LINE_MAX bytes plus its newline always fits. */
    const size_t max_cap = (size_t)KV_PROTO_LINE_MAX + 1;
    if (r->eof)
        return 0;
    if (r->len == r->cap) {
        if (r->cap >= max_cap) {
            if (memchr(r->buf, '\n', r->len))
                return 0; /* the caller has complete lines to take first */
            return kv_err_set(err, "fd %d: a line is longer than %d bytes", r->fd,
                              KV_PROTO_LINE_MAX);
        }
        size_t ncap = r->cap ? r->cap * 2 : 4096;
        if (ncap > max_cap)
            ncap = max_cap;
        char *nbuf = realloc(r->buf, ncap);
        if (!nbuf)
            return kv_err_set(err, "fd %d: out of memory (%zu bytes)", r->fd, ncap);
        r->buf = nbuf;
        r->cap = ncap;
    }
    ssize_t n;
    do
        n = read(r->fd, r->buf + r->len, r->cap - r->len);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != ECONNRESET)
            return kv_err_errno(err, errno, "read fd %d", r->fd);
        n = 0; /* a Unix socket whose peer left unread data: its end, after all it sent */
    }
    if (n == 0) {
        r->eof = 1;
        return 0;
    }
    r->len += (size_t)n;
    if (r->len == max_cap && !memchr(r->buf, '\n', r->len))
        return kv_err_set(err, "fd %d: a line is longer than %d bytes", r->fd, KV_PROTO_LINE_MAX);
    return 0;
}

char *kv_line_reader_next(kv_line_reader *r)
{
    char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
    if (!nl)
        return NULL;
    size_t n = (size_t)(nl - r->buf);
    char *line = malloc(n + 1);
    if (!line)
        return NULL; /* taken again on the next call */
    memcpy(line, r->buf, n);
    line[n] = '\0';
    r->len -= n + 1;
    memmove(r->buf, nl + 1, r->len);
    return line;
}

/* ---- sending -------------------------------------------------------------------------------- */

/* One chunk: send() with MSG_NOSIGNAL on a socket (a gone peer is EPIPE, not
 * a signal), write() on anything else. */
static ssize_t send_some(int fd, const char *p, size_t n)
{
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK)
        w = write(fd, p, n);
    return w;
}

static int send_all(int fd, const char *p, size_t n, kv_err *err)
{
    int64_t give_up = 0;
    while (n > 0) {
        ssize_t w = send_some(fd, p, n);
        if (w >= 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            int e = errno;
            kv_err_errno(err, e, "send on fd %d", fd);
            errno = e; /* callers tell a gone peer (EPIPE, ECONNRESET) from the rest */
            return -1;
        }
        /* A non-blocking fd whose peer does not read: wait a little for
         * room, never forever. */
        int64_t now = kv_monotonic_ns();
        if (!give_up)
            give_up = now + (int64_t)SEND_WAIT_MS * 1000000;
        if (now >= give_up) {
            kv_err_set(err, "send on fd %d: the peer has not read for %d ms", fd, SEND_WAIT_MS);
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int ms = (int)((give_up - now) / 1000000) + 1;
        if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
            return kv_err_errno(err, errno, "poll fd %d", fd);
    }
    return 0;
}

int kv_proto_send(int fd, const char *line, kv_err *err)
{
    size_t n = strlen(line);
    if (memchr(line, '\n', n))
        return kv_err_set(err, "send on fd %d: the message holds a newline", fd);
    if (n > KV_PROTO_LINE_MAX)
        return kv_err_set(err, "send on fd %d: the message is longer than %d bytes", fd,
                          KV_PROTO_LINE_MAX);
    /* One buffer, so a message goes out in one send whenever the socket has
     * room, and a reader never sees half of it for long. */
    char *buf = malloc(n + 1);
    if (!buf)
        return kv_err_set(err, "send on fd %d: out of memory", fd);
    memcpy(buf, line, n);
    buf[n] = '\n';
    int rc = send_all(fd, buf, n + 1, err);
    int e = errno;
    free(buf);
    errno = e;
    return rc;
}
