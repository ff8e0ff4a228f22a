/* refresh.c — the report written from a child process (refresh.h). The
 * child's message comes back on a pipe. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "report/html.h"
#include "report/refresh.h"

int kv_report_refresh(void *ctx, const char *run_dir, kv_err *err)
{
    (void)ctx;
    char out[PATH_MAX];
    int fds[2];
    if (kv_path_join(out, sizeof out, run_dir, KV_REPORT_FILE, err) != 0)
        return -1;
    if (pipe(fds) != 0)
        return kv_err_errno(err, errno, "report of %s: pipe", run_dir);
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return kv_err_errno(err, e, "report of %s: fork", run_dir);
    }
    if (pid == 0) {
        close(fds[0]);
        kv_archive_crash_default(); /* a crash is the parent's to name */
        kv_err cerr = {{0}};
        int rc = kv_report_write(run_dir, out, NULL, &cerr);
        if (rc != 0)
            (void)!write(fds[1], cerr.msg, strlen(cerr.msg));
        /* _exit: no atexit handlers of the parent's, no stdio flushed twice */
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    char msg[sizeof err->msg];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fds[0], msg + got, sizeof msg - 1 - got);
        if (n > 0 && (got += (size_t)n) < sizeof msg - 1)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    msg[got] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return kv_err_errno(err, errno, "report of %s: waitpid", run_dir);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (got > 0)
        return kv_err_set(err, "%s: %s", out, msg);
    char how[128];
    kv_wait_status_text(status, how, sizeof how);
    return kv_err_set(err, "%s: the process writing it %s", out, how);
}
