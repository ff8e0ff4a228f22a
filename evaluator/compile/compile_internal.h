/* compile_internal.h — what the compile pipeline's files share; not part of
 * kevo's API (that is evaluator/evaluator.h, "compiling").
 *
 *   compile.c         kv_compile, defaults, results; the cache: key, lookup,
 *                     staging directory, atomic publish, stale clean-up
 *   compile_pool.c    the pool: queue, one task's pipeline of children,
 *                     submit/poll/take/wait
 *   toolchain.c       finding nvcc/cuobjdump/NCCL, `nvcc --version`, child
 *                     processes in their own process groups
 *   elf_imports.c     undefined dynamic symbols of the ELF
 *   sass_hash.c       hash of the SASS without addresses (dedup)
 *   compile_errors.c  kv_compile_trim_errors and the summaries of nvcc's output
 *   compile_util.c    small file/string helpers
 *   compile_confine.c the Landlock ruleset of a compile step
 *   compile_includes.c the files a candidate includes: regular files only
 * hostcheck_cc.c (a problem's check.c with the C compiler) uses the child
 * processes, the tool search and the stale clean-up too. */
#ifndef KEVO_EVALUATOR_COMPILE_INTERNAL_H
#define KEVO_EVALUATOR_COMPILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evaluator/evaluator.h"
#include "common/err.h"
#include "common/sha256.h"
#include "common/strbuf.h"

/* ---- compile_errors.c -------------------------------------------------------- */

/* Trims compiler output to what a kernel writer needs: error and warning
 * lines with their line numbers and a little context, at most max_lines;
 * the temporary file name is replaced by "candidate.cu". Malloc'ed; NULL
 * when out of memory. */
char *kv_compile_trim_errors(const char *nvcc_stderr, const char *src_path, int max_lines);

/* ---- compile_util.c ------------------------------------------------------- */

int kv_compile_is_exec_file(const char *path);
/* Copies s into out; -1 (out untouched) when it does not fit. */
int kv_compile_copy_str(char *out, size_t cap, const char *s);
/* qsort comparator for an array of char *. */
int kv_compile_cmp_str(const void *a, const void *b);

/* ---- toolchain.c ------------------------------------------------------------ */

/* The first line a child writes when execve failed (then it exits 127). */
#define KVC_EXEC_FAILED "kevo-exec-failed: errno "

typedef struct {
    pid_t pid;     /* 0 when none; also the process group id */
    int fd;        /* read end of the output pipe, -1 once at EOF */
    kv_strbuf out; /* what it wrote (limited to its first bytes) */
    int exited;    /* waitpid reported it */
    int status;    /* waitpid status */
} kv_compile_child;

void kv_compile_child_init(kv_compile_child *c);
/* Starts argv[0] (no shell, no PATH search) in its own process group, with
 * cwd as working directory, the environment env (NULL: the allowed part of
 * ours, common/env.h), stdout to out_fd (or to the pipe when -1) and stderr
 * to the pipe. The child gets no_new_privs and the system-call filter
 * (KV_FILTER_SANDBOX | KV_FILTER_NO_NET: no network), the Landlock
 * ruleset `ruleset` unless it is -1, and mem_max bytes of address space
 * (RLIMIT_AS, inherited by its children) unless it is 0. */
int kv_compile_child_spawn(kv_compile_child *c, char *const argv[], const char *cwd,
                           char *const env[], int out_fd, int ruleset, size_t mem_max, kv_err *err);
/* Reads what is available; closes the pipe at EOF. -1 on a read error
 * (the pipe is closed then too) or when out of memory. */
int kv_compile_child_drain(kv_compile_child *c);
/* Non-blocking reap; 1 once the child has exited, 0 while it runs, -1 on error. */
int kv_compile_child_reap(kv_compile_child *c);
/* Kills the whole process group of a child still running and reaps it;
 * closes the pipe. */
void kv_compile_child_kill(kv_compile_child *c);
void kv_compile_child_free(kv_compile_child *c);

/* The allowed part of the environment (common/env.h) with TMPDIR and HOME
 * set to tmpdir; NULL when out of memory. Free with kv_env_free. */
char **kv_compile_env_with_tmpdir(const char *tmpdir);

/* Runs argv (argv[0] a path) to completion with a deadline, in the
 * environment env (NULL: ours), with KV_COMPILE_MEM_MAX of address space,
 * capturing its stdout and stderr together into *out (malloc'ed);
 * *timed_out when it was killed at the deadline. */
int kv_compile_run_capture(char *const argv[], char *const env[], double timeout_s, char **out,
                           int *status, int *timed_out, kv_err *err);

