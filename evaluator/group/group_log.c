/* group_log.c — the text of the group's messages: extending a message held
 * in a fixed array, how a worker ended, a line quoted with its control
 * characters masked, and the last lines a worker wrote to its log
 * (worker-<group>-<rank>.log), since it started. */
#include "evaluator/group/group_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_TAIL_BYTES 2048
#define LOG_TAIL_LINES 6
#define LOG_LINE_MAX 160

void kv_grp_msg_open(kv_strbuf *b, const char *msg, size_t cap)
{
    *b = (kv_strbuf){.limit = cap - 1};
    kv_sb_puts(b, msg);
}

void kv_grp_msg_close(kv_strbuf *b, char *msg, size_t cap)
{
    if (kv_sb_copy(b, msg, cap) != 0) { /* out of memory: msg is as it was opened */
        size_t n = strnlen(msg, cap - 1);
        snprintf(msg + n, cap - n, " (the rest of this message left out: out of memory)");
    }
    kv_sb_free(b);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "a signal";
    }
}

/* "exited with status 3", "killed by signal 11 (SIGSEGV)", ... */
void kv_grp_describe_end(const worker *w, char *out, size_t cap)
{
    if (!w->gone)
        snprintf(out, cap, "closed its protocol socket (fd %d) but kept running", KV_PROTO_FD);
    else if (w->sig)
        snprintf(out, cap, "killed by signal %d (%s)%s", w->sig, signal_name(w->sig),
                 w->core ? ", core dumped" : "");
    else if (w->code >= 0)
        snprintf(out, cap, "exited with status %d", w->code);
    else
        snprintf(out, cap, "terminated (status unknown: reaped elsewhere)");
}

/* A line quoted for a message: at most max bytes, control characters as '?'. */
void kv_grp_snippet(const char *s, size_t max, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n < max && n + 4 < cap; s++)
        out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    if (*s && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* Appends the last lines this worker's process wrote to its log. */
void kv_grp_add_log_tail(kv_strbuf *b, worker *w, int rank)
{
    kv_out_flush(&w->out);
    const char *log_path = w->out.path;
    off_t log_start = w->out.start;
    int fd = open(log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        kv_sb_printf(b, "\nlog of rank %d: cannot open %s: %s", rank, log_path, strerror(errno));
        return;
    }
    struct stat st;
    char buf[LOG_TAIL_BYTES + 1];
    ssize_t n = -1;
    off_t from = 0;
    if (fstat(fd, &st) == 0) {
        from = st.st_size - LOG_TAIL_BYTES;
        if (from < log_start)
            from = log_start;
        if (from > st.st_size)
            from = st.st_size;
        do
            n = pread(fd, buf, (size_t)(st.st_size - from), from);
        while (n < 0 && errno == EINTR);
    }
    int e = errno;
    if (close(fd) != 0 && n >= 0) {
        n = -1;
        e = errno;
    }
    if (n < 0) {
        kv_sb_printf(b, "\nlog of rank %d: cannot read %s: %s", rank, log_path, strerror(e));
        return;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (n == 0) {
        kv_sb_printf(b, "\nlog of rank %d (%s): empty", rank, log_path);
        return;
    }
    /* the start of the last LOG_TAIL_LINES lines */
    char *start = buf;
    int lines = 0;
    for (char *p = buf + n; p > buf; p--) {
        if (p[-1] == '\n' && ++lines == LOG_TAIL_LINES) {
            start = p;
            break;
        }
    }
    if (start == buf && from > log_start) {
        char *nl = strchr(buf, '\n'); /* the first line is cut: drop it */
        if (nl)
            start = nl + 1;
    }
    kv_sb_printf(b, "\nlog of rank %d (%s), last lines:", rank, log_path);
    for (char *line = start; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char q[LOG_LINE_MAX + 8];
        kv_grp_snippet(line, LOG_LINE_MAX, q, sizeof q);
        kv_sb_printf(b, "\n  %s", q);
        line = nl ? nl + 1 : NULL;
    }
}
