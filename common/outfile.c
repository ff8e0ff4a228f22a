/* outfile.c — a file the user names for kevo to write (--out PATH): a
 * regular file is replaced atomically (kv_atomic_open: a temporary file
 * renamed over it), through a symbolic link when PATH is one (the link stays
 * and its target is replaced); anything else (a FIFO, a device such as
 * /dev/null or /dev/stdout's terminal or pipe, a socket, a dangling link) is
 * written through: opened for writing where it is, never renamed over. */
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens path itself for writing (af->direct). */
static int open_through(kv_atomic_file *af, const char *path, int create, kv_err *err)
{
    af->f = NULL;
    af->tmp[0] = '\0';
    af->direct = 1;
    if (snprintf(af->path, sizeof af->path, "%s", path) >= (int)sizeof af->path)
        return kv_err_errno(err, ENAMETOOLONG, "write %s", path);
    int fd = open(path, O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0666);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    af->f = fdopen(fd, "w");
    if (!af->f) {
        int e = errno;
        close(fd); /* already failing: its own error would add nothing */
        return kv_err_errno(err, e, "fdopen %s", path);
    }
    return KV_OK;
}

int kv_output_open(kv_atomic_file *af, const char *path, kv_err *err)
{
    struct stat st, lst;
    af->f = NULL;
    af->direct = 0;
    if (lstat(path, &lst) != 0) {
        if (errno != ENOENT)
            return kv_err_errno(err, errno, "lstat %s", path);
        return kv_atomic_open(af, path, err); /* a new file */
    }
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && S_ISLNK(lst.st_mode))
            return open_through(af, path, 1, err); /* a dangling link: creates its target */
        return kv_err_errno(err, errno, "stat %s", path);
    }
    if (S_ISDIR(st.st_mode))
        return kv_err_set(err, "%s is a directory, not a file to write", path);
    if (!S_ISREG(st.st_mode))
        return open_through(af, path, 0, err);
    if (!S_ISLNK(lst.st_mode))
        return kv_atomic_open(af, path, err);
    /* a link to a regular file: its target is replaced, the link stays */
    char *target = realpath(path, NULL);
    if (!target)
        return kv_err_errno(err, errno, "realpath %s", path);
    int rc = kv_atomic_open(af, target, err);
    free(target);
    return rc;
}

int kv_write_output(const char *path, const void *data, size_t len, kv_err *err)
{
    kv_atomic_file af;
    if (kv_output_open(&af, path, err) != KV_OK)
        return KV_FAIL;
    return kv_atomic_write_all(&af, data, len, err);
}
