/* job.c — running one job on this rank: for every size, set up the window
 * and both contexts, capture one candidate call, run the correctness trials,
 * time reference and candidate interleaved, and check again after timing.
 * Every rank runs the same sequence; cross-rank agreement (kv_agree) keeps
 * them together where one rank's failure must stop all of them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evaluator/worker/worker.h"
#include "kevo/clock.h"

#define TIMING_BLOCK 10
#define TAIL_SLACK_S 1e-3

/* Reports in w->reports[]: one per purpose. */
enum { REP_CHECKSUM = 0, REP_GUARD = 1, REP_COMPARE = 2 };

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
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
    side->scratch_used += aligned;
    ctx->scratch_bytes_left = r->layout.scratch_bytes - side->scratch_used;
    if (local)
        *local = (char *)r->w->win_base + off;
    if (peer)
        for (int p = 0; p < KEVO_MAX_RANKS; p++)
            peer[p] = p < r->w->world ? (char *)r->w->win_peers[p] + off : NULL;
    if (window_offset)
        *window_offset = off;
    return 0;
}

/* ---- reading device reports ------------------------------------------------- */

static int read_report(kv_worker *w, int i, kv_dev_report *out, kv_fail *f)
{
    cudaError_t e = cudaMemcpyAsync(out, &w->reports[i], sizeof *out, cudaMemcpyDeviceToHost,
                                    w->aux);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "reading a check report");
}

static int reset_report(kv_worker *w, int i, kv_fail *f)
{
    cudaError_t e = kv_dev_report_reset(&w->reports[i], w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "resetting a check report");
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
    kv_layout_compute(r->problem, r->in_shape, r->out_shape, r->n_sides, r->job->scratch_bytes,
                      w->l2_bytes, &r->layout);
    if (kv_window_ensure(w, r->layout.total, f) != 0)
        return -1;
    /* signal pads and scratch start zeroed for every new context */
    cudaError_t e = cudaMemsetAsync(w->win_base, 0, r->layout.slots_base, w->aux);
    for (int k = 0; e == cudaSuccess && k < r->layout.slots; k++)
        for (int g = 0; e == cudaSuccess && g < r->layout.n_guards; g++)
            e = kv_dev_guard_fill((char *)w->win_base + r->layout.slots_base +
                                      (size_t)k * r->layout.slot_stride + r->layout.guard_off[g],
                                  KV_GUARD_BYTES, r->job->seed ^ (uint64_t)(k * 131 + g), w->aux);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
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

/* The outcome of a call: its return code and any CUDA error it raised. */
static int check_call(kv_size_run *r, int s, const char *fn, int rc, kv_fail *f)
{
    cudaError_t e = cudaGetLastError();
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

static int call_run(kv_size_run *r, int s, kv_fail *f)
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
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "kevo_init failed on another rank");
    return all ? -1 : 0;
}

static void fini_sides(kv_size_run *r)
{
    for (int s = 0; s < r->n_sides; s++)
        if (r->side[s].inited && r->side[s].code.fini)
            r->side[s].code.fini(&r->side[s].ctx);
}

/* ---- inputs, outputs, checks ----------------------------------------------------- */

static kv_fill_kind fill_kind(kv_init_kind k)
{
    switch (k) {
    case KV_INIT_NORMAL: return KV_FILL_NORMAL;
    case KV_INIT_UNIFORM: return KV_FILL_UNIFORM;
    case KV_INIT_INT_RANGE: return KV_FILL_INT_RANGE;
    default: return KV_FILL_ZEROS;
    }
}

