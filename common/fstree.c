/* fstree.c — whole directory trees removed and copied through directory
 * descriptors (fsutil.h: kv_rm_rf, kv_rm_contents, kv_copy_tree).
 *
 * kevo runs these as root on folders that other users' processes write (the
 * workers' scratch and dump folder). A walk by path (lstat, then opendir or
 * unlink of the same path) follows a folder that was swapped for a symbolic
 * link in between, and deletes or reads outside the tree. Here every step is
 * taken relative to the descriptor of a directory already open: entries are
 * opened with O_NOFOLLOW | O_DIRECTORY and removed with unlinkat, so a link
 * is removed or refused, never followed, and a walk never leaves the
 * directories whose descriptors it holds. */
#define _GNU_SOURCE /* O_DIRECTORY, O_NOFOLLOW, fdopendir */
#include "common/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A copy refuses trees deeper than this (a dump is 4 deep); a removal has
 * no such bound: past the descriptors it may hold it fails with EMFILE. */
#define COPY_MAX_DEPTH 32

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

static int is_dot(const char *name)
{
    return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* ---- removal ------------------------------------------------------------------------------- */

static int remove_at(int dfd, const char *name);

/* Empties the open directory fd (closed here). Returns 0, or -1 with errno
 * of the first failure; keeps going past failures (best effort). */
static int empty_fd(int fd)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int rc = 0, saved = 0;
    struct dirent *de;
    for (;;) {
        errno = 0;
        if ((de = readdir(d)) == NULL) {
            if (errno != 0 && rc == 0) {
                rc = -1;
                saved = errno;
            }
            break;
        }
        if (is_dot(de->d_name))
            continue;
        if (remove_at(dirfd(d), de->d_name) != 0 && rc == 0) {
            rc = -1;
            saved = errno;
        }
    }
    if (closedir(d) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
}

/* Removes the entry name of the open directory dfd: a directory with what
 * it holds, anything else (a symbolic link included) by unlinkat. */
static int remove_at(int dfd, const char *name)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
            return -1;
        return 0;
    }
    int fd = openat(dfd, name, DIR_FLAGS);
    if (fd < 0) {
        /* swapped for a link or a file since fstatat: remove that, not its target */
        if (errno == ELOOP || errno == ENOTDIR)
            return unlinkat(dfd, name, 0) != 0 && errno != ENOENT ? -1 : 0;
        return errno == ENOENT ? 0 : -1;
    }
    int rc = empty_fd(fd), saved = errno;
    /* AT_REMOVEDIR on what is now a link fails (ENOTDIR) and follows nothing */
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT && rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
}

/* Opens the folder that holds path, and points *base at path's last
 * component (a copy of it in buf). */
static int open_parent(const char *path, char *buf, size_t cap, const char **base)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--; /* "dir/" names dir */
    if (len == 0 || len >= cap) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, len);
    buf[len] = '\0';
    char *slash = strrchr(buf, '/');
    const char *parent = ".";
    if (slash == buf) {
        parent = "/";
        *base = buf + 1;
    } else if (slash) {
        *slash = '\0';
        parent = buf;
        *base = slash + 1;
    } else {
        *base = buf;
    }
    if (!**base || is_dot(*base)) {
        errno = EINVAL; /* "/", "." and ".." are never removed */
        return -1;
    }
    return open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int kv_rm_rf(const char *path)
{
    char buf[PATH_MAX];
    const char *base;
    int pfd = open_parent(path, buf, sizeof buf, &base);
    if (pfd < 0)
        return errno == ENOENT ? 0 : -1;
    int rc = remove_at(pfd, base), saved = errno;
    close(pfd);
    errno = saved;
    return rc;
}

int kv_rm_contents(const char *dir)
{
    int fd = open(dir, DIR_FLAGS);
    if (fd < 0)
        return -1;
    return empty_fd(fd);
}

/* ---- copy ------------------------------------------------------------------------------------ */

