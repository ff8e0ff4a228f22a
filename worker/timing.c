/* timing.c — reference and candidate timed interleaved in one session, in
 * one of two ways (job->graph_timing):
 *
 * Graph replays (the default). Each side's K successive calls, on rotated
 * slots (input/output sets), are captured into a CUDA graph, K chosen so that
 * a replay lasts at least KV_GRAPH_REPLAY_US (from a short per-call probe, the
 * largest K of any rank); the two graphs are replayed in turn, each replay
 * between two CUDA events, and a call's time is its replay's / K. That is
 * what an inference engine that captures its step pays per call: no launch
 * from the host, back-to-back kernels. A reference that cannot be captured
 * (one that synchronises with the host) makes both sides of that size timed
 * per call, and the size says so (timing_note).
 *
 * Calls. Warm-up, then blocks of TIMING_BLOCK calls of each side in turn,
 * each call between two CUDA events on ctx->stream, both sides walking the
 * same slots in the same order. Each block is held behind a gate kernel until
 * the host has enqueued all of it, so the calls run back to back and the
 * events time the device's work, not the host's launch rate; a launch's own
 * cost on the device stays in.
 *
 * Either way, no timed call can profit from remembering: before every replay
 * (or block of calls) each slot it uses gets inputs drawn afresh from the
 * job's secret seed (untimed, on the timing stream), no slot serves two calls
 * of one replay or block, and after each replay or block every call's outputs
 * are compared with the reference's on the same inputs and the reference's
 * outputs are checksummed before and after the candidate's calls, on the
 * device, read once at the end. A candidate that samples, hashes or keys its
 * inputs by pointer and skips the work when they look unchanged finds them
 * changed every time; one that serves stored outputs is wrong. After the last
 * candidate call the device must go idle as soon as
 * ctx->stream does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"
#include "common/clock.h"

#define TIMING_BLOCK 10
/* Far longer than enqueueing a block takes (about 0.2 ms); a side that
 * waits for the host inside kevo_run makes its block wait this long once. */
#define GATE_TIMEOUT_NS 2000000ull
#define TAIL_SLACK_S 1e-3
#define PROBE_CALLS 5
#define WARM_REPLAYS 2
#define MIN_REPLAYS 10
#define KV_GRAPH_REPLAY_US 1000.0 /* a timed replay lasts at least this long */
#define KV_GRAPH_MAX_CALLS 512
/* The draws of the timed rounds' inputs, apart from the trials' (small
 * numbers) and the first timing inputs (1000 + slot). */
#define KV_DRAW_TIMING (1ull << 32)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void kv_summarize(double *v, int n, kv_timing *t)
{
    memset(t, 0, sizeof *t);
    if (n <= 0)
        return;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    t->mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (v[i] - t->mean) * (v[i] - t->mean);
    t->cv = t->mean > 0 ? sqrt(sq / n) / t->mean : 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    t->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    t->p10 = v[(int)(0.1 * (n - 1))];
    t->p90 = v[(int)(0.9 * (n - 1))];
    t->n = n;
}

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

/* What the calls left: the timed calls' checks (every call's outputs), then
 * the guard bands of every slot they used. */
static int check_timed_calls(kv_size_run *r, int slots, int calls, kv_size_outcome *o, kv_fail *f)
{
    int bad = kv_timed_checks_result(r, calls, o, f);
    for (int k = 0; bad == 0 && k < slots; k++) {
        kv_size_run_bind_slot(r, k);
        if ((bad = kv_check_integrity(r, k, NULL, o, f)) > 0) {
            char tmp[sizeof o->detail];
            snprintf(tmp, sizeof tmp, "after %d timed calls, slot %d: %.200s", calls, k, o->detail);
            memcpy(o->detail, tmp, sizeof tmp);
        }
    }
    return bad;
}

/* Before a replay or block of calls (untimed, on the timing stream): fresh
 * inputs in slots 0 .. slots-1, drawn for the `round`th time. */
static int fresh_round(kv_size_run *r, int slots, uint64_t round, kv_fail *f)
{
    return kv_fill_inputs_slots(r, slots, KV_DRAW_TIMING + round, r->w->stream, f);
}

