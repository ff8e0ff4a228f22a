/* reference_verdicts.h — the verdicts of problem checks, kept so that a problem's
 * reference is checked once per version of the files that decide what it
 * does. `kevo problems check P` (cli/cmd_problems_check.c) runs the whole check:
 * the self-check (kv_selfcheck: the reference as evaluations run it against
 * itself on plain memory), where the problem ships check.c the host check
 * of one dumped call at every size that fits, and the reference timed
 * (kv_baseline) against each size's floor: faster than the floor, the
 * problem's cost model is wrong. A run's start
 * (search/check_references.c) runs the self-check of every problem whose
 * verdict is not kept, and skips a problem whose reference failed.
 *
 * A verdict lives in <cache_dir>/problemcheck/<key>.json (cache_dir: the
 * compile cache's, kv_compile_opts.cache_dir), key = kv_pcheck_key's. Only
 * what the reference's code decides is kept: a pass, or a disagreement
 * (with itself, or with the host check). A reference that crashed, hung or
 * did not run is not a verdict on its code and is not kept. Entries are
 * written whole or not at all (a temporary file renamed into place); one
 * that cannot be read or does not parse as such an entry is treated as
 * absent, with a warning naming the file, never as a pass. docs/problems.md,
 * "Checking a problem", describes the file. */
#ifndef KEVO_EVALUATOR_PROBLEMCHECK_H
#define KEVO_EVALUATOR_PROBLEMCHECK_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/sha256.h"
#include "evaluator/evaluate.h"
#include "problem/problem.h"

/* The version of the check: a new one makes every kept verdict stale.
 * 2: the reference timed against its floor. */
#define KV_PCHECK_VERSION 2
/* The host check runs at sizes whose tensors (inputs and outputs, every
 * rank) total at most this many bytes: they are held in host memory. */
#define KV_PCHECK_HOST_MAX_BYTES ((uint64_t)256 << 20)

typedef enum {
    KV_PCHECK_NOT_RUN = 0, /* not run (at this size, or at all) */
    KV_PCHECK_PASS,
    KV_PCHECK_FAIL,
    KV_PCHECK_SKIPPED,     /* the host check does not run at this size (KEVO_CHECK_SKIP) */
} kv_pcheck_result;

/* "not_run", "ok", "fail", "skipped": the words of the stored entry. */
const char *kv_pcheck_result_name(kv_pcheck_result r);

/* One size of the problem. */
typedef struct {
    char name[KV_PROBLEM_NAME_MAX];
    int validation;
    kv_pcheck_result self;       /* the self-check at this size */
    int ref_plain;               /* evaluations run the reference on plain memory here */
    kv_pcheck_result host;       /* the host check at this size */
    int host_too_large;          /* not run: its tensors pass KV_PCHECK_HOST_MAX_BYTES */
    int64_t host_checked, host_failed; /* elements over every rank */
    double host_worst;           /* worst |got - want| / tolerance of a passing element */
} kv_pcheck_size;

/* The verdict on one problem's reference at one world size. */
typedef struct {
    char problem[KV_PROBLEM_NAME_MAX];
    int world;
    int ok;                      /* 1: everything that ran passed */
    char message[KV_JOB_MSG_MAX]; /* the first failure, as the report or check said
                                    it; "" when ok */
    kv_pcheck_result self;       /* PASS or FAIL */
    kv_pcheck_result host;       /* NOT_RUN (no check.c, or a run's start checked the
                                    reference against itself only), PASS or FAIL */
    kv_pcheck_result floor;      /* the reference timed against each size's floor (the
                                    verdict implausible, docs/evaluator.md): NOT_RUN (a
                                    run's start does not time it), PASS or FAIL */
    int n_sizes;
    kv_pcheck_size sizes[KV_PROBLEM_MAX_SIZES];
    int64_t checked_at;          /* seconds since the epoch; kv_pcheck_put sets it when 0 */
} kv_pcheck;

/* The key of p's verdict at world W into key: the SHA-256, in hex, of
 * KV_PCHECK_VERSION, W, and the name, length and bytes of each of
 * problem.json, reference.cu, inputs.cu and check.c that p has (a file
 * added, removed or changed gives another key). Returns 0, or -1 naming the
 * file that cannot be read. */
int kv_pcheck_key(const kv_problem *p, int world, char key[KV_SHA256_HEX_LEN], kv_err *err);

/* A fresh verdict of p at W from a self-check's report (kv_selfcheck, or a
 * task with .selfcheck set): every size of p named, the self-check's
 * outcome and placement at those the report has, ok for KV_VERDICT_OK,
 * failed with the report's message for KV_VERDICT_MISMATCH. Returns 0, or
 * -1 (c untouched) for any other verdict: the reference did not run to the
 * end, which is no verdict to keep; err then says "the reference of P
 * failed its self-check: <verdict>: <message>". */
int kv_pcheck_from_report(kv_pcheck *c, const kv_problem *p, int world,
                          const kv_eval_report *r, kv_err *err);

/* Reads the verdict kept under key in cache_dir into *out: 0, or
 * KV_NOTFOUND (*out zeroed) when there is none, and also when the entry
 * cannot be read or is not an entry of this key (damaged, cut short,
 * another version, members that contradict each other): then warn (may be
 * NULL) receives "<file>: <what is wrong>; checking again" and the entry is
 * left for kv_pcheck_put to replace. -1 only when the path is too long. */
int kv_pcheck_get(const char *cache_dir, const char *key, kv_pcheck *out,
                  void (*warn)(const char *msg, void *ctx), void *ctx, kv_err *err);

/* Keeps c under key in cache_dir (making <cache_dir>/problemcheck/ when
 * needed), replacing what was there: readers see the old entry or the whole
 * new one (kv_write_file_atomic). Sets c->checked_at to now when it is 0.
 * Returns 0, or -1 naming the file or folder that could not be written. */
int kv_pcheck_put(const char *cache_dir, const char *key, kv_pcheck *c, kv_err *err);

/* c as the JSON object kept in the entry (with key), for kevo problems
 * check --json; NULL when out of memory. The caller owns it (cJSON_Delete). */
cJSON *kv_pcheck_json(const kv_pcheck *c, const char *key);

/* The path of key's entry in cache_dir into out (PATH_MAX bytes): 0, or -1
 * when too long. */
int kv_pcheck_path(const char *cache_dir, const char *key, char *out, kv_err *err);

#endif
