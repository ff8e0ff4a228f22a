/* hostcheck.h — a problem's host check (problems/<name>/check.c, the API of
 * include/kevo/check.h): compiled with the system C compiler into the
 * compile cache, loaded with dlopen, called for every rank of one call,
 * and the outputs compared with what it expects.
 *
 * This is host-side only: the worker neither links it nor needs a C
 * compiler. The comparison (tolerances, NaN, the first bad element) is
 * kv_hostcheck_run's, the one place kevo compares outputs with a host
 * computation. docs/problems.md, "The host check", has the format. */
#ifndef KEVO_EVALUATOR_HOSTCHECK_H
#define KEVO_EVALUATOR_HOSTCHECK_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/sha256.h"
#include "evaluator/compile/compile.h"
#include "problem/problem.h"

/* kv_hostcheck_run's results besides 0 (every element within tolerance) and
 * -1 (an error: kv_err says which problem, size, rank and file). */
#define KV_HOSTCHECK_MISMATCH 1 /* some element is not */
#define KV_HOSTCHECK_SKIPPED 2  /* the check does not run at this size (KEVO_CHECK_SKIP) */

/* Every rank's tensors of one call, on the host. kv_host_call_init allocates
 * zeroed buffers for every input and output of every rank (owned by the
 * struct, freed by kv_host_call_free); callers fill them. */
typedef struct {
    const kv_problem *p;                          /* not owned */
    int size;                                     /* index into p->sizes */
    int world;
    kv_shape in_shape[KEVO_MAX_TENSORS];
    kv_shape out_shape[KEVO_MAX_TENSORS];
    void *in[KEVO_MAX_RANKS][KEVO_MAX_TENSORS];   /* raw bytes in the tensor's dtype */
    void *out[KEVO_MAX_RANKS][KEVO_MAX_TENSORS];  /* what the code under test wrote */
} kv_host_call;

int kv_host_call_init(kv_host_call *d, const kv_problem *p, int size, int world, kv_err *err);
void kv_host_call_free(kv_host_call *d);

/* hostcheck_dump.c: reads what a dump (kv_eval_opts.dump_dir; kevo eval and
 * kevo baseline --dump) holds of d's size into d (made by kv_host_call_init):
 * every rank's inputs, <dir>/<size>/rank<r>/inputs/<tensor>.bin, and the
 * outputs of `side` ("reference" or "candidate"),
 * <dir>/<size>/rank<r>/<side>/<tensor>.bin. Each file must be a regular file
 * of exactly the tensor's bytes. Returns 0, or -1 naming the file (missing,
 * unreadable, or of another size: "...: N bytes, expected M"); d's buffers
 * are then partly filled. */
int kv_host_call_load_dump(kv_host_call *d, const char *dir, const char *side, kv_err *err);

/* What the check expects of one rank's outputs: want[j][i] and tol[j][i] for
 * i < valid[j]. Owned; freed by kv_host_expect_free. */
typedef struct {
    int n_outputs;
    double *want[KEVO_MAX_TENSORS];
    double *tol[KEVO_MAX_TENSORS];
    int64_t valid[KEVO_MAX_TENSORS];
} kv_host_expect;

void kv_host_expect_free(kv_host_expect *e);

/* A loaded check; opaque. */
typedef struct kv_hostcheck kv_hostcheck;

/* Compiles p's check.c with the C compiler ($KEVO_CC, else cc on $PATH)
 * into o->cache_dir/hostcheck/<key>.so, unless that is there already (key:
 * SHA-256 of the source, its path, the flags, the compiler and its
 * --version, and include/kevo/check.h under o->include_dir), then loads it.
 * Uses o->include_dir, o->cache_dir and o->timeout_s only. Returns 0, or -1
 * naming the file: the compiler's messages (with the lines) when it does
 * not compile, the function when it is not defined. A problem without
 * check.c is an error too (p->check is ""). */
int kv_hostcheck_open(const kv_compile_opts *o, const kv_problem *p, kv_hostcheck **out,
                      kv_err *err);
void kv_hostcheck_close(kv_hostcheck *hc);
/* The shared object that was loaded, and whether it came from the cache. */
const char *kv_hostcheck_so(const kv_hostcheck *hc);
int kv_hostcheck_cached(const kv_hostcheck *hc);

/* How long one kv_hostcheck_run may take before its child is stopped. */
#define KV_HOSTCHECK_TIMEOUT_S 900.0
void kv_hostcheck_set_timeout(kv_hostcheck *hc, double seconds);

/* Calls the check for one rank of d (d->p must be the problem hc was opened
 * for): fills e. Returns 0, KV_HOSTCHECK_SKIPPED (e empty), or -1 naming
 * the problem, size, W, rank and file with the check's reason. */
int kv_hostcheck_expect(const kv_hostcheck *hc, const kv_host_call *d, int rank,
                        kv_host_expect *e, kv_err *err);

/* The outcome of comparing every rank's outputs with the check. */
typedef struct {
    int64_t checked, failed;      /* elements, over every rank */
    double worst_ratio;           /* max over passing elements of |got - want| / tol */
    /* the first failing element (rank order, then output, then index) */
    int bad_rank, bad_output;     /* -1 when none failed */
    int64_t bad_index;            /* flat */
    double got, want, tol;
    char first[512];              /* it in words, "" when none: "rank 1, y[3, 7]: got ..." */
    double seconds;               /* spent in the check */
} kv_hostcheck_outcome;

/* The host side of checking one call: given every rank's inputs and
 * outputs of one size at world d->world, runs the check for every rank
 * and compares. The check runs in a child process (fork), so that one that
 * crashes, exits or never returns costs this call, not kevo: it gets -1
 * naming the rank it was at and how it ended ("kevo_check crashed (signal
 * 11, Segmentation fault)"), or, past the timeout (KV_HOSTCHECK_TIMEOUT_S,
 * kv_hostcheck_set_timeout), is killed ("did not finish within N s").
 * Call it from a process with one thread. Returns 0 (all within
 * tolerance), KV_HOSTCHECK_MISMATCH, KV_HOSTCHECK_SKIPPED, or -1 (the check
 * failed, or memory ran out; err says where). */
int kv_hostcheck_run(const kv_hostcheck *hc, const kv_host_call *d, kv_hostcheck_outcome *out,
                     kv_err *err);

/* ---- hostcheck_cc.c: compiling ------------------------------------------------ */

/* The C compiler kevo runs: $KEVO_CC, else cc on $PATH, else /usr/bin/cc. */
void kv_hostcheck_find_cc(char *out, size_t cap);

/* Compiles check_path (or takes it from the cache) into so (PATH_MAX
 * bytes); *cached says which. Errors as kv_hostcheck_open's. */
int kv_hostcheck_compile(const kv_compile_opts *o, const char *check_path, char *so,
                         int *cached, kv_err *err);

#endif