/* Fresh inputs for slot k from (job seed, size, draw, tensor, rank). */
static int fill_inputs(kv_size_run *r, int k, uint64_t draw, kv_fail *f)
{
    kv_size_run_bind_slot(r, k);
    for (int i = 0; i < r->problem->n_inputs; i++) {
        const kv_tensor_spec *t = &r->problem->inputs[i];
        if (t->init == KV_INIT_HOOK)
            return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                               "input %s: inputs.cu hooks are not supported by this worker yet",
                               t->name);
        uint64_t seed = mix(r->job->seed ^ mix((uint64_t)r->size * 1000003u + draw) ^
                            mix((uint64_t)i * 7919u + (t->same_on_all_ranks ? 0 : r->w->rank + 1)));
        const kevo_tensor *x = &r->side[0].ctx.inputs[i];
        cudaError_t e = kv_dev_fill(x->ptr, x->dtype, x->numel, fill_kind(t->init), t->init_a,
                                    t->init_b, seed, r->w->aux);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "generating inputs");
    }
    return 0;
}

static int poison_outputs(kv_size_run *r, kv_fail *f)
{
    for (int s = 0; s < r->n_sides; s++)
        for (int j = 0; j < r->problem->n_outputs; j++) {
            const kevo_tensor *y = &r->side[s].ctx.outputs[j];
            cudaError_t e = kv_dev_poison(y->ptr, y->dtype, y->numel, r->w->aux);
            if (e != cudaSuccess)
                return kv_cuda_fail(f, e, "poisoning outputs");
        }
    return 0;
}

/* Checksums of the inputs bound now (slot of side 0). */
static int checksum_inputs(kv_size_run *r, uint64_t *sums, kv_fail *f)
{
    for (int i = 0; i < r->problem->n_inputs; i++) {
        const kevo_tensor *x = &r->side[0].ctx.inputs[i];
        kv_dev_report rep;
        cudaError_t e;
        if (reset_report(r->w, REP_CHECKSUM, f) != 0)
            return -1;
        if ((e = kv_dev_checksum(x->ptr, x->bytes, &r->w->reports[REP_CHECKSUM], r->w->aux)) !=
            cudaSuccess)
            return kv_cuda_fail(f, e, "checksumming inputs");
        if (read_report(r->w, REP_CHECKSUM, &rep, f) != 0)
            return -1;
        sums[i] = rep.checksum;
    }
    return 0;
}

/* Number of leading rows of output j that are valid (all when unspecified). */
static int valid_elements(kv_size_run *r, int j, int64_t *n, kv_fail *f)
{
    const kv_tensor_spec *t = &r->problem->outputs[j];
    const kevo_tensor *y = &r->side[KV_SIDE_REF].ctx.outputs[j];
    *n = y->numel;
    if (!t->valid_rows_from[0])
        return 0;
    for (int c = 0; c < r->problem->n_outputs; c++) {
        if (strcmp(r->problem->outputs[c].name, t->valid_rows_from) != 0)
            continue;
        const kevo_tensor *cnt = &r->side[KV_SIDE_REF].ctx.outputs[c];
        int64_t rows = 0;
        for (int64_t i = 0; i < cnt->numel; i++) {
            double v;
            cudaError_t e = kv_dev_read_element(cnt->ptr, cnt->dtype, i, &v);
            if (e != cudaSuccess)
                return kv_cuda_fail(f, e, "reading a count output");
            rows += (int64_t)v;
        }
        int64_t row = y->shape[0] > 0 ? y->numel / y->shape[0] : 0;
        if (rows < 0 || rows > y->shape[0])
            return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                               "reference: %s sums to %lld rows, outside [0, %lld]", cnt->name,
                               (long long)rows, (long long)y->shape[0]);
        *n = rows * row;
        return 0;
    }
    return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "output %s: no count output %s", t->name,
                       t->valid_rows_from);
}

/* Compares the candidate's outputs with the reference's in the bound slot,
 * checks the inputs against their checksums and the guard bands of slot k.
 * Fills o with the first problem found; returns 1 when something is wrong. */
