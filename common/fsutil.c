/* fsutil.c — whole-file read, atomic write, mkdir -p, path join.
 *
 * Every message names the path and the system call that failed, e.g.
 * "open /x/y.json: No such file or directory". */
#include "kevo/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int kv_read_file(const char *path, char **out, size_t *out_len, kv_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);

    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fstat %s", path);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return kv_err_errno(err, EISDIR, "read %s", path);
    }

    /* Size the buffer from fstat but read to EOF regardless: the file may
     * change while we read, and some files (pipes, /proc) report 0. */
    size_t cap = st.st_size > 0 && (uintmax_t)st.st_size < SIZE_MAX - 1
                     ? (size_t)st.st_size + 1
                     : 4096;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return kv_err_set(err, "read %s: out of memory (%zu bytes)", path, cap);
    }
    size_t len = 0;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                close(fd);
                return kv_err_set(err, "read %s: file too large", path);
            }
            size_t ncap = cap * 2;
            char *nbuf = realloc(buf, ncap);
            if (!nbuf) {
                free(buf);
                close(fd);
                return kv_err_set(err, "read %s: out of memory (%zu bytes)", path, ncap);
            }
            buf = nbuf;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return kv_err_errno(err, e, "read %s", path);
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (close(fd) != 0) {
        int e = errno;
        free(buf);
        return kv_err_errno(err, e, "close %s", path);
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len)
        *out_len = len;
    return KV_OK;
}

/* Writes all of data to fd, through short writes and EINTR. */
static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* fsyncs the directory holding path, so that a rename into it is durable. */
static int fsync_parent(const char *path, kv_err *err)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return kv_err_set(err, "write %s: out of memory", path);

    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        kv_err_errno(err, errno, "open directory %s", dir);
        free(dir);
        return KV_FAIL;
    }
    if (fsync(fd) != 0) {
        kv_err_errno(err, errno, "fsync directory %s", dir);
        close(fd);
        free(dir);
        return KV_FAIL;
    }
    if (close(fd) != 0) {
        kv_err_errno(err, errno, "close directory %s", dir);
        free(dir);
        return KV_FAIL;
    }
    free(dir);
    return KV_OK;
}

int kv_write_file_atomic(const char *path, const void *data, size_t len, kv_err *err)
{
    size_t tmp_cap = strlen(path) + 32;
    char *tmp = malloc(tmp_cap);
    if (!tmp)
        return kv_err_set(err, "write %s: out of memory", path);
    snprintf(tmp, tmp_cap, "%s.tmp.%ld", path, (long)getpid());

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        kv_err_errno(err, errno, "open %s", tmp);
        free(tmp);
        return KV_FAIL;
    }
    if (write_all(fd, data, len) != 0) {
        kv_err_errno(err, errno, "write %s", tmp);
        goto fail_open;
    }
    if (fsync(fd) != 0) {
        kv_err_errno(err, errno, "fsync %s", tmp);
        goto fail_open;
    }
    if (close(fd) != 0) {
        kv_err_errno(err, errno, "close %s", tmp);
        goto fail_closed;
    }
    if (rename(tmp, path) != 0) {
        kv_err_errno(err, errno, "rename %s to %s", tmp, path);
        goto fail_closed;
    }
    free(tmp);
    /* The new contents are in place; this only makes the rename durable. */
    return fsync_parent(path, err);

fail_open:
    close(fd); /* already failing: its own error would add nothing */
fail_closed:
    unlink(tmp); /* best effort: the message above is the one that matters */
    free(tmp);
    return KV_FAIL;
}

/* mkdir that treats an existing directory as success. */
static int mkdir_one(const char *path, int mode, kv_err *err)
{
    if (mkdir(path, (mode_t)mode) == 0)
        return KV_OK;
    int e = errno;
    if (e == EEXIST) {
        struct stat st;
        if (stat(path, &st) != 0)
            return kv_err_errno(err, errno, "stat %s", path);
        if (S_ISDIR(st.st_mode))
            return KV_OK;
        return kv_err_errno(err, ENOTDIR, "mkdir %s", path);
    }
    return kv_err_errno(err, e, "mkdir %s", path);
}

int kv_mkdir_p(const char *path, int mode, kv_err *err)
{
    if (!path || !path[0])
        return kv_err_set(err, "mkdir: empty path");
    char *p = strdup(path);
    if (!p)
        return kv_err_set(err, "mkdir %s: out of memory", path);

    /* Create each prefix that ends just before a '/', then the whole path.
     * Repeated slashes give empty components, which are skipped. */
    for (char *s = p + 1; *s; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = '\0';
        int rc = mkdir_one(p, mode, err);
        *s = '/';
        if (rc != KV_OK) {
            free(p);
            return KV_FAIL;
        }
    }
    int rc = mkdir_one(p, mode, err);
    free(p);
    return rc;
}

int kv_path_join(char *out, size_t cap, const char *dir, const char *name, kv_err *err)
{
    size_t dl = strlen(dir);
    const char *sep = dl > 0 && dir[dl - 1] != '/' ? "/" : "";
    int r = snprintf(out, cap, "%s%s%s", dir, sep, name);
    if (r < 0 || (size_t)r >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return kv_err_set(err, "path too long (%zu bytes max): %s%s%s", cap > 0 ? cap - 1 : 0,
                          dir, sep, name);
    }
    return KV_OK;
}
