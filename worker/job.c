/* job.c — running one job on this rank: for every size, set up the window
 * and both contexts, capture one candidate call, run the correctness trials,
 * time reference and candidate interleaved (timing.c), and check again after
 * timing. Every rank runs the same sequence; cross-rank agreement (kv_agree)
 * keeps them together where one rank's failure must stop all of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/nvls_trap.h"
#include "worker/worker.h"
#include "common/clock.h"

/* How late one rank starts a skewed trial. */

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

/* ---- the scratch allocator handed to kevo_init ------------------------------- */

static int scratch_alloc(kevo_ctx *ctx, size_t bytes, void **local, void *peer[KEVO_MAX_RANKS],
                         size_t *window_offset)
{
    kv_side *side = ctx->harness;
    kv_size_run *r = side->run;
    size_t aligned = (bytes + 255) / 256 * 256;
    if (aligned > r->layout.scratch_bytes - side->scratch_used)
        return -1;
    size_t off = r->layout.scratch_off[side->index] + side->scratch_used;
    int plain = r->layout.plain[side->index];
    side->scratch_used += aligned;
    ctx->scratch_bytes_left = r->layout.scratch_bytes - side->scratch_used;
    if (local)
        *local = kv_placement_base(r->w, &r->layout, side->index) + off;
    if (peer)
        for (int p = 0; p < KEVO_MAX_RANKS; p++)
            peer[p] = !plain && p < r->w->world ? (char *)r->w->win_peers[p] + off : NULL;
    if (window_offset)
        *window_offset = plain ? SIZE_MAX : off;
    return 0;
}

/* ---- setup --------------------------------------------------------------------- */

static void fill_ctx(kv_size_run *r, int s)
{
    kv_worker *w = r->w;
    kv_side *side = &r->side[s];
    kevo_ctx *c = &side->ctx;
    const kv_problem *p = r->problem;
    memset(c, 0, sizeof *c);
    side->index = s;
    side->run = r;
    side->scratch_used = 0;
    c->abi_version = KEVO_ABI_VERSION;
    c->rank = w->rank;
    c->world = w->world;
    c->device = w->device;
    c->stream = w->stream;
    c->sm_count = w->sm_count;
    c->problem = p->name;
    c->size_name = p->sizes[r->size].name;
    c->n_params = p->n_params;
    for (int i = 0; i < p->n_params; i++) {
        snprintf(c->param_names[i], sizeof c->param_names[i], "%s", p->param_names[i]);
        c->param_values[i] = p->sizes[r->size].values[i];
    }
    c->comm = w->comm;
    c->window = w->window;
    c->devcomm = w->devcomm;
    c->lsa_barrier_count = w->lsa_barriers;
    size_t soff = r->layout.signal_off[s];
    c->signal = (uint64_t *)((char *)w->win_base + soff);
    for (int q = 0; q < KEVO_MAX_RANKS; q++)
        c->signal_peer[q] = q < w->world ? (uint64_t *)((char *)w->win_peers[q] + soff) : NULL;
    c->signal_words = r->layout.signal_bytes / sizeof(uint64_t);
    c->signal_window_offset = soff;
    c->call_index = 0;
    c->scratch_alloc = scratch_alloc;
    c->scratch_bytes_left = r->layout.scratch_bytes;
    c->cublas = w->cublas;
    c->harness = side;
}