static int check_slot(kv_size_run *r, int k, const uint64_t *sums, kv_size_outcome *o,
                      kv_fail *f)
{
    kv_worker *w = r->w;
    for (int j = 0; j < r->problem->n_outputs && r->n_sides == 2; j++) {
        const kevo_tensor *got = &r->side[KV_SIDE_CAND].ctx.outputs[j];
        const kevo_tensor *want = &r->side[KV_SIDE_REF].ctx.outputs[j];
        const kv_tensor_spec *t = &r->problem->outputs[j];
        int64_t n;
        kv_dev_report rep;
        cudaError_t e;
        if (valid_elements(r, j, &n, f) != 0 || reset_report(w, REP_COMPARE, f) != 0)
            return -1;
        if ((e = kv_dev_compare(got->ptr, want->ptr, got->dtype, n, t->atol, t->rtol,
                                &w->reports[REP_COMPARE], w->aux)) != cudaSuccess)
            return kv_cuda_fail(f, e, "comparing outputs");
        if (read_report(w, REP_COMPARE, &rep, f) != 0)
            return -1;
        if (rep.bad == 0)
            continue;
        o->bad_rank = w->rank;
        snprintf(o->bad_tensor, sizeof o->bad_tensor, "%s", t->name);
        o->bad_index = (int64_t)rep.first_bad;
        o->bad_count = (int64_t)rep.bad;
        o->max_abs_err = rep.max_abs;
        o->max_rel_err = rep.max_rel;
        if (kv_dev_read_element(want->ptr, want->dtype, o->bad_index, &o->expected) != cudaSuccess ||
            kv_dev_read_element(got->ptr, got->dtype, o->bad_index, &o->got) != cudaSuccess)
            return kv_cuda_fail(f, cudaGetLastError(), "reading a mismatching element");
        if (rep.unwritten == rep.bad)
            snprintf(o->detail, sizeof o->detail, "%llu of %lld elements of %s never written",
                     rep.unwritten, (long long)n, t->name);
        else
            snprintf(o->detail, sizeof o->detail,
                     "%llu of %lld elements of %s out of tolerance (%llu unwritten)", rep.bad,
                     (long long)n, t->name, rep.unwritten);
        return 1;
    }
    uint64_t now[KEVO_MAX_TENSORS];
    if (checksum_inputs(r, now, f) != 0)
        return -1;
    for (int i = 0; i < r->problem->n_inputs; i++) {
        if (now[i] != sums[i]) {
            o->bad_rank = w->rank;
            snprintf(o->bad_tensor, sizeof o->bad_tensor, "%s", r->problem->inputs[i].name);
            o->bad_index = -1;
            snprintf(o->detail, sizeof o->detail, "input %s was modified (inputs are read-only)",
                     r->problem->inputs[i].name);
            return 1;
        }
    }
    if (reset_report(w, REP_GUARD, f) != 0)
        return -1;
    for (int g = 0; g < r->layout.n_guards; g++) {
        cudaError_t e = kv_dev_guard_check((char *)w->win_base + r->layout.slots_base +
                                               (size_t)k * r->layout.slot_stride +
                                               r->layout.guard_off[g],
                                           KV_GUARD_BYTES, r->job->seed ^ (uint64_t)(k * 131 + g),
                                           &w->reports[REP_GUARD], w->aux);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "checking guard bands");
    }
    kv_dev_report rep;
    if (read_report(w, REP_GUARD, &rep, f) != 0)
        return -1;
    if (rep.guard_bad) {
        o->bad_rank = w->rank;
        o->bad_index = -1;
        snprintf(o->detail, sizeof o->detail,
                 "%llu bytes written outside the tensors (guard bands after them changed)",
                 rep.guard_bad);
        return 1;
    }
    return 0;
}

/* Waits for this device, then for every rank: nothing of the calls is still
 * running anywhere when the checks start. */
static int quiesce(kv_size_run *r, kv_fail *f)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "waiting for the calls to finish");
    int all;
    return kv_agree(r->w, 0, &all, f);
}

/* One correctness trial on slot 0: fresh inputs, poisoned outputs, reference
 * then candidate, then the checks. Returns 0 ok, 1 mismatch (here or on
 * another rank), -1 failure. */