/* After the reference's calls of a round (before = 1) or the candidate's
 * (before = 0): the reference's outputs checksummed, and after the
 * candidate's, every call's outputs compared. Nothing to check in a baseline. */
static int check_round(kv_size_run *r, int slots, int before, kv_fail *f)
{
    if (r->n_sides < 2)
        return 0;
    if (kv_timed_checksum_ref(r, slots, !before, r->w->stream, f) != 0)
        return -1;
    return before ? 0 : kv_timed_compare(r, slots, r->w->stream, f);
}

/* Warm-up calls of both sides, in turn, until job->warmup calls or
 * job->warmup_ms (agreed by every rank, which must make the same calls). */
static int warm_up(kv_size_run *r, int next[2], kv_fail *f)
{
    kv_worker *w = r->w;
    const kv_job *job = r->job;
    const int K = r->layout.slots;
    double w0 = now_s();
    for (int i = 0; i < job->warmup; i++) {
        for (int s = 0; s < r->n_sides; s++) {
            // NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign): n_sides <= 2
            kv_size_run_bind_slot(r, next[s]++ % K);
            if (kv_call_run(r, s, f) != 0)
                return -1;
        }
        /* large sizes need far fewer calls than small ones to reach steady
         * clocks and caches: stop once the time limit is spent */
        if (job->warmup_ms > 0 && (i + 1) % 10 == 0) {
            cudaError_t e = cudaStreamSynchronize(w->stream);
            if (e != cudaSuccess)
                return kv_cuda_fail(f, e, "warm-up calls");
            int done = (now_s() - w0) * 1e3 > job->warmup_ms, all = 0;
            if (kv_agree(w, done, &all, f) != 0)
                return -1;
            if (all)
                break;
        }
    }
    return 0;
}

/* Events for `pairs` timed intervals plus one for the tail check. */
typedef struct {
    cudaEvent_t *ev;
    int made;
} kv_events;

static int events_make(kv_events *t, int pairs, kv_fail *f)
{
    t->made = 0;
    t->ev = calloc((size_t)2 * pairs + 1, sizeof *t->ev);
    if (!t->ev)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "out of memory for timing");
    for (; t->made < 2 * pairs + 1; t->made++) {
        cudaError_t e = cudaEventCreate(&t->ev[t->made]);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "cudaEventCreate");
    }
    return 0;
}

static void events_free(kv_events *t)
{
    for (int i = 0; i < t->made; i++)
        cudaEventDestroy(t->ev[i]);
    free(t->ev);
    t->ev = NULL;
}

/* The end of a timing session: the device idle as soon as the candidate's
 * stream is (ev: an unused event), each side's intervals summarized (per
 * call: divided by calls_per_interval), then the timed calls' checks and the
 * guard bands of the slots used. */
static int finish(kv_size_run *r, const kv_events *t, int intervals, int calls_per_interval,
                  int slots, kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    cudaEvent_t last = t->ev[2 * r->n_sides * intervals];
    cudaError_t e = cudaEventRecord(last, w->stream);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(last);
    double t1 = now_s();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    double tail = now_s() - t1;
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "timed calls");
    double *us = calloc((size_t)intervals, sizeof *us);
    if (!us)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "out of memory for timing");
    *gpu_s = 0;
    for (int s = 0; s < r->n_sides; s++) {
        for (int i = 0; i < intervals; i++) {
            float ms;
            const cudaEvent_t *pair = &t->ev[2 * (s * intervals + i)];
            if ((e = cudaEventElapsedTime(&ms, pair[0], pair[1])) != cudaSuccess) {
                free(us);
                return kv_cuda_fail(f, e, "cudaEventElapsedTime");
            }
            us[i] = ms * 1000.0 / calls_per_interval;
            *gpu_s += ms * 1e-3;
        }
        kv_summarize(us, intervals, s == KV_SIDE_REF ? &o->ref : &o->cand);
    }
    free(us);
    o->timed = 1;
    if (r->n_sides == 2 &&
        tail > TAIL_SLACK_S + 0.1 * o->cand.median * 1e-6 * intervals * calls_per_interval)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "candidate: the device stayed busy %.3f ms after its calls on "
                           "ctx->stream ended: it launches work on other streams, which the timer "
                           "cannot see",
                           tail * 1e3);
    if (r->n_sides < 2)
        return 0;
    if (kv_quiesce(r, f) != 0)
        return -1;
    int bad = check_timed_calls(r, slots, intervals * calls_per_interval, o, f), all = 0;
    if (bad < 0 || kv_agree(w, bad, &all, f) != 0)
        return -1;
    return all ? 1 : 0;
}

