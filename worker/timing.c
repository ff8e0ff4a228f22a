/* timing.c — reference and candidate timed interleaved in one session.
 *
 * Warm-up, then blocks of TIMING_BLOCK calls of each side in turn, each call
 * between two CUDA events on ctx->stream, both sides walking the same slots
 * (input/output sets) in the same order. Each block is held behind a gate
 * kernel until the host has enqueued all of it, so the calls run back to
 * back and the events time the device's work, as a CUDA-graph user sees it,
 * not the host's launch rate (which dominated calls of a few µs). Before each reference block after
 * the first, one slot of that block gets fresh inputs (untimed): a candidate
 * that remembers results per slot instead of computing them is caught by the
 * check of every slot after timing. After the last candidate call the device
 * must go idle as soon as ctx->stream does. */
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

/* Every slot the calls used: the candidate's last outputs against the
 * reference's, both made from the same inputs, and the guard bands. */
static int check_all_slots(kv_size_run *r, int calls, int iters, kv_size_outcome *o, kv_fail *f)
{
    int used = calls < r->layout.slots ? calls : r->layout.slots;
    for (int k = 0; k < used; k++) {
        kv_size_run_bind_slot(r, k);
        int bad = kv_check_outputs(r, o, f);
        if (bad == 0)
            bad = kv_check_integrity(r, k, NULL, o, f);
        if (bad < 0)
            return -1;
        if (bad) {
            char tmp[sizeof o->detail];
            snprintf(tmp, sizeof tmp, "after %d timed calls, slot %d of %d: %.180s", iters, k,
                     r->layout.slots, o->detail);
            memcpy(o->detail, tmp, sizeof tmp);
            return 1;
        }
    }
    return 0;
}

int kv_time_size(kv_size_run *r, kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    const kv_job *job = r->job;
    int K = r->layout.slots, iters = job->iters;
    for (int k = 0; k < K; k++)
        if (kv_fill_inputs(r, k, 1000 + (uint64_t)k, w->aux, f) != 0)
            return -1;
    cudaError_t e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing timing inputs");

    int n_ev = 2 * r->n_sides * iters;
    cudaEvent_t *ev = calloc((size_t)n_ev + 1, sizeof *ev);
    double *us = calloc((size_t)iters, sizeof *us);
    int made = 0, rc = 0;
    if (!ev || !us) {
        rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "out of memory for timing");
        goto out;
    }
    for (; made < n_ev + 1; made++)
        if ((e = cudaEventCreate(&ev[made])) != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "cudaEventCreate");
            goto out;
        }
    int next[2] = {0, 0}; /* per side: the next call's number, which picks its slot */
    double w0 = now_s();
    for (int i = 0; i < job->warmup; i++) {
        for (int s = 0; s < r->n_sides; s++) {
            kv_size_run_bind_slot(r, next[s]++ % K);
            if ((rc = kv_call_run(r, s, f)) != 0)
                goto out;
        }
        /* large sizes need far fewer calls than small ones to reach steady
         * clocks and caches: stop once the time limit is spent (every rank
         * must make the same number of calls, so they agree on when) */
        if (job->warmup_ms > 0 && (i + 1) % 10 == 0) {
            if ((e = cudaStreamSynchronize(w->stream)) != cudaSuccess) {
                rc = kv_cuda_fail(f, e, "warm-up calls");
                goto out;
            }
            int done = (now_s() - w0) * 1e3 > job->warmup_ms, all = 0;
            if ((rc = kv_agree(w, done, &all, f)) != 0)
                goto out;
            if (all)
                break;
        }
    }
    for (int done = 0, block = 0; done < iters; done += TIMING_BLOCK, block++) {
        int b = iters - done < TIMING_BLOCK ? iters - done : TIMING_BLOCK;
        if (block > 0 && (rc = kv_fill_inputs(r, next[0] % K, 5000 + (uint64_t)block, w->stream,
                                              f)) != 0)
            goto out;
        /* The block waits behind the gate until all of it is enqueued. */
        unsigned epoch = ++w->gate_epoch;
        if ((e = kv_dev_gate(w->gate_dev, epoch, GATE_TIMEOUT_NS, w->stream)) != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "timing gate");
            goto out;
        }
        for (int s = 0; s < r->n_sides; s++) {
            /* one untimed call first: it absorbs the ranks' skew in leaving
             * their gates, which would otherwise fall on the reference */
            kv_size_run_bind_slot(r, next[s]++ % K);
            if ((rc = kv_call_run(r, s, f)) != 0)
                goto out;
            for (int i = done; i < done + b; i++) {
                kv_size_run_bind_slot(r, next[s]++ % K);
                cudaEvent_t *pair = &ev[2 * (s * iters + i)];
                if ((e = cudaEventRecord(pair[0], w->stream)) != cudaSuccess ||
                    (rc = kv_call_run(r, s, f)) != 0 ||
                    (e = cudaEventRecord(pair[1], w->stream)) != cudaSuccess) {
                    if (rc == 0)
                        rc = kv_cuda_fail(f, e, "cudaEventRecord");
                    goto out;
                }
            }
        }
        __atomic_store_n(w->gate_host, epoch, __ATOMIC_RELEASE);
    }
    /* The last calls were the candidate's. Once its stream is done, the
     * device must be idle: work still running belongs to another stream. */
    if ((e = cudaEventRecord(ev[n_ev], w->stream)) == cudaSuccess)
        e = cudaEventSynchronize(ev[n_ev]);
    double t1 = now_s();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    double tail = now_s() - t1;
    if (e != cudaSuccess) {
        rc = kv_cuda_fail(f, e, "timed calls");
        goto out;
    }
    *gpu_s = 0;
    for (int s = 0; s < r->n_sides; s++) {
        for (int i = 0; i < iters; i++) {
            float ms;
            if ((e = cudaEventElapsedTime(&ms, ev[2 * (s * iters + i)],
                                          ev[2 * (s * iters + i) + 1])) != cudaSuccess) {
                rc = kv_cuda_fail(f, e, "cudaEventElapsedTime");
                goto out;
            }
            us[i] = ms * 1000.0;
            *gpu_s += ms * 1e-3;
        }
        kv_summarize(us, iters, s == KV_SIDE_REF ? &o->ref : &o->cand);
    }
    o->timed = 1;
    if (r->n_sides == 2 && tail > TAIL_SLACK_S + 0.1 * o->cand.median * 1e-6 * iters) {
        rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                         "candidate: the device stayed busy %.3f ms after its calls on ctx->stream "
                         "ended: it launches work on other streams, which the timer cannot see",
                         tail * 1e3);
        goto out;
    }
    if (r->n_sides == 2) {
        if (kv_quiesce(r, f) != 0) {
            rc = -1;
            goto out;
        }
        int bad = check_all_slots(r, next[KV_SIDE_CAND], iters, o, f);
        int all = 0;
        if (bad < 0 || kv_agree(w, bad, &all, f) != 0) {
            rc = -1;
            goto out;
        }
        rc = all ? 1 : 0;
    }
out:
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(us);
    return rc;
}