static int trial(kv_size_run *r, uint64_t draw, kv_size_outcome *o, kv_fail *f)
{
    uint64_t sums[KEVO_MAX_TENSORS];
    if (fill_inputs(r, 0, draw, f) != 0 || poison_outputs(r, f) != 0 ||
        checksum_inputs(r, sums, f) != 0)
        return -1;
    cudaError_t e = cudaStreamSynchronize(r->w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing a trial");
    for (int s = 0; s < r->n_sides; s++) {
        if (call_run(r, s, f) != 0)
            return -1;
        if ((e = cudaStreamSynchronize(r->w->stream)) != cudaSuccess)
            return kv_cuda_fail(f, e, s == KV_SIDE_REF ? "reference run" : "candidate run");
    }
    if (quiesce(r, f) != 0)
        return -1;
    int bad = check_slot(r, 0, sums, o, f);
    if (bad < 0)
        return -1;
    int all = 0;
    if (kv_agree(r->w, bad, &all, f) != 0)
        return -1;
    return all ? 1 : 0;
}

/* ---- capture -------------------------------------------------------------------------- */

static int capture(kv_size_run *r, kv_job_result *res, kv_fail *f)
{
    kv_worker *w = r->w;
    kv_side *c = &r->side[KV_SIDE_CAND];
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "cudaStreamBeginCapture");
    int rc = c->code.run(&c->ctx);
    c->ctx.call_index++;
    e = cudaStreamEndCapture(w->stream, &graph);
    (void)cudaGetLastError(); /* a failed capture is evidence, not an error */
    if (rc != 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "candidate: kevo_run returned %d (captured)", rc);
    res->graph_captured = e == cudaSuccess && graph != NULL;
    if (!res->graph_captured) {
        snprintf(res->graph_json, sizeof res->graph_json, "{\"captured\":false,\"error\":\"%s\"}",
                 cudaGetErrorName(e));
        return 0;
    }
    size_t n = 0;
    cudaGraphNode_t *nodes = NULL;
    e = cudaGraphGetNodes(graph, NULL, &n);
    if (e == cudaSuccess && n > 0) {
        nodes = calloc(n, sizeof *nodes);
        e = nodes ? cudaGraphGetNodes(graph, nodes, &n) : cudaErrorMemoryAllocation;
    }
    size_t at = (size_t)snprintf(res->graph_json, sizeof res->graph_json,
                                 "{\"captured\":true,\"nodes\":[");
    for (size_t i = 0; e == cudaSuccess && i < n; i++) {
        enum cudaGraphNodeType type;
        if ((e = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess)
            break;
        const char *name = NULL, *kind = "other";
        if (type == cudaGraphNodeTypeKernel) {
            struct cudaKernelNodeParams kp;
            res->kernel_nodes++;
            kind = "kernel";
            if (cudaGraphKernelNodeGetParams(nodes[i], &kp) == cudaSuccess)
                (void)cudaFuncGetName(&name, kp.func);
            (void)cudaGetLastError();
        } else if (type == cudaGraphNodeTypeMemcpy) {
            res->memcpy_nodes++;
            kind = "memcpy";
        } else if (type == cudaGraphNodeTypeMemset) {
            res->memset_nodes++;
            kind = "memset";
        } else {
            res->other_nodes++;
        }
        if (at < sizeof res->graph_json - 80)
            at += (size_t)snprintf(res->graph_json + at, sizeof res->graph_json - at,
                                   "%s{\"type\":\"%s\",\"name\":\"%.40s\"}", i ? "," : "", kind,
                                   name ? name : "");
    }
    if (at < sizeof res->graph_json - 3)
        snprintf(res->graph_json + at, sizeof res->graph_json - at, "]}");
    free(nodes);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "reading the captured graph");
    if (n == 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "candidate: kevo_run put no work on ctx->stream (work on other "
                           "streams is invisible to the timer and is not allowed)");
    return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarize(double *v, int n, kv_timing *t)
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

/* Interleaved timing: warm-up, then blocks of TIMING_BLOCK calls of each side
 * in turn, each call between two events on ctx->stream, slots rotating. */
static int time_size(kv_size_run *r, kv_size_outcome *o, double *gpu_s, kv_fail *f)
{
    kv_worker *w = r->w;
    const kv_job *job = r->job;
    int K = r->layout.slots, iters = job->iters;
    int last_slot = (job->warmup + iters - 1) % K;
    uint64_t sums[KEVO_MAX_TENSORS];
    for (int k = 0; k < K; k++)
        if (fill_inputs(r, k, 1000 + (uint64_t)k, f) != 0)
            return -1;
    kv_size_run_bind_slot(r, last_slot);
    if (checksum_inputs(r, sums, f) != 0)
        return -1;
    cudaError_t e = cudaStreamSynchronize(w->aux);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "preparing timing inputs");

    int n_ev = 2 * r->n_sides * iters;
    cudaEvent_t *ev = calloc((size_t)n_ev + 1, sizeof *ev);
    double *ms = calloc((size_t)iters, sizeof *ms);
    int made = 0, rc = 0;
    if (!ev || !ms) {
        rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "out of memory for timing");
        goto out;
    }
    for (; made < n_ev + 1; made++)
        if ((e = cudaEventCreate(&ev[made])) != cudaSuccess) {
            rc = kv_cuda_fail(f, e, "cudaEventCreate");
            goto out;
        }
    int next[2] = {0, 0}; /* per side: the next call's index, which picks its slot */
    for (int i = 0; i < job->warmup; i++)
        for (int s = 0; s < r->n_sides; s++) {
            kv_size_run_bind_slot(r, next[s]++ % K);
            if ((rc = call_run(r, s, f)) != 0)
                goto out;
        }
    for (int done = 0; done < iters; done += TIMING_BLOCK) {
        int b = iters - done < TIMING_BLOCK ? iters - done : TIMING_BLOCK;
        for (int s = 0; s < r->n_sides; s++)
            for (int i = done; i < done + b; i++) {
                kv_size_run_bind_slot(r, next[s]++ % K);
                cudaEvent_t *pair = &ev[2 * (s * iters + i)];
                if ((e = cudaEventRecord(pair[0], w->stream)) != cudaSuccess) {
                    rc = kv_cuda_fail(f, e, "cudaEventRecord");
                    goto out;
                }
                if ((rc = call_run(r, s, f)) != 0)
                    goto out;
                if ((e = cudaEventRecord(pair[1], w->stream)) != cudaSuccess) {
                    rc = kv_cuda_fail(f, e, "cudaEventRecord");
                    goto out;
                }
            }
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
            float t;
            if ((e = cudaEventElapsedTime(&t, ev[2 * (s * iters + i)], ev[2 * (s * iters + i) + 1])) !=
                cudaSuccess) {
                rc = kv_cuda_fail(f, e, "cudaEventElapsedTime");
                goto out;
            }
            ms[i] = t * 1000.0; /* microseconds */
            *gpu_s += t * 1e-3;
        }
        summarize(ms, iters, s == KV_SIDE_REF ? &o->ref : &o->cand);
    }
    o->timed = 1;
    if (r->n_sides == 2 && tail > TAIL_SLACK_S + 0.1 * o->cand.median * 1e-6 * iters) {
        rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                         "candidate: the device stayed busy %.3f ms after its calls on ctx->stream "
                         "ended: it launches work on other streams, which the timer cannot see",
                         tail * 1e3);
        goto out;
    }
    /* The last timed call of each side used the same slot and inputs: its
     * outputs must still agree (races across calls, state left behind). */
    if (quiesce(r, f) != 0) {
        rc = -1;
        goto out;
    }
    kv_size_run_bind_slot(r, last_slot);
    int bad = check_slot(r, last_slot, sums, o, f);
    if (bad < 0) {
        rc = -1;
        goto out;
    }
    if (bad && o->detail[0]) {
        char tmp[sizeof o->detail];
        snprintf(tmp, sizeof tmp, "after %d timed calls: %.200s", iters, o->detail);
        memcpy(o->detail, tmp, sizeof tmp);
    }
    int all = 0;
    if (kv_agree(w, bad, &all, f) != 0) {
        rc = -1;
        goto out;
    }
    rc = all ? 1 : 0;