/* ---- per call --------------------------------------------------------------------------- */

static int time_calls(kv_size_run *r, kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    const int iters = r->job->iters;
    /* a block's calls of each side, the untimed first one included, take
     * slots 0, 1, ...: each its own (the layout has at least two) */
    const int per_block = r->layout.slots - 1 < TIMING_BLOCK ? r->layout.slots - 1 : TIMING_BLOCK;
    kv_events t;
    int rc = events_make(&t, r->n_sides * iters, f);
    if (rc == 0)
        rc = kv_timed_checks_reset(r, f);
    cudaError_t e;
    int slots_used = 0;
    for (int done = 0, block = 0; rc == 0 && done < iters; done += per_block, block++) {
        int b = iters - done < per_block ? iters - done : per_block;
        slots_used = b + 1 > slots_used ? b + 1 : slots_used;
        if ((rc = fresh_round(r, b + 1, (uint64_t)block, f)) != 0)
            break;
        /* The block waits behind the gate until all of it is enqueued. */
        unsigned epoch = ++w->gate_epoch;
        if ((e = kv_dev_gate(w->gate_dev, epoch, GATE_TIMEOUT_NS, w->stream)) != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "timing gate");
            break;
        }
        for (int s = 0; rc == 0 && s < r->n_sides; s++) {
            /* one untimed call first: it absorbs the ranks' skew in leaving
             * their gates, which would otherwise fall on the reference */
            kv_size_run_bind_slot(r, 0);
            if ((rc = kv_call_run(r, s, f)) != 0)
                break;
            for (int i = done; i < done + b; i++) {
                kv_size_run_bind_slot(r, 1 + i - done);
                cudaEvent_t *pair = &t.ev[2 * (s * iters + i)];
                if ((e = cudaEventRecord(pair[0], w->stream)) != cudaSuccess ||
                    (rc = kv_call_run(r, s, f)) != 0 ||
                    (e = cudaEventRecord(pair[1], w->stream)) != cudaSuccess) {
                    if (rc == 0)
                        rc = kv_cuda_fail(f, e, "cudaEventRecord");
                    break;
                }
            }
            if (rc == 0)
                rc = check_round(r, b + 1, s == KV_SIDE_REF, f);
        }
        __atomic_store_n(w->gate_host, epoch, __ATOMIC_RELEASE);
    }
    /* the last calls were the candidate's */
    if (rc == 0)
        rc = finish(r, &t, iters, 1, slots_used, o, gpu_s, f);
    events_free(&t);
    return rc;
}

/* ---- graph replays ---------------------------------------------------------------------- */

/* The time of one call of the slower side, from PROBE_CALLS calls of each
 * between two events (after the warm-up). */
static int probe_call_us(kv_size_run *r, int next[2], double *us, kv_fail *f)
{
    kv_worker *w = r->w;
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess)
        e = cudaEventCreate(&ev[1]);
    int rc = e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "cudaEventCreate");
    *us = 0;
    for (int s = 0; rc == 0 && s < r->n_sides; s++) {
        if ((e = cudaEventRecord(ev[0], w->stream)) != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "cudaEventRecord");
            break;
        }
        for (int i = 0; rc == 0 && i < PROBE_CALLS; i++) {
            kv_size_run_bind_slot(r, next[s]++ % r->layout.slots);
            rc = kv_call_run(r, s, f);
        }
        float ms = 0;
        if (rc == 0 && ((e = cudaEventRecord(ev[1], w->stream)) != cudaSuccess ||
                        (e = cudaEventSynchronize(ev[1])) != cudaSuccess ||
                        (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) != cudaSuccess))
            rc = kv_cuda_fail(f, e, "timing probe");
        if (ms * 1000.0 / PROBE_CALLS > *us)
            *us = ms * 1000.0 / PROBE_CALLS;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    return rc;
}

