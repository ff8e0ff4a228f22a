/* job.c — merging the workers' reports of one job into its result
 * (protocol/job.h). */
#include "protocol/job.h"

#include <math.h>
#include <string.h>

/* ---- merge ---------------------------------------------------------------------------------- */

/* Badness of a verdict as the merge sees it: crash > hang > refused >
 * runtime_error > mismatch > ok. A verdict a worker should never send (none,
 * compile_error, ...) counts as a runtime error, so that it can never pass
 * for ok. */
static int badness(kv_verdict v)
{
    switch (v) {
    case KV_VERDICT_OK: return 0;
    case KV_VERDICT_MISMATCH: return 1;
    case KV_VERDICT_REFUSED: return 3;
    case KV_VERDICT_HANG: return 4;
    case KV_VERDICT_CRASH: return 5;
    default: return 2;
    }
}

/* Whether rr's verdict and message speak for the job instead of into's: a
 * worse verdict, or an equally bad failure that rr observed itself where
 * into's was only learned from another rank ("... on another rank"). */
static int takes_over(const kv_job_result *into, const kv_job_result *rr)
{
    int a = badness(into->verdict), b = badness(rr->verdict);
    return b > a || (b == a && b > 0 && rr->origin && !into->origin);
}

/* The slower of two timings by median: the whole timing of the rank whose
 * median is the max, so p10/p90 stay that rank's. A NaN median loses. */
static void merge_timing(kv_timing *into, const kv_timing *t)
{
    if (isnan(into->median) ? !isnan(t->median) : t->median > into->median)
        *into = *t;
}

static double max_d(double a, double b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    return a > b ? a : b;
}

static void copy_mismatch(kv_size_outcome *into, const kv_size_outcome *s)
{
    into->bad_rank = s->bad_rank;
    memcpy(into->bad_tensor, s->bad_tensor, sizeof into->bad_tensor);
    into->bad_index = s->bad_index;
    into->expected = s->expected;
    into->got = s->got;
    into->max_abs_err = s->max_abs_err;
    into->max_rel_err = s->max_rel_err;
    into->bad_count = s->bad_count;
    memcpy(into->detail, s->detail, sizeof into->detail);
}

int kv_job_result_merge(kv_job_result *into, const kv_job_result *rr, int first)
{
    if (first) {
        if (into != rr)
            memcpy(into, rr, sizeof *into);
        return 1;
    }
    int taken = takes_over(into, rr);
    if (taken) {
        into->verdict = rr->verdict;
        into->origin = rr->origin;
        memcpy(into->message, rr->message, sizeof into->message);
    }
    int n = rr->n_sizes < KV_JOB_MAX_SIZES ? rr->n_sizes : KV_JOB_MAX_SIZES;
    for (int i = 0; i < n; i++) {
        kv_size_outcome *a = &into->sizes[i];
        const kv_size_outcome *b = &rr->sizes[i];
        if (i >= into->n_sizes) {
            *a = *b; /* only this rank reported the size */
            continue;
        }
        a->checked = a->checked && b->checked;
        a->timed = a->timed && b->timed;
        /* the first mismatch seen where it happened (bad_rank >= 0), with its rank */
        if (!b->ok && (a->ok || (a->bad_rank < 0 && b->bad_rank >= 0))) {
            copy_mismatch(a, b);
        } else if (a->ok && b->ok) {
            a->max_abs_err = max_d(a->max_abs_err, b->max_abs_err);
            a->max_rel_err = max_d(a->max_rel_err, b->max_rel_err);
        }
        a->ok = a->ok && b->ok;
        merge_timing(&a->ref, &b->ref);
        merge_timing(&a->cand, &b->cand);
        /* the ranks agree on both; a rank's fallback note is the size's */
        if (b->graph_calls > a->graph_calls)
            a->graph_calls = b->graph_calls;
        a->ref_plain |= b->ref_plain;
        if (!a->timing_note[0])
            memcpy(a->timing_note, b->timing_note, sizeof a->timing_note);
    }
    if (n > into->n_sizes)
        into->n_sizes = n;
    if (!into->graph_captured && rr->graph_captured) {
        into->graph_captured = 1;
        into->kernel_nodes = rr->kernel_nodes;
        into->memcpy_nodes = rr->memcpy_nodes;
        into->memset_nodes = rr->memset_nodes;
        into->other_nodes = rr->other_nodes;
        into->peer_copy_bytes = rr->peer_copy_bytes;
        memcpy(into->graph_json, rr->graph_json, sizeof into->graph_json);
    }
    into->wall_s = max_d(into->wall_s, rr->wall_s);
    into->gpu_s = max_d(into->gpu_s, rr->gpu_s);
    return taken;
}