out:
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(ms);
    return rc;
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
    kv_worker_progress(w, "init");
    int rc = init_sides(r, f);
    if (rc == 0 && r->n_sides == 2 && r->job->capture && !res->graph_captured && !res->graph_json[0]) {
        kv_worker_progress(w, "capture");
        rc = capture(r, res, f);
        int all = 0;
        if (kv_agree(w, rc != 0, &all, f) != 0)
            rc = -1;
        else if (all && rc == 0)
            rc = kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "capture failed on another rank");
    }
    int trials = r->n_sides == 2 ? r->job->trials : 0;
    for (int t = 0; rc == 0 && t < trials; t++) {
        kv_worker_progress(w, "correctness");
        o->checked = 1;
        rc = trial(r, (uint64_t)t, o, f);
    }
    if (rc == 0 && timed && r->job->iters > 0) {
        kv_worker_progress(w, "timing");
        double gpu = 0;
        rc = time_size(r, o, &gpu, f);
        res->gpu_s += gpu;
        if (rc == 0 && trials > 0) {
            kv_worker_progress(w, "correctness after timing");
            rc = trial(r, (uint64_t)trials + 7, o, f);
        }
    }
    if (rc >= 0)
        fini_sides(r);
    o->ok = rc == 0;
    return rc;
}

