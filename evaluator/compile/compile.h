/* compile.h — candidate sources to shared objects: nvcc with kevo's flags,
 * a content-addressed cache, and a pool running J compilations at once.
 *
 * A compiled candidate lives in <cache>/<key>/: cand.so, cand.sass
 * (cuobjdump -sass), cand.ptx (cuobjdump -ptx), imports.txt (undefined
 * dynamic symbols), report.txt (nvcc's stderr: ptxas register/spill lines,
 * warnings). key = SHA-256 of source + flags + nvcc version + ABI version +
 * the text of kernel.h and the pattern headers. */
#ifndef KEVO_EVALUATOR_COMPILE_H
#define KEVO_EVALUATOR_COMPILE_H

#include <limits.h>
#include <stddef.h>

#include "common/err.h"
#include "common/sha256.h"

/* The address space (RLIMIT_AS) of each compile step: nvcc and every child
 * it starts (cicc, ptxas, the host compiler, the linker) and cuobjdump. A
 * compiler that swallows an endless include (`#include "/dev/zero"` by a
 * macro) fails with "out of memory" in seconds instead of growing without
 * bound. kevo's candidates need under 256 MiB; heavy template code a few
 * GiB. */
#define KV_COMPILE_MEM_MAX ((size_t)4 << 30)

typedef struct {
    char nvcc[PATH_MAX];         /* nvcc to run ("" = find on PATH or /usr/local/cuda) */
    char arch[32];               /* e.g. "sm_90a" ("" = ask the device, else sm_90a) */
    char include_dir[PATH_MAX];  /* holds kevo/kernel.h */
    char patterns_dir[PATH_MAX]; /* holds the pattern headers */
    char cache_dir[PATH_MAX];
    double timeout_s;            /* per compilation */
    size_t mem_max;              /* address space of a compile step; 0 = KV_COMPILE_MEM_MAX */
    int jobs;                    /* concurrent compilations; 0 = cores */
} kv_compile_opts;

typedef enum {
    KV_COMPILE_OK,
    KV_COMPILE_ERROR,     /* nvcc rejected the source */
    KV_COMPILE_TIMEOUT,
    KV_COMPILE_FAILED,    /* kevo could not run the toolchain (not the candidate's fault) */
} kv_compile_status;

typedef struct {
    kv_compile_status status;
    int cached;                      /* served from the cache */
    char key[KV_SHA256_HEX_LEN];
    char dir[PATH_MAX];              /* <cache>/<key> */
    char so_path[PATH_MAX];
    char *errors;                    /* trimmed compiler errors with line numbers; owned */
    char *report;                    /* ptxas resource report (registers, spills); owned */
    char *sass;                      /* owned; NULL unless loaded */
    char *ptx;                       /* owned; NULL unless loaded */
    char *imports;                   /* owned; one symbol per line */
    char sass_hash[KV_SHA256_HEX_LEN]; /* the dedup key: the SASS without addresses, and
                                         * the host code (sass_hash.c) */
    double seconds;                  /* wall time of the compilation (0 if cached) */
} kv_compile_result;

void kv_compile_result_free(kv_compile_result *r);

/* Fills opts with defaults relative to the source tree root. */
void kv_compile_defaults(kv_compile_opts *o, const char *source_root);

/* Compiles one source synchronously (through the cache). Returns 0 when a
 * result was produced (whatever its status), -1 when kevo itself failed. */
int kv_compile(const kv_compile_opts *o, const char *src, size_t len, kv_compile_result *r,
               kv_err *err);

/* The pool: submit sources, then poll/wait for results; compilations run as
 * child processes in their own process groups, killed at their timeout. */
typedef struct kv_compile_pool kv_compile_pool;

int kv_compile_pool_new(const kv_compile_opts *o, kv_compile_pool **out, kv_err *err);
void kv_compile_pool_free(kv_compile_pool *p); /* kills what is still running */
/* Queues a source (copied); *ticket identifies its result. */
int kv_compile_submit(kv_compile_pool *p, const char *src, size_t len, uint64_t *ticket,
                      kv_err *err);
/* Starts queued work and reaps finished work without blocking; returns the
 * number of results ready. */
int kv_compile_poll(kv_compile_pool *p, kv_err *err);
/* Takes one ready result (0), or KV_NOTFOUND if none is ready. */
int kv_compile_take(kv_compile_pool *p, uint64_t *ticket, kv_compile_result *r);
/* Blocks until every submitted source has a result. */
int kv_compile_wait_all(kv_compile_pool *p, kv_err *err);
/* File descriptors to poll for progress (read end of a self-pipe fed on SIGCHLD
 * is not used: children's stderr pipes are returned). */
int kv_compile_pollfds(kv_compile_pool *p, int *fds, int cap);

/* Trims compiler output to what a kernel writer needs: error and warning
 * lines with their line numbers and a little context, at most max_lines;
 * the temporary file name is replaced by "candidate.cu". Malloc'ed. */
char *kv_compile_trim_errors(const char *nvcc_stderr, const char *src_path, int max_lines);

#endif
