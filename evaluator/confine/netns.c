/* netns.c — a group's network namespace (netns.h). */
#define _GNU_SOURCE /* setns, CLONE_NEWNET */
#include "evaluator/confine/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int reap(pid_t p)
{
    int st;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return st;
}

int kv_netns_possible(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(syscall(SYS_unshare, CLONE_NEWNET) == 0 ? 0 : 1);
    if (p < 0)
        return 0;
    int st = reap(p);
    return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* In the child: a new namespace, its loopback up. 0 or an errno. */
static int unshare_with_lo(void)
{
    if (syscall(SYS_unshare, CLONE_NEWNET) != 0)
        return errno;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int e = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        e = errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (!e && ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        e = errno;
    close(s);
    return e;
}

int kv_netns_new(kv_err *err)
{
    int ready[2], hold[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return kv_err_errno(err, errno, "network namespace: pipe");
    if (pipe2(hold, O_CLOEXEC) != 0) {
        int e = errno;
        close(ready[0]);
        close(ready[1]);
        return kv_err_errno(err, e, "network namespace: pipe");
    }
    pid_t p = fork();
    if (p == 0) {
        /* async-signal-safe calls only: our parent may run threads */
        close(ready[0]);
        close(hold[1]);
        int e = unshare_with_lo();
        unsigned char b = (unsigned char)(e > 255 ? 255 : e);
        (void)!write(ready[1], &b, 1);
        (void)!read(hold[0], &b, 1); /* until the parent has opened our namespace */
        _exit(0);
    }
    int e = errno;
    close(ready[1]);
    close(hold[0]);
    if (p < 0) {
        close(ready[0]);
        close(hold[1]);
        return kv_err_errno(err, e, "network namespace: fork");
    }
    unsigned char b = 0;
    ssize_t got;
    while ((got = read(ready[0], &b, 1)) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    int fd = -1;
    if (got != 1)
        kv_err_set(err, "network namespace: the helper process died");
    else if (b != 0)
        kv_err_errno(err, b, "network namespace: unshare(CLONE_NEWNET) and loopback up");
    else {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)p);
        int made = open(path, O_RDONLY | O_CLOEXEC);
        if (made < 0)
            kv_err_errno(err, errno, "network namespace: open %s", path);
        else if ((fd = fcntl(made, F_DUPFD_CLOEXEC, 10)) < 0)
            kv_err_errno(err, errno, "network namespace: fcntl F_DUPFD_CLOEXEC");
        if (made >= 0)
            close(made);
    }
    close(hold[1]); /* the helper exits */
    if (reap(p) < 0 && fd >= 0) {
        kv_err_errno(err, errno, "network namespace: waitpid");
        close(fd);
        fd = -1;
    }
    return fd;
}

int kv_netns_enter(int fd)
{
    return setns(fd, CLONE_NEWNET) == 0 ? 0 : errno;
}