int kv_worker_run_job(kv_worker *w, const kv_job *job, kv_job_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_s();
    kv_fail f = {KV_VERDICT_OK, {0}};
    kv_err err = {{0}};
    kv_problem problem;
    kv_size_run *r = calloc(1, sizeof *r);
    int rc = 0;
    if (!r) {
        res->verdict = KV_VERDICT_RUNTIME_ERROR;
        snprintf(res->message, sizeof res->message, "out of memory");
        return -1;
    }
    w->job_id = job->id;
    kv_worker_progress(w, "load");
    if (kv_problem_load(job->problem_dir, &problem, &err) != 0) {
        snprintf(res->message, sizeof res->message, "%s", err.msg);
        res->verdict = KV_VERDICT_RUNTIME_ERROR;
        free(r);
        return -1;
    }
    r->w = w;
    r->problem = &problem;
    r->job = job;
    r->n_sides = job->candidate_so[0] ? 2 : 1;
    rc = kv_code_load(job->reference_so, 1, &r->side[KV_SIDE_REF].code, &f);
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
    if (rc > 0) {
        const kv_size_outcome *o = &res->sizes[res->n_sizes - 1];
        res->verdict = KV_VERDICT_MISMATCH;
        if (o->bad_rank >= 0)
            snprintf(res->message, sizeof res->message,
                     "mismatch at size %s on rank %d: %s (first bad index %lld: expected %g, got %g; "
                     "max abs err %g, max rel err %g)",
                     o->name, o->bad_rank, o->detail, (long long)o->bad_index, o->expected, o->got,
                     o->max_abs_err, o->max_rel_err);
        else
            snprintf(res->message, sizeof res->message, "mismatch at size %s on another rank",
                     o->name);
    } else if (rc < 0) {
        res->verdict = f.verdict == KV_VERDICT_OK ? KV_VERDICT_RUNTIME_ERROR : f.verdict;
        snprintf(res->message, sizeof res->message, "%s", f.message);
    } else {
        res->verdict = KV_VERDICT_OK;
    }
    res->wall_s = now_s() - t0;
    kv_problem_free(&problem);
    free(r);
    return rc == 0 ? 0 : -1;
}
