/* fsutil.c — whole-file read, atomic write (whole or streamed), mkdir -p,
 * path join.
 *
 * Every message names the path and the system call that failed, e.g.
 * "open /x/y.json: No such file or directory". */
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

const char *kv_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "a special file";
    }
}

/* Reads the open regular file fd (path) to EOF, at most max bytes. */
static int read_bounded(int fd, const char *path, off_t size, size_t max, char **out,
                        size_t *out_len, kv_err *err)
{
    /* Sized from fstat, but read to EOF regardless (the file may change
     * while read); one byte past the limit tells a file that grew over it. */
    size_t cap = (size > 0 ? (size_t)size : 4096) + 2;
    if (cap > max + 2)
        cap = max + 2;
    char *buf = malloc(cap);
    if (!buf)
        return kv_err_set(err, "read %s: out of memory (%zu bytes)", path, cap);
    size_t len = 0;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= max + 2)
                break;
            size_t ncap = cap > (max + 2) / 2 ? max + 2 : cap * 2;
            char *nbuf = realloc(buf, ncap);
            if (!nbuf) {
                free(buf);
                return kv_err_set(err, "read %s: out of memory (%zu bytes)", path, ncap);
            }
            buf = nbuf;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return kv_err_errno(err, e, "read %s", path);
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > max) {
        free(buf);
        return kv_err_set(err, "%s is larger than the limit of %zu bytes", path, max);
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len)
        *out_len = len;
    return KV_OK;
}

int kv_open_regular(const char *path, struct stat *st, kv_err *err)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fstat %s", path);
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return kv_err_set(err, "%s is %s, not a regular file", path, kv_file_kind(st->st_mode));
    }
    return fd;
}

int kv_open_own(const char *path, int append, kv_err *err)
{
    int fd = open(path,
                  O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                      (append ? O_APPEND : O_TRUNC),
                  0644);
    if (fd < 0 && errno == ELOOP)
        return kv_err_set(err,
                          "%s is a symbolic link: kevo writes its own files in place, "
                          "never through a link",
                          path);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s for writing", path);
    struct stat st;
    int fl;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fstat %s", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kv_err_set(err, "%s is %s, not a regular file", path, kv_file_kind(st.st_mode));
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fcntl %s", path);
    }
    return fd;
}

FILE *kv_fopen_own(const char *path, int append, kv_err *err)
{
    int fd = kv_open_own(path, append, err);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        kv_err_errno(err, errno, "fdopen %s", path);
        close(fd);
    }
    return f;
}

int kv_read_file_max(const char *path, size_t max_bytes, char **out, size_t *out_len, kv_err *err)
{
    struct stat st;
    int fd = kv_open_regular(path, &st, err);
    if (fd < 0)
        return KV_FAIL;
    if ((uintmax_t)st.st_size > max_bytes) {
        close(fd);
        return kv_err_set(err, "%s is larger than the limit of %zu bytes (%jd bytes)", path,
                          max_bytes, (intmax_t)st.st_size);
    }
    int rc = read_bounded(fd, path, st.st_size, max_bytes, out, out_len, err);
    if (close(fd) != 0 && rc == KV_OK) {
        int e = errno;
        free(*out);
        *out = NULL;
        return kv_err_errno(err, e, "close %s", path);
    }
    return rc;
}

int kv_read_file(const char *path, char **out, size_t *out_len, kv_err *err)
{
    return kv_read_file_max(path, KV_MAX_TEXT_BYTES, out, out_len, err);
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

int kv_atomic_open(kv_atomic_file *af, const char *path, kv_err *err)
{
    /* Each temporary name is new (process id and a counter), and O_EXCL makes
     * sure of it: two writers never share a temporary file, and a stale one
     * left by a crash is passed over rather than reused. Mode 0666 lets the
     * umask decide, as for any file the user creates. */
    static atomic_uint counter;

    af->f = NULL;
    af->tmp[0] = '\0';
    af->path[0] = '\0';
    af->direct = 0;
    size_t plen = strlen(path);
    if (plen >= sizeof af->path)
        return kv_err_errno(err, ENAMETOOLONG, "write %s", path);
    memcpy(af->path, path, plen + 1);

    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        unsigned n = atomic_fetch_add(&counter, 1u);
        int r = snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld.%u", path, (long)getpid(), n);
        if (r < 0 || (size_t)r >= sizeof af->tmp)
            return kv_err_errno(err, ENAMETOOLONG, "write %s", path);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return kv_err_errno(err, errno, "open %s", af->tmp);
    }
    if (fd < 0)
        return kv_err_errno(err, EEXIST, "open %s", af->tmp);

    af->f = fdopen(fd, "w");
    if (!af->f) {
        int e = errno;
        close(fd);       /* already failing: its own error would add nothing */
        unlink(af->tmp); /* best effort: the message below is the one that matters */
        return kv_err_errno(err, e, "fdopen %s", af->tmp);
    }
    return KV_OK;
}