static int setup_size(kv_size_run *r, kv_fail *f)
{
    kv_worker *w = r->w;
    kv_err err = {{0}};
    if (kv_problem_shapes(r->problem, r->size, w->world, r->in_shape, r->out_shape, &err) != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s", err.msg);
    int64_t wanted = 0;
    if (kv_problem_scratch_bytes(r->problem, r->size, w->world, &wanted, &err) != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s", err.msg);
    kv_layout_compute(r->problem, r->in_shape, r->out_shape, r->n_sides, r->job->scratch_bytes,
                      (size_t)wanted, w->l2_bytes, &r->layout);
    kv_layout *l = &r->layout;
    l->plain[KV_SIDE_REF] = kv_shapes_ref_plain(r->problem, r->in_shape, r->out_shape, w->world);
    if (r->job->selfcheck) {
        l->plain[KV_SIDE_CAND] = 1;
        l->shift[KV_SIDE_CAND] = KV_SELFCHECK_SHIFT;
    }
    if (kv_window_ensure(w, l->total, f) != 0 ||
        kv_plain_ensure(w, kv_placement_plain_bytes(l), f) != 0)
        return -1;
    /* signal pads and scratch start zeroed for every new context */
    cudaError_t e = cudaMemsetAsync(w->win_base, 0, l->slots_base, w->aux);
    for (int s = 0; s < r->n_sides && e == cudaSuccess; s++)
        if (l->plain[s])
            e = cudaMemsetAsync(kv_placement_base(w, l, s), 0, l->slots_base, w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "zeroing signal pads and scratch");
    if (kv_guards_fill(r, f) != 0)
        return -1;
    if ((e = cudaStreamSynchronize(w->aux)) != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing the window");
    for (int s = 0; s < r->n_sides; s++)
        fill_ctx(r, s);
    kv_size_run_bind_slot(r, 0);
    int all = 0;
    return kv_agree(w, 0, &all, f); /* nobody touches a peer's pad before it is zeroed */
}

/* ---- calling the code ------------------------------------------------------------ */

static const char *side_name(int s)
{
    return s == KV_SIDE_REF ? "reference" : "candidate";
}

/* A multicast entry point called since the worker disarmed them (where the
 * machine forbids NVLink multicast, worker/nvls_trap.h): the job is refused,
 * whatever else went wrong (the call failed, so the code may have too). */
static int check_trap(const char *where, kv_fail *f)
{
    const char *called = kv_nvls_trap_called();
    if (!called)
        return 0;
    return kv_fail_set(f, KV_VERDICT_REFUSED,
                       "called %s at run time (%s): NVLink multicast is forbidden on this "
                       "machine (NCCL_NVLS_ENABLE=0)",
                       called, where);
}

/* The end of a phase of a size: rc, unless a trapped call came first. */
static int phase_end(kv_size_run *r, const char *phase, int rc, kv_fail *f)
{
    char where[160];
    snprintf(where, sizeof where, "found after %s at size %.60s", phase,
             r->problem->sizes[r->size].name);
    return check_trap(where, f) != 0 ? -1 : rc;
}

/* The outcome of a call: a trapped driver call, its return code and any
 * CUDA error it raised. */
static int check_call(kv_size_run *r, int s, const char *fn, int rc, kv_fail *f)
{
    cudaError_t e = cudaGetLastError();
    char where[160];
    snprintf(where, sizeof where, "%s: %s at size %.60s", side_name(s), fn,
             r->problem->sizes[r->size].name);
    if (check_trap(where, f) != 0)
        return -1;
    if (rc != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s: %s returned %d at size %s",
                           side_name(s), fn, rc, r->problem->sizes[r->size].name);
    if (e != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, "%s: %s at size %.60s", side_name(s), fn,
                 r->problem->sizes[r->size].name);
        return kv_cuda_fail(f, e, what);
    }
    return 0;
}

int kv_call_run(kv_size_run *r, int s, kv_fail *f)
{
    kv_side *side = &r->side[s];
    int rc = side->code.run(&side->ctx);
    side->ctx.call_index++;
    return check_call(r, s, "kevo_run", rc, f);
}

static int init_sides(kv_size_run *r, kv_fail *f)
{
    int local = 0;
    for (int s = 0; s < r->n_sides && local == 0; s++) {
        kv_side *side = &r->side[s];
        if (side->code.init) {
            cublasSetStream(r->w->cublas, r->w->stream);
            int rc = side->code.init(&side->ctx);
            if (check_call(r, s, "kevo_init", rc, f) != 0)
                local = 1;
        }
        side->inited = local == 0;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (local == 0 && e != cudaSuccess) {
        kv_cuda_fail(f, e, "after kevo_init");
        local = 1;
    }
    int all = 0;
    if (kv_agree(r->w, local, &all, f) != 0)
        return -1;
    if (all && !local)
        return kv_fail_on_other_rank(f, "kevo_init");
    return all ? -1 : 0;
}

static int fini_sides(kv_size_run *r, kv_fail *f)
{
    int rc = 0;
    for (int s = 0; s < r->n_sides; s++) {
        if (r->side[s].inited && r->side[s].code.fini) {
            r->side[s].code.fini(&r->side[s].ctx);
            if (rc == 0 && check_call(r, s, "kevo_fini", 0, f) != 0)
                rc = -1;
        }
    }
    return rc;
}

/* ---- correctness trials ------------------------------------------------------------ */

static int sync_stream(kv_size_run *r, const char *what, kv_fail *f)
{
    cudaError_t e = cudaStreamSynchronize(r->w->stream);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, what);
}

/* A plain trial on slot 0: fresh inputs, poisoned outputs, the reference,
 * then the candidate. Its outputs are compared as soon as its own stream is
 * done, before anything waits for the other ranks (a peer still writing
 * into them is a bug), and again with the integrity checks once every rank
 * is idle (a peer writing late corrupts them). */
static int plain_trial(kv_size_run *r, uint64_t draw, kv_size_outcome *o, kv_fail *f)
{
    kv_sums sums;
    if (kv_fill_inputs(r, 0, draw, r->w->aux, f) != 0 ||
        kv_poison_outputs(r, KV_SIDE_REF, r->w->aux, f) != 0 ||
        kv_poison_outputs(r, KV_SIDE_CAND, r->w->aux, f) != 0 ||
        kv_checksum_inputs(r, &sums, f) != 0)
        return -1;
    if (kv_call_run(r, KV_SIDE_REF, f) != 0 || sync_stream(r, "reference run", f) != 0 ||
        kv_checksum_ref_outputs(r, &sums, f) != 0)
        return -1;
    if (kv_call_run(r, KV_SIDE_CAND, f) != 0 || sync_stream(r, "candidate run", f) != 0)
        return -1;
    int bad = kv_check_outputs(r, o, f);
    if (bad < 0 || kv_quiesce(r, f) != 0)
        return -1;
    if (bad == 0)
        bad = kv_check_outputs(r, o, f);
    if (bad == 0)
        bad = kv_check_integrity(r, 0, &sums, o, f);
    return bad;
}

/* A skewed trial: the candidate first, with one rank starting late, and its
 * inputs overwritten on ctx->stream right after its call. A candidate that
 * reads a peer's inputs before that peer has entered the call (no start
 * barrier), or after it has left (no end barrier), reads the wrong values.
 * Then the inputs are restored and the reference runs on them. */
static int skewed_trial(kv_size_run *r, uint64_t draw, int late_rank, kv_size_outcome *o,
                        kv_fail *f)
{
    kv_sums sums;
    if (r->w->rank == late_rank)
        usleep(KV_SKEW_US);
    if (kv_fill_inputs(r, 0, draw, r->w->aux, f) != 0 ||
        kv_poison_outputs(r, KV_SIDE_REF, r->w->aux, f) != 0 ||
        kv_poison_outputs(r, KV_SIDE_CAND, r->w->aux, f) != 0)
        return -1;
    cudaError_t e = cudaStreamSynchronize(r->w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing a trial");
    if (kv_call_run(r, KV_SIDE_CAND, f) != 0 ||
        kv_fill_inputs(r, 0, draw ^ 0xDEC0, r->w->stream, f) != 0 ||
        sync_stream(r, "candidate run", f) != 0 || kv_quiesce(r, f) != 0)
        return -1;
    if (kv_fill_inputs(r, 0, draw, r->w->aux, f) != 0 || kv_checksum_inputs(r, &sums, f) != 0 ||
        kv_quiesce(r, f) != 0)
        return -1;
    if (kv_call_run(r, KV_SIDE_REF, f) != 0 || sync_stream(r, "reference run", f) != 0 ||
        kv_checksum_ref_outputs(r, &sums, f) != 0 || kv_quiesce(r, f) != 0)
        return -1;
    int bad = kv_check_outputs(r, o, f);
    if (bad == 0)
        bad = kv_check_integrity(r, 0, &sums, o, f);
    if (bad > 0) {
        char tmp[sizeof o->detail];
        snprintf(tmp, sizeof tmp, "with rank %d starting %d us late: %.190s", late_rank, KV_SKEW_US,
                 o->detail);
        memcpy(o->detail, tmp, sizeof tmp);
    }
    return bad;
}

/* Trial number t: odd ones are skewed, the late rank taking turns (a
 * self-check's are all plain: the reference needs no barrier trial).
 * Returns 0 ok, 1 mismatch (here or on another rank), -1 failure. */
static int trial(kv_size_run *r, int t, kv_size_outcome *o, kv_fail *f)
{
    int skewed = t % 2 && !r->job->selfcheck;
    int bad = skewed ? skewed_trial(r, (uint64_t)t, (t / 2) % r->w->world, o, f)
                     : plain_trial(r, (uint64_t)t, o, f);
    if (bad < 0)
        return -1;
    int all = 0;
    if (kv_agree(r->w, bad, &all, f) != 0)
        return -1;
    return all ? 1 : 0;
}

/* ---- one size, the job --------------------------------------------------------------------- */

static int run_size(kv_size_run *r, int timed, kv_job_result *res, kv_size_outcome *o, kv_fail *f)
{
    kv_worker *w = r->w;
    snprintf(o->name, sizeof o->name, "%s", r->problem->sizes[r->size].name);
    o->bad_rank = -1;
    kv_worker_progress(w, "setup");
    if (setup_size(r, f) != 0)
        return -1;
    o->ref_plain = r->layout.plain[KV_SIDE_REF];
    kv_worker_progress(w, "init");
    int rc = phase_end(r, "init", init_sides(r, f), f);
    if (rc == 0 && r->n_sides == 2 && r->job->capture && !res->graph_captured &&
        !res->graph_json[0]) {
        kv_worker_progress(w, "capture");
        rc = kv_capture_candidate(r, res, f);
        int all = 0;
        if (kv_agree(w, rc != 0, &all, f) != 0)
            rc = -1;
        else if (all && rc == 0)
            rc = kv_fail_on_other_rank(f, "capture");
        rc = phase_end(r, "capture", rc, f);
    }
    if (rc == 0 && r->job->dump_dir[0]) {
        kv_worker_progress(w, "dump");
        rc = phase_end(r, "dump", kv_dump_size(r, f), f);
    }
    int trials = r->n_sides == 2 ? r->job->trials : 0;
    for (int t = 0; rc == 0 && t < trials; t++) {
        kv_worker_progress(w, "correctness");
        o->checked = 1;
        rc = phase_end(r, "a correctness trial", trial(r, t, o, f), f);
    }
    if (rc == 0 && trials > 0 && !r->job->selfcheck) {
        kv_worker_progress(w, "replay");
        rc = phase_end(r, "the replay trial", kv_replay_trial(r, o, f), f);
    }
    if (rc == 0 && timed && r->job->iters > 0) {
        kv_worker_progress(w, "timing");
        double gpu = 0;
        rc = phase_end(r, "timing", kv_time_size(r, o, &gpu, f), f);
        res->gpu_s += gpu;
        if (rc == 0 && trials > 0) {
            kv_worker_progress(w, "correctness after timing");
            /* even: a plain trial, fresh inputs and poison */
            rc = phase_end(r, "the trial after timing", trial(r, 2 * trials, o, f), f);
        }
    }
    if (rc >= 0 && fini_sides(r, f) != 0)
        rc = -1;
    o->ok = rc == 0;
    return rc;
}

/* A self-check's mismatch: the reference as evaluations place it against
 * its copy on shifted plain memory. */
static void selfcheck_message(const kv_size_outcome *o, kv_job_result *res)
{
    const char *placed = o->ref_plain ? "plain memory" : "window buffers";
    if (!res->origin)
        snprintf(res->message, sizeof res->message,
                 "the reference does not agree with itself at size %s on another rank", o->name);
    else if (o->bad_index >= 0)
        snprintf(res->message, sizeof res->message,
                 "the reference does not agree with itself at size %s: %s[%lld] is %g on %s "
                 "and %g on plain memory shifted by %u bytes; %s (max abs err %g, max rel err %g)",
                 o->name, o->bad_tensor, (long long)o->bad_index, o->expected, placed, o->got,
                 KV_SELFCHECK_SHIFT, o->detail, o->max_abs_err, o->max_rel_err);
    else
        snprintf(res->message, sizeof res->message,
                 "the reference does not agree with itself at size %s: %s", o->name, o->detail);
}

/* The verdict and message of a mismatch at size o: this rank's own findings
 * when it saw the mismatch itself (the supervisor prefixes "rank R: "), else
 * that another rank did (origin false: the merge prefers that rank's words). */
static void mismatch_message(const kv_job *job, const kv_size_outcome *o, kv_job_result *res)
{
    res->verdict = KV_VERDICT_MISMATCH;
    res->origin = o->bad_rank >= 0;
    if (job->selfcheck)
        selfcheck_message(o, res);
    else if (!res->origin)
        snprintf(res->message, sizeof res->message, "mismatch at size %s on another rank", o->name);
    else if (o->bad_index >= 0)
        snprintf(res->message, sizeof res->message,
                 "mismatch at size %s: %s[%lld]: expected %g, got %g; %s (max abs err %g, "
                 "max rel err %g)",
                 o->name, o->bad_tensor, (long long)o->bad_index, o->expected, o->got, o->detail,
                 o->max_abs_err, o->max_rel_err);
    else
        snprintf(res->message, sizeof res->message, "mismatch at size %s: %s", o->name, o->detail);
}

int kv_worker_run_job(kv_worker *w, const kv_job *job, kv_job_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_s();
    kv_fail f = {KV_VERDICT_OK, {0}, 0};
    kv_err err = {{0}};
    kv_problem problem;
    kv_size_run *r = calloc(1, sizeof *r);
    int rc = 0;
    if (!r) {
        res->verdict = KV_VERDICT_RUNTIME_ERROR;
        res->origin = 1;
        snprintf(res->message, sizeof res->message, "out of memory");
        return -1;
    }
    w->job_id = job->id;
    kv_worker_progress(w, "load");
    if (kv_problem_load(job->problem_dir, &problem, &err) != 0) {
        snprintf(res->message, sizeof res->message, "%s", err.msg);
        res->verdict = KV_VERDICT_RUNTIME_ERROR;
        res->origin = 1;
        free(r);
        return -1;
    }
    r->w = w;
    r->problem = &problem;
    r->job = job;
    r->n_sides = job->candidate_so[0] ? 2 : 1;
    rc = kv_code_load(job->reference_so, 1, &r->side[KV_SIDE_REF].code, &f);
    if (rc == 0 && job->inputs_so[0])
        rc = kv_inputs_hook_load(job->inputs_so, &r->inputs_hook, &f);
    if (rc == 0 && r->n_sides == 2)
        rc = kv_code_load(job->candidate_so, 1, &r->side[KV_SIDE_CAND].code, &f);
    for (int i = 0; rc == 0 && i < job->n_sizes; i++) {
        r->size = kv_problem_find_size(&problem, job->sizes[i]);
        if (r->size < 0) {
            rc = kv_fail_set(&f, KV_VERDICT_RUNTIME_ERROR, "problem %s has no size %s",
                             problem.name, job->sizes[i]);
            break;
        }
        kv_size_outcome *o = &res->sizes[res->n_sizes++];
        int timed = (job->time_sizes_mask >> i) & 1;
        rc = run_size(r, timed, res, o, &f);
        if (rc > 0)
            f.verdict = KV_VERDICT_MISMATCH;
    }
    /* a trapped call the checks above did not see (from a host callback, say) */
    if (f.verdict != KV_VERDICT_REFUSED && check_trap("found at the end of the job", &f) != 0)
        rc = -1;
    if (rc > 0) {
        mismatch_message(job, &res->sizes[res->n_sizes - 1], res);
    } else if (rc < 0) {
        res->verdict = f.verdict == KV_VERDICT_OK ? KV_VERDICT_RUNTIME_ERROR : f.verdict;
        res->origin = !f.elsewhere;
        snprintf(res->message, sizeof res->message, "%s", f.message);
    } else {
        res->verdict = KV_VERDICT_OK;
    }
    res->wall_s = now_s() - t0;
    kv_problem_free(&problem);
    free(r);
    return rc == 0 ? 0 : -1;
}
