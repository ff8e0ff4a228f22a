/* fsutil.h — small file-system helpers with kevo's error convention. */
#ifndef KEVO_FSUTIL_H
#define KEVO_FSUTIL_H

#include <stddef.h>

#include "kevo/err.h"

/* Reads a whole file into a NUL-terminated malloc'ed buffer. */
int kv_read_file(const char *path, char **out, size_t *out_len, kv_err *err);

/* Writes a file atomically (temporary file in the same directory, fsync, rename). */
int kv_write_file_atomic(const char *path, const void *data, size_t len, kv_err *err);

/* mkdir -p; existing directories are fine. */
int kv_mkdir_p(const char *path, int mode, kv_err *err);

/* Joins dir and name into out (capacity cap); -1 with a message if too long. */
int kv_path_join(char *out, size_t cap, const char *dir, const char *name, kv_err *err);

#endif
