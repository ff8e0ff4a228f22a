/* replay.c — the replay trial: is the candidate still correct when its calls
 * are replayed from a CUDA graph, as inference engines run them?
 *
 * KV_REPLAY_CALLS successive candidate calls, each on its own slot (input and
 * output set), are captured into one graph, which is then launched
 * KV_REPLAY_COUNT times. Before each launch every slot gets fresh inputs and
 * poisoned outputs, and on the replays after the first one rank starts
 * KV_SKEW_US late (the rank taking turns). After each launch, once every rank
 * is idle, the reference runs on each slot's inputs and every call's outputs
 * are compared. A replay repeats every host value of the capture (kernel
 * arguments, pointers, ctx->call_index), so a kernel whose epochs or buffer
 * parity come from the host passes its barriers on the previous replay's
 * flags: it reads a late peer's old inputs and gets a mismatch that names the
 * replay and the call. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "worker/worker.h"

/* Fresh inputs and poisoned outputs of both sides in every slot the graph uses. */
static int prepare_slots(kv_size_run *r, int slots, uint64_t draw, kv_fail *f)
{
    for (int k = 0; k < slots; k++)
        if (kv_fill_inputs(r, k, draw + (uint64_t)k, r->w->aux, f) != 0 ||
            kv_poison_outputs(r, KV_SIDE_REF, r->w->aux, f) != 0 ||
            kv_poison_outputs(r, KV_SIDE_CAND, r->w->aux, f) != 0)
            return -1;
    cudaError_t e = cudaStreamSynchronize(r->w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "preparing a replay");
}

/* The reference on each slot, and the candidate's outputs of that slot
 * against it; the first bad slot is kept. The reference runs on every slot
 * whatever this rank found: it is a collective, and a rank that stopped at its
 * own mismatch would leave the others waiting in it. */
static int check_slots(kv_size_run *r, int slots, kv_size_outcome *o, int *bad_slot, kv_fail *f)
{
    int bad = 0;
    for (int k = 0; k < slots; k++) {
        kv_size_run_bind_slot(r, k);
        cudaError_t e;
        if (kv_call_run(r, KV_SIDE_REF, f) != 0)
            return -1;
        if ((e = cudaStreamSynchronize(r->w->stream)) != cudaSuccess)
            return kv_cuda_fail(f, e, "reference run (replay trial)");
        if (bad != 0)
            continue;
        bad = kv_check_outputs(r, o, f);
        if (bad == 0)
            bad = kv_check_integrity(r, k, NULL, o, f);
        if (bad < 0)
            return -1;
        if (bad > 0)
            *bad_slot = k;
    }
    return bad;
}

/* The last of `calls` calls (0-based) that wrote slot k, calls going round `slots` slots. */
static int last_call_on(int k, int slots, int calls)
{
    return k + slots * ((calls - 1 - k) / slots);
}

int kv_replay_trial(kv_size_run *r, kv_size_outcome *o, kv_fail *f)
{
    kv_worker *w = r->w;
    const int calls = KV_REPLAY_CALLS;
    const int slots = calls < r->layout.slots ? calls : r->layout.slots;
    cudaGraphExec_t exec = NULL;
    int rc = kv_capture_calls(r, KV_SIDE_CAND, calls, &exec, f), all = 0;
    if (rc > 0)
        rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                         "candidate: %d successive calls cannot be captured into one CUDA graph "
                         "for the replay trial (kevo_run failed or synchronised)",
                         calls);
    if (kv_agree(w, rc != 0, &all, f) != 0)
        rc = -1;
    else if (all && rc == 0)
        rc = kv_fail_on_other_rank(f, "the replay trial's capture");
    if (rc != 0) {
        if (exec)
            cudaGraphExecDestroy(exec);
        return -1;
    }
    for (int rep = 0; rep < KV_REPLAY_COUNT && rc == 0; rep++) {
        const int late = rep == 0 ? -1 : (rep - 1) % w->world;
        if (w->rank == late)
            usleep(KV_SKEW_US);
        if (prepare_slots(r, slots, 7000 + 16 * (uint64_t)rep, f) != 0) {
            rc = -1;
            break;
        }
        cudaError_t e = cudaGraphLaunch(exec, w->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(w->stream);
        if (e != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "candidate: a replay of its captured calls");
            break;
        }
        if (kv_quiesce(r, f) != 0) {
            rc = -1;
            break;
        }
        int bad_slot = -1;
        int bad = check_slots(r, slots, o, &bad_slot, f);
        if (bad < 0 || kv_quiesce(r, f) != 0) {
            rc = -1;
            break;
        }
        if (bad > 0) {
            char tmp[sizeof o->detail];
            char skew[64] = "";
            if (late >= 0)
                snprintf(skew, sizeof skew, ", rank %d starting %d us late", late, KV_SKEW_US);
            int n = snprintf(tmp, sizeof tmp,
                             "replay %d of a CUDA graph of %d calls, call %d%s "
                             "(epochs or buffers chosen on the host?): ",
                             rep + 1, calls, last_call_on(bad_slot, slots, calls) + 1, skew);
            if (n > 0 && (size_t)n < sizeof tmp) { /* the mismatch itself, cut to fit */
                size_t len = strnlen(o->detail, sizeof tmp - (size_t)n - 1);
                memcpy(tmp + n, o->detail, len);
                tmp[(size_t)n + len] = '\0';
            }
            memcpy(o->detail, tmp, sizeof tmp);
        }
        if (kv_agree(w, bad, &all, f) != 0) {
            rc = -1;
            break;
        }
        rc = all ? 1 : 0;
    }
    cudaGraphExecDestroy(exec);
    return rc;
}
