/* output.c — stdout's write errors, kept until main reports them. stdio keeps
 * only a flag for a failed write and glibc drops what it could not write, so
 * the reason (errno) of the first failed flush is remembered here: every
 * flush of stdout goes through kv_cli_flush_stdout, and main ends with
 * kv_cli_finish_stdout. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int first_errno; /* of the first failed flush of stdout; 0 if none */

int kv_cli_flush_stdout(void)
{
    /* A large write goes past the buffer and fails inside printf or puts:
     * then the flush has nothing left to fail on, and the errno that write
     * left (no later call has failed in between, as a rule) is the reason. */
    int before = errno;
    errno = 0;
    int flushed = fflush(stdout) == 0;
    int e = flushed ? before : errno;
    if (flushed && !ferror(stdout))
        return 0;
    if (!first_errno)
        first_errno = e;
    return -1;
}

int kv_cli_stdout_closed(void)
{
    if (first_errno == EPIPE)
        return 1;
    if (!ferror(stdout))
        return 0;
    /* a write failed inside printf, its errno since overwritten: a pipe whose
     * reader has gone polls as an error */
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

int kv_cli_finish_stdout(int rc)
{
    int bad = kv_cli_flush_stdout() != 0;
    errno = 0;
    /* A stdout closed before kevo started (EBADF, nothing written) is no error. */
    if (fclose(stdout) != 0 && !bad && errno != EBADF) {
        bad = 1;
        first_errno = errno;
    }
    if (!bad)
        return rc;
    if (kv_cli_stdout_closed()) /* the reader has what it wanted */
        return rc;
    fprintf(stderr, "kevo: writing to standard output: %s\n",
            strerror(first_errno ? first_errno : EIO));
    return rc == KV_EXIT_OK ? KV_EXIT_FAIL : rc;
}
