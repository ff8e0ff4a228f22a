/* test_util.h — helpers shared by tests and benchmarks. */
#ifndef KEVO_TEST_UTIL_H
#define KEVO_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evaluator/evaluator.h"

/* Makes a new empty directory under $TMPDIR (or /tmp) named kevo-<tag>-XXXXXX,
 * writes its path into out, and registers it for removal at exit. Aborts the
 * test program if it cannot. */
void kv_test_fresh_dir(char *out, size_t cap, const char *tag);

/* Runs argv (argv[0] the program, NULL-terminated) as a child with stdin
 * from /dev/null, stdout into out_path and stderr into err_path (created or
 * truncated; NULL for /dev/null) and a limit of timeout_s seconds (SIGALRM
 * ends it after that). Returns its exit code, 128 + the signal that ended it,
 * or -1 when it could not be run. */
int kv_test_spawn(const char *const *argv, const char *out_path, const char *err_path,
                  unsigned timeout_s);

/* The whole regular file at path (at most KV_MAX_ARTEFACT_BYTES), malloc'ed
 * and NUL-terminated, its length in *len where len is not NULL; the caller
 * frees it. Never NULL: a file that cannot be read gives "" (malloc'ed, length
 * 0) and the reason on stderr, so that a check on its text fails rather than
 * crashes. Aborts the test program when out of memory. */
char *kv_test_slurp(const char *path, size_t *len);

/* Removes a directory tree; 0 or -1. */
int kv_test_rm_rf(const char *path);

/* splitmix64: a small deterministic generator for test data. */
uint64_t kv_test_rand(uint64_t *state);

/* Writes a NUL-terminated, CUDA-like kernel source of exactly len bytes
 * (len < cap) that depends on seed: realistic text (keywords, identifiers,
 * numbers, braces) so that compression behaves as on real candidates. */
void kv_test_random_source(char *buf, size_t cap, uint64_t seed, size_t len);

/* GPUs that `worker --doctor` sees (0 when it cannot run): GPU tests skip
 * when there are fewer than they need. */
int kv_test_gpu_count(const char *worker);

/* The setting of a GPU test that runs problems through the evaluator:
 * root = $KEVO_SOURCE_DIR (else "."), W = $KEVO_GPU_TEST_WORLD (2..8, else
 * 2), o from kv_eval_defaults with $KEVO_WORKER, logs under
 * /tmp/kevo-gpu-test-logs and a 300 s deadline. Returns 0; 77 (printed
 * "skipped: ...") without W GPUs or $KEVO_WORKER; 1 when the log folder
 * cannot be made (printed). */
int kv_test_gpu_eval_setup(char *root, size_t cap, kv_eval_opts *o);

/* 1 when name is in the comma-separated list, or the list is NULL or "". */
int kv_test_listed(const char *list, const char *name);

/* tests/support/llm_server.py, a local stand-in for the chat APIs, as a child
 * process on 127.0.0.1 (it exits when its parent does). */
typedef struct {
    int pid;
    int port;
} kv_test_llm_server;

/* Starts it (script: its optional argument, a reply script; NULL for none)
 * and waits until it answers (10 s at most): 0, or -1 with a message on
 * stderr. Needs KEVO_SOURCE_DIR. */
int kv_test_llm_server_start(kv_test_llm_server *s, const char *script);
void kv_test_llm_server_stop(kv_test_llm_server *s);

/* Unsets the proxy variables: requests go straight to 127.0.0.1, whatever
 * the environment says. */
void kv_test_no_proxy(void);

/* The body of GET http://127.0.0.1:<port><path> (malloc'ed), or NULL. */
char *kv_test_http_get(int port, const char *path);

#endif