/* Finds an executable on $PATH; 0 and its path in out, or -1. */
int kv_compile_find_on_path(const char *name, char *out, size_t cap);
/* nvcc: $KEVO_NVCC, $PATH, /usr/local/cuda/bin/nvcc. */
void kv_compile_find_nvcc(char *out, size_t cap);
/* cuobjdump: $KEVO_CUOBJDUMP, next to nvcc, $PATH, /usr/local/cuda/bin;
 * -1 and "" when none. */
int kv_compile_find_cuobjdump(const char *nvcc, char *out, size_t cap);
/* The directory holding libnccl.so; "" when none has it. */
void kv_compile_find_nccl_libdir(const char *nvcc, char *out, size_t cap);
/* `nvcc --version`, run once per process and nvcc path; *text stays owned
 * by the cache. */
int kv_compile_nvcc_version(const char *nvcc, const char **text, kv_err *err);

/* ---- compile_confine.c -------------------------------------------------------- */

/* The Landlock ruleset of one compile step of `tool` (nvcc, cuobjdump)
 * with these flags, writing only workdir: *ruleset its fd (close-on-exec),
 * or -1 where the kernel has no Landlock. 0, or -1 on an error. */
int kv_compile_confine_ruleset(const char *tool, char *const flags[], int n_flags,
                               const char *workdir, int *ruleset, kv_err *err);

/* ---- compile_includes.c ------------------------------------------------------- */

/* The names a source includes literally (#include, #include_next, #import,
 * #embed, __has_include), absolute or under dirs: 1 and a message in msg
 * when one names a file that is not a regular file (a device, a FIFO) or
 * climbs with ".."; 0 when none does; -1 when out of memory. */
int kv_compile_check_includes(const char *src, size_t len, const char *const dirs[], int n_dirs,
                              char *msg, size_t cap);

/* ---- elf_imports.c ------------------------------------------------------------ */

/* The undefined symbols of so_path's .dynsym, sorted, one a line. */
int kv_compile_read_imports(const char *so_path, char **out, kv_err *err);
/* Feeds h the bytes of so_path's executable sections (its host machine
 * code): 0, or -1 when the file is not a sound 64-bit ELF object. */
int kv_compile_hash_host_code(const char *so_path, kv_sha256_ctx *h, kv_err *err);

/* ---- sass_hash.c -------------------------------------------------------------- */

/* The dedup key, as hex: SHA-256 of the SASS text without addresses,
 * encodings and blank runs, then of the host code of so_path. 0, or -1
 * (out "") when the object cannot be read or libcrypto failed. */
int kv_compile_sass_hash(const char *sass, const char *so_path, char out[KV_SHA256_HEX_LEN],
                         kv_err *err);

/* ---- compile_errors.c --------------------------------------------------------- */

/* The errors of a source nvcc rejected: the trimmed error lines, or the last
 * lines of its output when none is recognised. NULL when out of memory. */
char *kv_compile_error_summary(const char *nvcc_out);
/* The warnings of a successful compilation's report ("" when none). NULL
 * when out of memory. */
char *kv_compile_warning_summary(const char *report);

/* ---- compile.c: the cache ----------------------------------------------------- */

/* The cache key of src compiled by o->nvcc with flags. */
int kv_compile_cache_key(const kv_compile_opts *o, char *const flags[], int n_flags,
                         const char *src, size_t len, char key[KV_SHA256_HEX_LEN], kv_err *err);
/* 1 and an OK result (cached) when <cache_dir>/<key> is a complete entry; 0
 * when there is none (an unreadable one is removed); -1 on an error. */
int kv_compile_cache_lookup(const char *cache_dir, const char *key, kv_compile_result *r,
                            kv_err *err);
/* Makes a private temporary directory under cache_dir (tmpdir, PATH_MAX
 * bytes) holding tmp/ and candidate.cu. On failure tmpdir is "" unless the
 * directory was made (then the caller removes it). */
int kv_compile_cache_stage(const char *cache_dir, const char *src, size_t len, char *tmpdir,
                           kv_err *err);
/* Completes the entry in tmpdir (cand.so, cand.sass and cand.ptx present):
 * writes imports.txt and report.txt, fsyncs and renames it to
 * <cache_dir>/<key> (tmpdir becomes "" then), and loads it into r. */
int kv_compile_cache_publish(const char *cache_dir, const char *key, char *tmpdir,
                             const char *report, kv_compile_result *r, kv_err *err);
/* Removes temporary directories left by dead processes. */
void kv_compile_cache_clean_stale(const char *cache_dir);

/* ---- compile_pool.c ----------------------------------------------------------- */

/* kv_compile_pool_new with jobs concurrent compilations (<= 0: cores);
 * clean: remove stale temporary directories first. */
int kv_compile_pool_open(const kv_compile_opts *o, int jobs, int clean, kv_compile_pool **out,
                         kv_err *err);

#endif