/* 0 timed, 1 a mismatch after timing, -1 a failure, 2 the reference cannot
 * be captured on some rank (nothing timed; the caller times per call). */
static int time_replays(kv_size_run *r, int next[2], kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    double call_us = 0;
    if (probe_call_us(r, next, &call_us, f) != 0)
        return -1;
    int calls = (int)ceil(KV_GRAPH_REPLAY_US / (call_us > 0.1 ? call_us : 0.1));
    calls = calls < 1 ? 1 : calls > KV_GRAPH_MAX_CALLS ? KV_GRAPH_MAX_CALLS : calls;
    /* each call of a replay on a slot of its own: a slot that served two
     * calls would show the second one inputs the first had seen */
    if (calls > r->layout.slots)
        calls = r->layout.slots;
    int all = 0;
    if (kv_agree(w, calls, &all, f) != 0) /* the largest: every rank captures as many */
        return -1;
    calls = all;

    cudaGraphExec_t exec[2] = {NULL, NULL};
    int rc = 0;
    for (int s = 0; s < r->n_sides && rc == 0; s++) {
        /* both sides' graphs write the same slots, so each replay leaves every slot it
         * uses with both sides' outputs of the same inputs */
        int got = kv_capture_calls(r, s, calls, &exec[s], f);
        if (got < 0 || kv_agree(w, got, &all, f) != 0) {
            rc = -1;
            break;
        }
        if (all == 0)
            continue;
        if (s == KV_SIDE_REF) {
            rc = 2;
            break;
        }
        rc = got ? kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                               "candidate: %d successive calls cannot be captured into one CUDA "
                               "graph for timing",
                               calls)
                 : kv_fail_on_other_rank(f, "the timing capture");
    }
    const int replays = r->job->iters / 5 < MIN_REPLAYS ? MIN_REPLAYS : r->job->iters / 5;
    kv_events t = {NULL, 0};
    if (rc == 0)
        rc = events_make(&t, r->n_sides * replays, f);
    if (rc == 0)
        rc = kv_timed_checks_reset(r, f);
    cudaError_t e = cudaSuccess;
    /* warm-up replays, then the timed ones, the sides in turn, each replay
     * on fresh inputs and checked */
    for (int i = -WARM_REPLAYS; rc == 0 && i < replays; i++) {
        if ((rc = fresh_round(r, calls, (uint64_t)(i + WARM_REPLAYS), f)) != 0)
            break;
        for (int s = 0; rc == 0 && s < r->n_sides; s++) {
            cudaEvent_t *pair = i >= 0 ? &t.ev[2 * (s * replays + i)] : NULL;
            if ((pair && (e = cudaEventRecord(pair[0], w->stream)) != cudaSuccess) ||
                // NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): exec[s] made for each side
                (e = cudaGraphLaunch(exec[s], w->stream)) != cudaSuccess ||
                (pair && (e = cudaEventRecord(pair[1], w->stream)) != cudaSuccess)) {
                rc = kv_cuda_fail(f, e,
                                  s == KV_SIDE_REF ? "a replay of the reference's graph"
                                                   : "candidate: a replay of its graph");
                break;
            }
            rc = check_round(r, calls, s == KV_SIDE_REF, f);
        }
    }
    if (rc == 0) {
        o->graph_calls = calls;
        rc = finish(r, &t, replays, calls, calls, o, gpu_s, f);
    }
    events_free(&t);
    for (int s = 0; s < 2; s++)
        if (exec[s])
            cudaGraphExecDestroy(exec[s]);
    return rc;
}

int kv_time_size(kv_size_run *r, kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    if (kv_fill_inputs_slots(r, r->layout.slots, 1000, w->aux, f) != 0)
        return -1;
    cudaError_t e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing timing inputs");
    int next[2] = {0, 0}; /* per side: the next call's number, which picks its slot */
    if (warm_up(r, next, f) != 0)
        return -1;
    if (r->job->graph_timing) {
        int rc = time_replays(r, next, o, gpu_s, f);
        if (rc != 2)
            return rc;
        snprintf(o->timing_note, sizeof o->timing_note,
                 "timed per call: the reference cannot be captured into a CUDA graph");
    }
    return time_calls(r, o, gpu_s, f);
}
