/* landlock.c — Landlock's three system calls (landlock.h). */
#define _GNU_SOURCE /* O_PATH */
#include "evaluator/confine/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* struct landlock_ruleset_attr (ABI 1: fs; 4: net; 6: scoped) */
typedef struct {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
} ll_ruleset_attr;

/* struct landlock_path_beneath_attr */
typedef struct __attribute__((packed)) {
    uint64_t allowed_access;
    int32_t parent_fd;
} ll_path_beneath;

#define LL_CREATE_RULESET_VERSION (1u << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_SCOPE_SIGNAL (1ull << 1) /* ABI 6 */

int kv_ll_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return abi > 0 ? (int)abi : 0;
}

uint64_t kv_ll_handled_fs(int abi)
{
    uint64_t m = (1ull << 13) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
    if (abi >= 2)
        m |= LL_REFER;
    if (abi >= 3)
        m |= LL_TRUNCATE;
    if (abi >= 5)
        m |= LL_IOCTL_DEV;
    return m;
}

int kv_ll_ruleset(int abi, int scope_signals, kv_err *err)
{
    ll_ruleset_attr attr = {.handled_access_fs = kv_ll_handled_fs(abi)};
    if (abi >= 6 && scope_signals)
        attr.scoped = LL_SCOPE_SIGNAL;
    int made = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (made < 0)
        return kv_err_errno(err, errno, "landlock_create_ruleset (ABI %d)", abi);
    int fd = fcntl(made, F_DUPFD_CLOEXEC, 10);
    int e = errno;
    close(made);
    if (fd < 0)
        return kv_err_errno(err, e, "fcntl F_DUPFD_CLOEXEC");
    return fd;
}

int kv_ll_allow_fd(int ruleset, int fd, uint64_t access)
{
    ll_path_beneath pb = {.allowed_access = access, .parent_fd = fd};
    if (access && syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) != 0)
        return errno;
    return 0;
}

int kv_ll_allow(int ruleset, const char *path, uint64_t access, uint64_t handled, kv_err *err)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 /* absent here: nothing to allow */
                                                   : kv_err_errno(err, errno, "open %s", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "stat %s", path);
    }
    access &= handled;
    if (!S_ISDIR(st.st_mode))
        access &= LL_FILE_RIGHTS;
    int e = kv_ll_allow_fd(ruleset, fd, access);
    close(fd);
    if (e != 0)
        return kv_err_errno(err, e, "landlock_add_rule %s", path);
    return 0;
}

int kv_ll_restrict(int ruleset)
{
    return syscall(SYS_landlock_restrict_self, ruleset, 0) == 0 ? 0 : errno;
}
