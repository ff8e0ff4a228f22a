#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* The definitions: their names in parentheses, past err.h's macros. */

int(kv_err_set)(kv_err *e, const char *fmt, ...)
{
    if (!e)
        return KV_FAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return KV_FAIL;
}

int(kv_err_prefix)(kv_err *e, const char *fmt, ...)
{
    if (!e)
        return KV_FAIL;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* shift the old message right and put "prefix: " in front, truncating at the end */
    size_t cap = sizeof e->msg;
    size_t pl = strlen(prefix);
    if (pl > cap / 2)
        pl = cap / 2;
    size_t ol = strnlen(e->msg, cap - 1);
    if (pl + 2 + ol > cap - 1)
        ol = cap - 1 - pl - 2;
    memmove(e->msg + pl + 2, e->msg, ol);
    e->msg[pl + 2 + ol] = 0;
    memcpy(e->msg, prefix, pl);
    e->msg[pl] = ':';
    e->msg[pl + 1] = ' ';
    return KV_FAIL;
}

int(kv_err_errno)(kv_err *e, int errno_value, const char *fmt, ...)
{
    if (!e)
        return KV_FAIL;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(e->msg, sizeof e->msg, "%s: %s", what, strerror(errno_value));
    return KV_FAIL;
}

void kv_wait_status_text(int status, char *out, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "killed by signal %d (%s)%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
    else if (WIFSTOPPED(status))
        snprintf(out, cap, "stopped by signal %d", WSTOPSIG(status));
    else
        snprintf(out, cap, "ended with wait status 0x%x", (unsigned)status);
}