/* Copies the regular file name of sfd (at path) to a new file of dfd. */
static int copy_file_at(int sfd, int dfd, const char *name, const char *path, kv_err *err)
{
    int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (in < 0)
        return kv_err_errno(err, errno, "open %s", path);
    struct stat st;
    if (fstat(in, &st) != 0) {
        int e = errno;
        close(in);
        return kv_err_errno(err, e, "fstat %s", path);
    }
    /* a second link could name a file its writer may not read (another user's) */
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(in);
        return kv_err_set(err, "%s is %s with %ju links, not a file of its own: not copied", path,
                          kv_file_kind(st.st_mode), (uintmax_t)st.st_nlink);
    }
    int out = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return kv_err_errno(err, e, "create the copy of %s", path);
    }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = kv_err_errno(err, errno, "read %s", path);
            break;
        }
        if (r == 0)
            break;
        for (ssize_t done = 0; done < r && rc == 0;) {
            ssize_t w = write(out, buf + done, (size_t)(r - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                rc = kv_err_errno(err, errno, "write the copy of %s", path);
            else
                done += w;
        }
        if (rc != 0)
            break;
    }
    close(in);
    if (close(out) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "close the copy of %s", path);
    return rc;
}

static int copy_dir_fd(int sfd, int dfd, const char *path, int depth, kv_err *err);

/* Copies the entry name of sfd into dfd: a folder with what it holds, or a
 * regular file; anything else is refused. */
static int copy_at(int sfd, int dfd, const char *name, const char *path, int depth, kv_err *err)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return kv_err_errno(err, errno, "stat %s", path);
    if (S_ISREG(st.st_mode))
        return copy_file_at(sfd, dfd, name, path, err);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err, "%s is %s, not a file or a folder: not copied", path,
                          kv_file_kind(st.st_mode));
    if (depth >= COPY_MAX_DEPTH)
        return kv_err_set(err, "%s: folders nested more than %d deep: not copied", path,
                          COPY_MAX_DEPTH);
    int sub = openat(sfd, name, DIR_FLAGS);
    if (sub < 0)
        return kv_err_errno(err, errno, "open folder %s", path);
    if (mkdirat(dfd, name, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        close(sub);
        return kv_err_errno(err, e, "make the copy of folder %s", path);
    }
    int dsub = openat(dfd, name, DIR_FLAGS);
    if (dsub < 0) {
        int e = errno;
        close(sub);
        return kv_err_errno(err, e, "open the copy of folder %s", path);
    }
    int rc = copy_dir_fd(sub, dsub, path, depth + 1, err);
    close(dsub);
    return rc; /* sub was closed by copy_dir_fd */
}

/* Copies what the open folder sfd (at path; closed here) holds into dfd. */
static int copy_dir_fd(int sfd, int dfd, const char *path, int depth, kv_err *err)
{
    DIR *d = fdopendir(sfd);
    if (!d) {
        int e = errno;
        close(sfd);
        return kv_err_errno(err, e, "opendir %s", path);
    }
    int rc = 0;
    struct dirent *de;
    for (;;) {
        errno = 0;
        if ((de = readdir(d)) == NULL) {
            if (errno != 0)
                rc = kv_err_errno(err, errno, "readdir %s", path);
            break;
        }
        if (is_dot(de->d_name))
            continue;
        char sub[PATH_MAX];
        if (kv_path_join(sub, sizeof sub, path, de->d_name, err) != 0 ||
            copy_at(dirfd(d), dfd, de->d_name, sub, depth, err) != 0) {
            rc = KV_FAIL;
            break;
        }
    }
    closedir(d);
    return rc;
}

int kv_copy_tree(const char *src, const char *dst, kv_err *err)
{
    int sfd = open(src, DIR_FLAGS);
    if (sfd < 0)
        return kv_err_errno(err, errno, "open folder %s", src);
    int dfd = open(dst, DIR_FLAGS);
    if (dfd < 0) {
        int e = errno;
        close(sfd);
        return kv_err_errno(err, e, "open folder %s", dst);
    }
    int rc = copy_dir_fd(sfd, dfd, src, 0, err);
    close(dfd);
    return rc;
}
