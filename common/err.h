/* err.h — the one error-reporting convention of kevo's host code.
 *
 * Functions that can fail return 0 on success and -1 on failure, and fill a
 * caller-owned kv_err with one message that names what failed and where
 * (file, JSON path, archive, system call). Lookups that may legitimately find
 * nothing return KV_NOTFOUND (1). A NULL kv_err is allowed: the message is
 * dropped. */
#ifndef KEVO_ERR_H
#define KEVO_ERR_H

#include <stddef.h>

#define KV_OK 0
#define KV_NOTFOUND 1
#define KV_FAIL (-1)

typedef struct kv_err {
    char msg[1024];
} kv_err;

#if defined(__GNUC__)
#define KV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KV_PRINTF(a, b)
#endif

/* Sets the message; always returns KV_FAIL so callers can `return kv_err_set(...)`. */
int kv_err_set(kv_err *e, const char *fmt, ...) KV_PRINTF(2, 3);

/* Prepends "context: " to the existing message; returns KV_FAIL. */
int kv_err_prefix(kv_err *e, const char *fmt, ...) KV_PRINTF(2, 3);

/* Sets "what: strerror(errno_value)"; returns KV_FAIL. */
int kv_err_errno(kv_err *e, int errno_value, const char *fmt, ...) KV_PRINTF(3, 4);

/* For the static analyzer only (scripts/analyze.sh), the three are KV_FAIL
 * where they are called, so that it knows `return kv_err_set(...)` fails on
 * every path and follows no success that cannot happen. (A statement
 * expression, clang's and GCC's; the compilers build the plain calls.) */
#if defined(__clang_analyzer__)
#define kv_err_set(...)          \
    ({                           \
        kv_err_set(__VA_ARGS__); \
        KV_FAIL;                 \
    })
#define kv_err_prefix(...)          \
    ({                              \
        kv_err_prefix(__VA_ARGS__); \
        KV_FAIL;                    \
    })
#define kv_err_errno(...)          \
    ({                             \
        kv_err_errno(__VA_ARGS__); \
        KV_FAIL;                   \
    })
#endif

/* A wait status (waitpid) in words, for messages: "exited with status 1",
 * "killed by signal 9 (Killed)", "stopped by signal 19"; never the raw
 * number ("status 256"). Writes at most cap bytes, NUL-terminated. */
void kv_wait_status_text(int status, char *out, size_t cap);

#endif
