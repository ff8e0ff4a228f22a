/* job.h — one evaluation job for a worker group, and its result.
 *
 * A job runs on every worker of a group (one per GPU). Each worker loads the
 * reference and (unless baseline-only) the candidate, and for every size:
 * correctness trials, then interleaved timing, then the checks after timing.
 * Each worker reports its own figures; the supervisor merges them (max over
 * ranks of each rank's median). docs/evaluator.md has the protocol. */
#ifndef KEVO_EVALUATOR_JOB_H
#define KEVO_EVALUATOR_JOB_H

#include <limits.h>
#include <stdint.h>

#include "common/err.h"
#include "common/verdict.h"

#define KV_JOB_MAX_SIZES 12
#define KV_JOB_MSG_MAX 2048

typedef struct {
    uint64_t id;
    char problem_dir[PATH_MAX];
    char reference_so[PATH_MAX];
    char candidate_so[PATH_MAX]; /* "" for a baseline (reference only) */
    char inputs_so[PATH_MAX];    /* the problem's compiled inputs.cu hook, or "" */
    int n_sizes;
    char sizes[KV_JOB_MAX_SIZES][64];
    int trials;              /* correctness trials per size */
    int warmup, iters;       /* timing; iters 0 = correctness only */
    double warmup_ms;        /* warm-up of a side also stops after this much (0: no limit) */
    int time_sizes_mask;     /* bit i: time size i (validation sizes are only checked) */
    uint64_t seed;           /* input RNG seed; unknown to the candidate */
    int capture;             /* capture one candidate kevo_run into a graph */
    int graph_timing;        /* time replays of captured calls (else calls one by one) */
    int selfcheck;           /* the reference against itself: candidate_so is the
                                     reference again, run on plain device memory at shifted
                                     offsets; plain trials only, nothing timed (worker/placement.c) */
    size_t scratch_bytes;    /* symmetric scratch per context (0 = default) */
    char dump_dir[PATH_MAX]; /* "" or where to write one call's inputs and outputs
                                     per size and rank (worker/dump.c) */
} kv_job;

/* Timing of one side on one rank, or merged over ranks, in microseconds. */
typedef struct {
    double median, p10, p90, mean, cv;
    int n;
} kv_timing;

typedef struct {
    char name[64];
    int checked; /* correctness was run */
    int ok;
    int timed;
    kv_timing ref, cand;  /* merged: per-rank medians, max over ranks; per call */
    int graph_calls;      /* calls per timed graph replay; 0: timed call by call */
    char timing_note[96]; /* why a size asked for graph timing was timed per call */
    int ref_plain;        /* the reference ran on plain device memory, outside the
                                     window (worker/placement.c says when) */
    /* the first mismatch, when !ok */
    int bad_rank; /* -1 when no rank saw a problem */
    char bad_tensor[32];
    int64_t bad_index;
    double expected, got, max_abs_err, max_rel_err;
    int64_t bad_count;
    char detail[256]; /* e.g. "unwritten (poison)", "input x modified" */
} kv_size_outcome;

typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX]; /* what failed and where; first line is a summary */
    int origin;                   /* the failure was observed on this rank, not learned from
                                     another rank through the cross-rank agreement */
    int n_sizes;
    kv_size_outcome sizes[KV_JOB_MAX_SIZES];
    /* the launch graph of one candidate call (rank 0) */
    int graph_captured;
    int kernel_nodes, memcpy_nodes, memset_nodes, other_nodes;
    double peer_copy_bytes; /* bytes of the memcpy nodes that read or write a peer */
    char graph_json[1024];  /* node list with kernel names */
    double wall_s;          /* of the whole job */
    double gpu_s;           /* sum of timed GPU iterations (both sides, max over ranks) */
} kv_job_result;

/* Merges per-rank reports into one result: the worst verdict (crash > hang
 * > refused > runtime_error > mismatch > ok; any other verdict counts as a
 * runtime error) with its message; among equally bad failures, that of the
 * first rank where it originated (origin) rather than one that only learned
 * of it through the cross-rank agreement. Per size, the first mismatch seen
 * where it happened (bad_rank >= 0), else the first, with its rank (ranks
 * merged in order); the timings of the rank whose median is the max; the
 * launch graph of the first rank that captured one; the max of wall_s and
 * gpu_s. first: into becomes a copy of rank_result. Returns 1 when
 * rank_result's verdict and message are now into's, 0 otherwise. */
int kv_job_result_merge(kv_job_result *into, const kv_job_result *rank_result, int first);

#endif
