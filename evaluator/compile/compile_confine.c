/* compile_confine.c — the Landlock ruleset of one compile step (nvcc and its
 * children cicc, ptxas, gcc, ld; cuobjdump): read and execute the system's
 * programs and libraries, the CUDA toolkit, the few /etc files a compiler
 * reads, and the folders the flags name (kevo's include/ and patterns/,
 * NCCL's); read and write only the step's own folder (its TMPDIR is inside).
 * Not /etc as a whole, /root, /proc, the run directory or the compile cache:
 * `#include "/root/.ssh/id_rsa"` fails with EACCES, and the compiler's
 * message can quote nothing but the candidate. */
#include "evaluator/compile/compile_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/confine/landlock.h"

static const char *const read_roots[] = {
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/bin",
    "/sbin",
    /* the dynamic linker's cache, the compilers behind update-alternatives,
     * the time zone and the user database the C library may look up */
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
};
static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/urandom"};

/* The folder above path's folder ("<toolkit>/bin/nvcc" -> "<toolkit>"), or
 * path's folder with up == 0. */
static int folder_of(const char *path, int up, char *out, size_t cap)
{
    if (kv_compile_copy_str(out, cap, path) != 0)
        return -1;
    for (int i = 0; i <= up; i++) {
        char *slash = strrchr(out, '/');
        if (!slash || slash == out)
            return -1;
        *slash = '\0';
    }
    return 0;
}

int kv_compile_confine_ruleset(const char *tool, char *const flags[], int n_flags,
                               const char *workdir, int *ruleset, kv_err *err)
{
    *ruleset = -1;
    int abi = kv_ll_abi();
    if (!abi)
        return 0; /* the filter and the environment still apply */
    uint64_t handled = kv_ll_handled_fs(abi);
    int fd = kv_ll_ruleset(abi, 0, err);
    if (fd < 0)
        return kv_err_prefix(err, "confining the compile step");
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof read_roots / sizeof read_roots[0]; i++)
        rc = kv_ll_allow(fd, read_roots[i], LL_READ, handled, err);
    for (size_t i = 0; rc == 0 && i < sizeof devices / sizeof devices[0]; i++)
        rc = kv_ll_allow(fd, devices[i], LL_DEVICE, handled, err);
    /* the tool's folder as named (KEVO_NVCC), and its toolkit once links are resolved */
    char dir[PATH_MAX], real[PATH_MAX];
    if (rc == 0 && folder_of(tool, 0, dir, sizeof dir) == 0)
        rc = kv_ll_allow(fd, dir, LL_READ, handled, err);
    if (rc == 0 && realpath(tool, real) && folder_of(real, 1, dir, sizeof dir) == 0)
        rc = kv_ll_allow(fd, dir, LL_READ, handled, err);
    const char *nccl_home = getenv("NCCL_HOME");
    if (rc == 0 && nccl_home && nccl_home[0] == '/' && strcmp(nccl_home, "/") != 0)
        rc = kv_ll_allow(fd, nccl_home, LL_READ, handled, err);
    for (int i = 0; rc == 0 && i < n_flags; i++)
        if ((strncmp(flags[i], "-I", 2) == 0 || strncmp(flags[i], "-L", 2) == 0) &&
            flags[i][2] == '/' && flags[i][3] != '\0')
            rc = kv_ll_allow(fd, flags[i] + 2, LL_READ, handled, err);
    if (rc == 0)
        rc = kv_ll_allow(fd, workdir, LL_READ_WRITE, handled, err);
    if (rc != 0) {
        close(fd);
        return kv_err_prefix(err, "confining the compile step");
    }
    *ruleset = fd;
    return 0;
}