void kv_atomic_abandon(kv_atomic_file *af)
{
    if (!af->f)
        return;
    /* Best effort: the file is being thrown away, and the caller is already
     * reporting the failure that made it do so. */
    fclose(af->f);
    if (!af->direct)
        unlink(af->tmp);
    af->f = NULL;
}

int kv_atomic_commit(kv_atomic_file *af, kv_err *err)
{
    if (!af->f)
        return kv_err_set(err, "write %s: the file is not open", af->path[0] ? af->path : "?");
    int rc = KV_OK;
    /* A write error may have happened long before (stdio keeps only the
     * flag): its errno is gone, so EIO stands for it. */
    const char *name = af->direct ? af->path : af->tmp;
    errno = 0;
    if (fflush(af->f) != 0 || ferror(af->f))
        rc = kv_err_errno(err, errno ? errno : EIO, "write %s", name);
    else if (af->direct)
        ; /* a FIFO or a device: nothing to fsync, nothing to rename */
    else if (fsync(fileno(af->f)) != 0)
        rc = kv_err_errno(err, errno, "fsync %s", af->tmp);
    if (fclose(af->f) != 0 && rc == KV_OK)
        rc = kv_err_errno(err, errno, "close %s", name);
    af->f = NULL;
    if (af->direct)
        return rc;
    if (rc == KV_OK && rename(af->tmp, af->path) != 0)
        rc = kv_err_errno(err, errno, "rename %s to %s", af->tmp, af->path);
    if (rc != KV_OK) {
        unlink(af->tmp); /* best effort: the message above is the one that matters */
        return rc;
    }
    /* The new contents are in place; this only makes the rename durable. */
    return fsync_parent(af->path, err);
}

int kv_atomic_write_all(kv_atomic_file *af, const void *data, size_t len, kv_err *err)
{
    errno = 0;
    if (len > 0 && fwrite(data, 1, len, af->f) != len) {
        int e = errno ? errno : EIO;
        kv_err_errno(err, e, "write %s", af->direct ? af->path : af->tmp);
        kv_atomic_abandon(af);
        return KV_FAIL;
    }
    return kv_atomic_commit(af, err);
}

int kv_write_file_atomic(const char *path, const void *data, size_t len, kv_err *err)
{
    kv_atomic_file af;
    if (kv_atomic_open(&af, path, err) != KV_OK)
        return KV_FAIL;
    return kv_atomic_write_all(&af, data, len, err);
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

int kv_mkdir_own(const char *path, int mode, kv_err *err)
{
    if (kv_mkdir_p(path, mode & 0755, err) != KV_OK)
        return KV_FAIL;
    struct stat st;
    if (lstat(path, &st) != 0)
        return kv_err_errno(err, errno, "%s", path);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err,
                          "%s is not a directory (a link, or another file): kevo writes "
                          "its own files there; remove it or name another folder",
                          path);
    if (st.st_uid != geteuid())
        return kv_err_set(err,
                          "%s belongs to uid %u, not to kevo's (%u): another user may have "
                          "made it first; remove it or name another folder",
                          path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 002) /* a group that may write is the owner's choice (umask 002) */
        return kv_err_set(err,
                          "%s is writable by others (mode %04o): another user could swap "
                          "kevo's files there; chmod o-w it or name another folder",
                          path, (unsigned)(st.st_mode & 07777));
    return KV_OK;
}

int kv_path_join(char *out, size_t cap, const char *dir, const char *name, kv_err *err)
{
    size_t dl = strlen(dir);
    const char *sep = dl > 0 && dir[dl - 1] != '/' ? "/" : "";
    int r = snprintf(out, cap, "%s%s%s", dir, sep, name);
    if (r < 0 || (size_t)r >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return kv_err_set(err, "path too long (%zu bytes max): %s%s%s", cap > 0 ? cap - 1 : 0, dir,
                          sep, name);
    }
    return KV_OK;
}

int kv_copy_into(const char *src, kv_atomic_file *af, size_t max_bytes, kv_err *err)
{
    struct stat st;
    int fd = kv_open_regular(src, &st, err);
    if (fd < 0)
        return KV_FAIL;
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return kv_err_set(err, "%s is larger than the limit of %zu bytes", src, max_bytes);
    }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = kv_err_errno(err, errno, "read %s", src);
            break;
        }
        if (r == 0)
            break;
        if (fwrite(buf, 1, (size_t)r, af->f) != (size_t)r) {
            rc = kv_err_errno(err, errno ? errno : EIO, "write %s", af->tmp);
            break;
        }
    }
    close(fd);
    return rc;
}
