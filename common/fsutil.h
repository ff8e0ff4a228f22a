/* fsutil.h — small file-system helpers with kevo's error convention. */
#ifndef KEVO_FSUTIL_H
#define KEVO_FSUTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "common/err.h"

/* How much kevo reads whole into memory, per kind of file (docs/config.md,
 * docs/problems.md): a larger file is refused, naming it and the limit. */
#define KV_MAX_CONFIG_BYTES ((size_t)1 << 20)   /* a run configuration (JSON) */
#define KV_MAX_PROBLEM_BYTES ((size_t)1 << 20)  /* a problem.json */
#define KV_MAX_SOURCE_BYTES ((size_t)1 << 20)   /* a kernel source, header, prompt text */
#define KV_MAX_OBJECT_BYTES ((size_t)256 << 20) /* a compiled shared object */
/* what the compiler made of one candidate: its SASS, PTX, imports and ptxas report (the SASS
 * of a large seed passes 1 MiB) */
#define KV_MAX_ARTEFACT_BYTES ((size_t)256 << 20)
/* kv_read_file's limit: the largest of the text kinds above. */
#define KV_MAX_TEXT_BYTES ((size_t)1 << 20)

/* Reads a whole regular file of at most max_bytes into a NUL-terminated
 * malloc'ed buffer. Anything else is refused before a byte is read, and
 * without blocking: the file is opened with O_NONBLOCK and checked with
 * fstat, so a FIFO ("... is a FIFO, not a regular file"), a device (also
 * through a symlink: /dev/zero) or a directory fails at once. A file that is
 * or grows larger than max_bytes while read fails with "... is larger than
 * the limit of N bytes". */
int kv_read_file_max(const char *path, size_t max_bytes, char **out, size_t *out_len, kv_err *err);
/* kv_read_file_max with KV_MAX_TEXT_BYTES: configs, problems, sources. */
int kv_read_file(const char *path, char **out, size_t *out_len, kv_err *err);

/* Opens path for reading only if it is a regular file, without blocking on
 * anything else (O_NONBLOCK, then fstat): its descriptor with *st filled,
 * or -1 with err ("x is a FIFO, not a regular file", or the failed call). */
int kv_open_regular(const char *path, struct stat *st, kv_err *err);

/* Opens a file kevo writes in a run directory (events.jsonl, the workers'
 * logs) for writing, created 0644 when missing: appended to, or truncated
 * when append is 0. Never through a symbolic link at path (O_NOFOLLOW: a
 * link planted there would send the writes outside the run directory), a
 * regular file only (a FIFO is refused without waiting for a reader),
 * close-on-exec. The descriptor, or -1 with err naming the file. */
int kv_open_own(const char *path, int append, kv_err *err);
/* kv_open_own as a stdio stream. */
FILE *kv_fopen_own(const char *path, int append, kv_err *err);

/* "a FIFO", "a character device", ...: what a file of this st_mode is, for
 * messages that refuse it. */
const char *kv_file_kind(unsigned mode);

/* Writes a whole buffer atomically, through kv_atomic_open and
 * kv_atomic_commit below (temporary file in the same directory, fsync,
 * rename). */
int kv_write_file_atomic(const char *path, const void *data, size_t len, kv_err *err);

/* A file written as a stream and put in place atomically: kv_atomic_open
 * creates a new temporary file next to path ("<path>.tmp.<pid>.<n>"), the
 * caller writes to f, and kv_atomic_commit flushes and fsyncs it, renames it
 * to path and fsyncs the directory; readers see the old file or the whole new
 * one, never part of it. kv_atomic_abandon closes and removes the temporary
 * file instead. After a failed open, a commit (failed or not) or an abandon,
 * f is NULL and kv_atomic_abandon does nothing, so it is always safe to call
 * on a zeroed or finished kv_atomic_file. */
typedef struct {
    FILE *f;
    char tmp[PATH_MAX];
    char path[PATH_MAX];
    int direct; /* kv_output_open: path itself is written, no temporary file */
} kv_atomic_file;

int kv_atomic_open(kv_atomic_file *af, const char *path, kv_err *err);
/* Also reports any earlier write error on f; the temporary file is removed
 * when it fails. */
int kv_atomic_commit(kv_atomic_file *af, kv_err *err);
void kv_atomic_abandon(kv_atomic_file *af);

/* Writes the whole buffer to af (from kv_atomic_open or kv_output_open) and
 * commits it; abandons it on a failed write. */
int kv_atomic_write_all(kv_atomic_file *af, const void *data, size_t len, kv_err *err);

/* A file the user names for output (--out PATH; common/outfile.c): a
 * regular file, or none, is written as by kv_atomic_open; a symbolic link to
 * a regular file has its target replaced that way (the link stays); a FIFO,
 * a device, a socket or a dangling link is written through (opened for
 * writing, never renamed over: a FIFO's open waits for its reader, as a
 * shell's redirection does). A directory is refused. kv_atomic_commit then
 * flushes and closes it (no fsync, no rename), kv_atomic_abandon closes it
 * (removes nothing). */
int kv_output_open(kv_atomic_file *af, const char *path, kv_err *err);
/* A whole buffer through kv_output_open and kv_atomic_commit. */
int kv_write_output(const char *path, const void *data, size_t len, kv_err *err);

/* Appends the contents of the regular file src (at most max_bytes) to af,
 * not yet committed: with kv_atomic_open and kv_atomic_commit, a copy that
 * readers see whole or not at all. */
int kv_copy_into(const char *src, kv_atomic_file *af, size_t max_bytes, kv_err *err);

/* mkdir -p; existing directories are fine. */
int kv_mkdir_p(const char *path, int mode, kv_err *err);

/* kv_mkdir_p for a folder kevo writes its own files in (logs, the compile
 * cache), whose name another local user could predict and make first: the
 * folder must be a directory (not a link) owned by kevo's effective uid and
 * not writable by others (its group may), or it fails, naming the owner or
 * the mode. */
int kv_mkdir_own(const char *path, int mode, kv_err *err);

/* common/fstree.c: trees walked through directory descriptors, never
 * following a symbolic link below the path given, so that a folder swapped
 * for a link while they run (by a worker that writes the tree) takes them
 * nowhere outside it. */
/* Removes a file or a directory tree; a symbolic link, path's last
 * component included, is removed itself. Best effort: returns 0 (also when
 * path is absent) or -1 with errno of the first failure. */
int kv_rm_rf(const char *path);
/* Removes what the directory dir holds and keeps it; dir itself must not be
 * a symbolic link (ENOTDIR or ELOOP). The same rules. */
int kv_rm_contents(const char *dir);
/* Copies the folders and regular files below src into the existing folder
 * dst (files 0644 and folders 0755 less the umask, owned by the caller;
 * files of the same name replaced). Anything else (a symbolic link, a FIFO,
 * a file with a second hard link), a tree more than 32 deep, or a symbolic
 * link where a copy goes fails, naming it; what was copied so far stays. */
int kv_copy_tree(const char *src, const char *dst, kv_err *err);

/* Joins dir and name into out (capacity cap); -1 with a message if too long. */
int kv_path_join(char *out, size_t cap, const char *dir, const char *name, kv_err *err);

#endif
