/* checks.c — what the worker does to inputs and outputs around the calls:
 * fresh inputs from the job's seed, poisoned outputs, guard bands,
 * checksums, and the comparison of the candidate's outputs with the
 * reference's. Every check reports the first problem with its rank,
 * tensor, index and values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"

/* Reports in w->reports[]: one per purpose; the timed calls' checks have a
 * checksum of the reference's outputs before and after the candidate's calls
 * and one comparison per output tensor. */
enum {
    REP_CHECKSUM = 0,
    REP_GUARD = 1,
    REP_COMPARE = 2,
    REP_TIMED_REF_BEFORE = 3,
    REP_TIMED_REF_AFTER = 4,
    REP_TIMED_OUT = 5 /* + output index */
};
_Static_assert(REP_TIMED_OUT + KEVO_MAX_TENSORS <= KV_REPORTS, "w->reports holds every report");

uint64_t kv_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int read_report(kv_worker *w, int i, kv_dev_report *out, kv_fail *f)
{
    cudaError_t e =
        cudaMemcpyAsync(out, &w->reports[i], sizeof *out, cudaMemcpyDeviceToHost, w->aux);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "reading a check report");
}

static int reset_report(kv_worker *w, int i, kv_fail *f)
{
    cudaError_t e = kv_dev_report_reset(&w->reports[i], w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "resetting a check report");
}

/* ---- guard bands ------------------------------------------------------------------ */

/* The copies of the slot layout that hold tensors: the window (every side
 * placed there) and each plain side's region. Each gets its guard bands. */
static int guard_copies(const kv_size_run *r, char *base[3])
{
    int n = 0;
    base[n++] = r->w->win_base;
    for (int s = 0; s < r->n_sides; s++)
        if (r->layout.plain[s])
            base[n++] = kv_placement_base(r->w, &r->layout, s);
    return n;
}

static void *guard_ptr(const kv_size_run *r, char *base, int k, int g)
{
    return base + r->layout.slots_base + (size_t)k * r->layout.slot_stride + r->layout.guard_off[g];
}

static uint64_t guard_seed(const kv_size_run *r, int k, int g)
{
    return r->job->seed ^ (uint64_t)(k * 131 + g);
}

int kv_guards_fill(kv_size_run *r, kv_fail *f)
{
    cudaError_t e = cudaSuccess;
    char *base[3];
    int copies = guard_copies(r, base);
    for (int c = 0; c < copies; c++)
        for (int k = 0; e == cudaSuccess && k < r->layout.slots; k++)
            for (int g = 0; e == cudaSuccess && g < r->layout.n_guards; g++)
                e = kv_dev_guard_fill(guard_ptr(r, base[c], k, g), r->layout.guard_len[g],
                                      guard_seed(r, k, g), r->w->aux);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "filling guard bands");
}

/* ---- inputs and outputs ------------------------------------------------------------- */

static kv_fill_kind fill_kind(kv_init_kind k)
{
    switch (k) {
    case KV_INIT_NORMAL: return KV_FILL_NORMAL;
    case KV_INIT_UNIFORM: return KV_FILL_UNIFORM;
    case KV_INIT_INT_RANGE: return KV_FILL_INT_RANGE;
    default: return KV_FILL_ZEROS;
    }
}

/* Each row (last dimension) of x: distinct values of [lo, hi) in random order
 * (Floyd's sampling, then a shuffle), made on the host and copied. */
static int fill_permutation(const kevo_tensor *x, int64_t lo, int64_t hi, uint64_t seed,
                            cudaStream_t s, kv_fail *f)
{
    int64_t row = x->shape[x->ndim - 1], rows = row > 0 ? x->numel / row : 0;
    int64_t range = hi - lo;
    int64_t *vals = malloc((size_t)(row > 0 ? row : 1) * sizeof *vals);
    void *host = malloc(x->bytes ? x->bytes : 1);
    if (!vals || !host) {
        free(vals);
        free(host);
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "out of memory for permutation inputs");
    }
    uint64_t st = seed;
    for (int64_t rix = 0; rix < rows; rix++) {
        int64_t n = 0;
        for (int64_t j = range - row; j < range; j++) { /* Floyd: row distinct of [0, range) */
            int64_t v = (int64_t)(kv_mix64(st++) % (uint64_t)(j + 1)), seen = 0;
            for (int64_t q = 0; q < n && !seen; q++)
                seen = vals[q] == v;
            vals[n++] = seen ? j : v;
        }
        for (int64_t q = n - 1; q > 0; q--) { /* Floyd's sample is not in random order */
            int64_t z = (int64_t)(kv_mix64(st++) % (uint64_t)(q + 1)), tmp = vals[q];
            vals[q] = vals[z];
            vals[z] = tmp;
        }
        for (int64_t q = 0; q < row; q++) {
            if (x->dtype == KEVO_I32)
                // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult): vals holds row values
                ((int32_t *)host)[rix * row + q] = (int32_t)(lo + vals[q]);
            else
                // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult)
                ((int64_t *)host)[rix * row + q] = lo + vals[q];
        }
    }
    cudaError_t e = cudaMemcpyAsync(x->ptr, host, x->bytes, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s); /* the host buffer goes away */
    free(vals);
    free(host);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "copying permutation inputs");
}

/* 1 when side s reads its own copy of the inputs: only sides that are both
 * in the window share one (every plain side has a region of its own). */
static int own_inputs(const kv_size_run *r, int s)
{
    return s > 0 && (r->layout.plain[s] || r->layout.plain[0]);
}

/* Side 0's inputs into the copies of the sides placed elsewhere. */
static int copy_inputs(kv_size_run *r, cudaStream_t s, kv_fail *f)
{
    for (int side = 1; side < r->n_sides; side++) {
        if (!own_inputs(r, side))
            continue;
        for (int i = 0; i < r->problem->n_inputs; i++) {
            const kevo_tensor *from = &r->side[0].ctx.inputs[i];
            const kevo_tensor *to = &r->side[side].ctx.inputs[i];
            cudaError_t e =
                cudaMemcpyAsync(to->ptr, from->ptr, from->bytes, cudaMemcpyDeviceToDevice, s);
            if (e != cudaSuccess)
                return kv_cuda_fail(f, e, "copying inputs to plain memory");
        }
    }
    return 0;
}

/* The seed of input i for a draw: the rank enters it unless every rank must
 * see the same values. */
static uint64_t input_seed(const kv_size_run *r, int i, uint64_t draw)
{
    const kv_tensor_spec *t = &r->problem->inputs[i];
    return kv_mix64(
        r->job->seed ^ kv_mix64((uint64_t)r->size * 1000003u + draw) ^
        kv_mix64((uint64_t)i * 7919u + (t->same_on_all_ranks ? 0 : (uint64_t)r->w->rank + 1)));
}

/* Inputs whose values the host makes (a permutation) or the problem's hook
 * does: filled one slot at a time. The others take one strided launch. */
static int filled_by_host(const kv_tensor_spec *t)
{
    return t->init == KV_INIT_HOOK || t->init == KV_INIT_PERMUTATION;
}

/* Input i of the bound slot from `seed`; `slots` > 1 fills that many slots
 * from the bound one on (device-made values only). */
static int fill_input(kv_size_run *r, int i, uint64_t seed, int slots, cudaStream_t s, kv_fail *f)
{
    const kv_tensor_spec *t = &r->problem->inputs[i];
    const kevo_tensor *x = &r->side[0].ctx.inputs[i];
    if (t->init == KV_INIT_HOOK) {
        if (!r->inputs_hook)
            return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                               "input %s: the problem's inputs.cu was not loaded", t->name);
        kevo_ctx c = r->side[0].ctx; /* the bound slot, on the stream asked for */
        c.stream = s;
        int rc = r->inputs_hook(&c, i, seed);
        cudaError_t e = cudaGetLastError();
        if (rc != 0 || e != cudaSuccess)
            return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                               "the problem's inputs hook failed for %s (returned %d, %s)", t->name,
                               rc, cudaGetErrorName(e));
        return 0;
    }
    double a = t->init_a, b = t->init_b;
    if (t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION) {
        int64_t lo, hi;
        kv_err err = {{0}};
        if (kv_problem_init_range(r->problem, i, r->size, r->w->world, &lo, &hi, &err) != 0)
            return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s", err.msg);
        if (t->init == KV_INIT_PERMUTATION)
            return fill_permutation(x, lo, hi, seed, s, f);
        a = (double)lo;
        b = (double)hi;
    }
    cudaError_t e = kv_dev_fill_slots(x->ptr, r->layout.slot_stride, slots, x->dtype, x->numel,
                                      fill_kind(t->init), a, b, seed, s);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "generating inputs");
}

int kv_fill_inputs(kv_size_run *r, int k, uint64_t draw, cudaStream_t s, kv_fail *f)
{
    kv_size_run_bind_slot(r, k);
    for (int i = 0; i < r->problem->n_inputs; i++)
        if (fill_input(r, i, input_seed(r, i, draw), 1, s, f) != 0)
            return -1;
    return copy_inputs(r, s, f);
}

int kv_fill_inputs_slots(kv_size_run *r, int slots, uint64_t draw, cudaStream_t s, kv_fail *f)
{
    kv_size_run_bind_slot(r, 0);
    for (int i = 0; i < r->problem->n_inputs; i++)
        if (!filled_by_host(&r->problem->inputs[i]) &&
            fill_input(r, i, input_seed(r, i, draw), slots, s, f) != 0)
            return -1;
    for (int k = 0; k < slots; k++) {
        kv_size_run_bind_slot(r, k);
        for (int i = 0; i < r->problem->n_inputs; i++)
            if (filled_by_host(&r->problem->inputs[i]) &&
                fill_input(r, i, input_seed(r, i, draw) ^ kv_mix64(0x51075ull + (uint64_t)k), 1, s,
                           f) != 0)
                return -1;
        if (copy_inputs(r, s, f) != 0)
            return -1;
    }
    return 0;
}

int kv_poison_outputs(kv_size_run *r, int side, cudaStream_t s, kv_fail *f)
{
    for (int j = 0; j < r->problem->n_outputs; j++) {
        const kevo_tensor *y = &r->side[side].ctx.outputs[j];
        cudaError_t e = kv_dev_poison(y->ptr, y->dtype, y->numel, s);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "poisoning outputs");
    }
    return 0;
}

static int checksum(kv_worker *w, const kevo_tensor *t, uint64_t *sum, kv_fail *f)
{
    kv_dev_report rep;
    cudaError_t e;
    if (reset_report(w, REP_CHECKSUM, f) != 0)
        return -1;
    if ((e = kv_dev_checksum(t->ptr, t->bytes, &w->reports[REP_CHECKSUM], w->aux)) != cudaSuccess)
        return kv_cuda_fail(f, e, "checksumming a tensor");
    if (read_report(w, REP_CHECKSUM, &rep, f) != 0)
        return -1;
    *sum = rep.checksum;
    return 0;
}

int kv_checksum_inputs(kv_size_run *r, kv_sums *sums, kv_fail *f)
{
    for (int s = 0; s < r->n_sides; s++)
        for (int i = 0; (s == 0 || own_inputs(r, s)) && i < r->problem->n_inputs; i++)
            if (checksum(r->w, &r->side[s].ctx.inputs[i], &sums->in[s][i], f) != 0)
                return -1;
    return 0;
}

int kv_checksum_ref_outputs(kv_size_run *r, kv_sums *sums, kv_fail *f)
{
    for (int j = 0; j < r->problem->n_outputs; j++)
        if (checksum(r->w, &r->side[KV_SIDE_REF].ctx.outputs[j], &sums->ref_out[j], f) != 0)
            return -1;
    return 0;
}

/* The reference's output that counts output j's valid rows (valid_rows_from),
 * or NULL when every element of j is valid. */
static const kevo_tensor *counts_of(const kv_size_run *r, int j)
{
    const kv_tensor_spec *t = &r->problem->outputs[j];
    for (int c = 0; t->valid_rows_from[0] && c < r->problem->n_outputs; c++)
        if (strcmp(r->problem->outputs[c].name, t->valid_rows_from) == 0)
            return &r->side[KV_SIDE_REF].ctx.outputs[c];
    return NULL; /* the problem loader refuses a valid_rows_from that names no output */
}

/* The elements in one row of output j. */
static int64_t row_elems(const kv_size_run *r, int j)
{
    const kevo_tensor *y = &r->side[KV_SIDE_REF].ctx.outputs[j];
    return y->shape[0] > 0 ? y->numel / y->shape[0] : 0;
}

/* Number of leading elements of output j that are valid (all when unspecified). */
static int valid_elements(kv_size_run *r, int j, int64_t *n, kv_fail *f)
{
    const kevo_tensor *y = &r->side[KV_SIDE_REF].ctx.outputs[j];
    const kevo_tensor *cnt = counts_of(r, j);
    *n = y->numel;
    if (!cnt)
        return 0;
    int64_t rows = 0;
    for (int64_t i = 0; i < cnt->numel; i++) {
        double v;
        cudaError_t e = kv_dev_read_element(cnt->ptr, cnt->dtype, i, &v);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "reading a count output");
        rows += (int64_t)v;
    }
    if (rows < 0 || rows > y->shape[0])
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "reference: %s sums to %lld rows, outside [0, %lld]", cnt->name,
                           (long long)rows, (long long)y->shape[0]);
    *n = rows * row_elems(r, j);
    return 0;
}

/* ---- the checks ------------------------------------------------------------------------- */

/* Records a problem that has no element index (integrity, guards). */
static void flag(kv_size_run *r, kv_size_outcome *o, const char *tensor, const char *detail)
{
    o->bad_rank = r->w->rank;
    snprintf(o->bad_tensor, sizeof o->bad_tensor, "%s", tensor);
    o->bad_index = -1;
    snprintf(o->detail, sizeof o->detail, "%s", detail);
}

int kv_check_outputs(kv_size_run *r, kv_size_outcome *o, kv_fail *f)
{
    kv_worker *w = r->w;
    for (int j = 0; j < r->problem->n_outputs; j++) {
        const kevo_tensor *got = &r->side[KV_SIDE_CAND].ctx.outputs[j];
        const kevo_tensor *want = &r->side[KV_SIDE_REF].ctx.outputs[j];
        const kv_tensor_spec *t = &r->problem->outputs[j];
        int64_t n;
        kv_dev_report rep;
        cudaError_t e;
        double atol, rtol;
        kv_tensor_tolerance(t, w->world, &atol, &rtol);
        if (valid_elements(r, j, &n, f) != 0 || reset_report(w, REP_COMPARE, f) != 0)
            return -1;
        if ((e = kv_dev_compare(got->ptr, want->ptr, got->dtype, n, atol, rtol,
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
        if ((e = kv_dev_read_element(want->ptr, want->dtype, o->bad_index, &o->expected)) !=
                cudaSuccess ||
            (e = kv_dev_read_element(got->ptr, got->dtype, o->bad_index, &o->got)) != cudaSuccess)
            return kv_cuda_fail(f, e, "reading a mismatching element");
        if (rep.unwritten == rep.bad)
            snprintf(o->detail, sizeof o->detail, "%llu of %lld elements of %s not written",
                     rep.unwritten, (long long)n, t->name);
        else
            snprintf(o->detail, sizeof o->detail,
                     "%llu of %lld elements of %s out of tolerance (%llu not written)", rep.bad,
                     (long long)n, t->name, rep.unwritten);
        return 1;
    }
    return 0;
}

int kv_check_integrity(kv_size_run *r, int k, const kv_sums *sums, kv_size_outcome *o, kv_fail *f)
{
    kv_worker *w = r->w;
    uint64_t now = 0;
    char detail[sizeof o->detail];
    for (int s = 0; sums && s < r->n_sides; s++) {
        /* the candidate's inputs are side 0's unless it has its own copy */
        int own = own_inputs(r, s);
        for (int i = 0; (s == 0 || own) && i < r->problem->n_inputs; i++) {
            if (checksum(w, &r->side[s].ctx.inputs[i], &now, f) != 0)
                return -1;
            if (now == sums->in[s][i])
                continue;
            if (s == KV_SIDE_REF && own_inputs(r, KV_SIDE_CAND))
                snprintf(detail, sizeof detail,
                         "the reference modified its copy of input %s (inputs are read-only)",
                         r->problem->inputs[i].name);
            else
                snprintf(detail, sizeof detail, "input %s was modified (inputs are read-only)",
                         r->problem->inputs[i].name);
            flag(r, o, r->problem->inputs[i].name, detail);
            return 1;
        }
    }
    for (int j = 0; sums && j < r->problem->n_outputs; j++) {
        if (checksum(w, &r->side[KV_SIDE_REF].ctx.outputs[j], &now, f) != 0)
            return -1;
        if (now != sums->ref_out[j]) {
            snprintf(detail, sizeof detail, "the reference's %s was overwritten by the candidate",
                     r->problem->outputs[j].name);
            flag(r, o, r->problem->outputs[j].name, detail);
            return 1;
        }
    }
    if (reset_report(w, REP_GUARD, f) != 0)
        return -1;
    char *base[3];
    int copies = guard_copies(r, base);
    for (int c = 0; c < copies; c++)
        for (int g = 0; g < r->layout.n_guards; g++) {
            cudaError_t e = kv_dev_guard_check(guard_ptr(r, base[c], k, g), r->layout.guard_len[g],
                                               guard_seed(r, k, g), &w->reports[REP_GUARD], w->aux);
            if (e != cudaSuccess)
                return kv_cuda_fail(f, e, "checking guard bands");
        }
    kv_dev_report rep;
    if (read_report(w, REP_GUARD, &rep, f) != 0)
        return -1;
    if (rep.guard_bad) {
        snprintf(detail, sizeof detail,
                 "%llu bytes written outside the tensors (the guard bands after them changed)",
                 rep.guard_bad);
        flag(r, o, "", detail);
        return 1;
    }
    return 0;
}

/* ---- the timed calls' checks ----------------------------------------------------------- */

int kv_timed_checks_reset(kv_size_run *r, kv_fail *f)
{
    if (reset_report(r->w, REP_TIMED_REF_BEFORE, f) != 0 ||
        reset_report(r->w, REP_TIMED_REF_AFTER, f) != 0)
        return -1;
    for (int j = 0; j < r->problem->n_outputs; j++)
        if (reset_report(r->w, REP_TIMED_OUT + j, f) != 0)
            return -1;
    cudaError_t e = cudaStreamSynchronize(r->w->aux); /* before the timing stream uses them */
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "resetting the timed checks");
}

int kv_timed_checksum_ref(kv_size_run *r, int slots, int after, cudaStream_t s, kv_fail *f)
{
    kv_size_run_bind_slot(r, 0);
    kv_dev_report *rep = &r->w->reports[after ? REP_TIMED_REF_AFTER : REP_TIMED_REF_BEFORE];
    for (int j = 0; j < r->problem->n_outputs; j++) {
        const kevo_tensor *y = &r->side[KV_SIDE_REF].ctx.outputs[j];
        cudaError_t e =
            kv_dev_checksum_slots(y->ptr, r->layout.slot_stride, slots, y->bytes, rep, s);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "checksumming the reference's timed outputs");
    }
    return 0;
}

/* Output j's valid rows on the device, when its problem counts them: the
 * reference's counts tensor of the bound slot. 0 when every element counts. */
static int rows_of(const kv_size_run *r, int j, kv_dev_rows *rows)
{
    const kevo_tensor *cnt = counts_of(r, j);
    if (!cnt)
        return 0;
    rows->counts = cnt->ptr;
    rows->counts_dtype = cnt->dtype;
    rows->n_counts = cnt->numel;
    rows->row_elems = row_elems(r, j);
    return 1;
}

int kv_timed_compare(kv_size_run *r, int slots, cudaStream_t s, kv_fail *f)
{
    kv_size_run_bind_slot(r, 0);
    for (int j = 0; j < r->problem->n_outputs; j++) {
        const kevo_tensor *got = &r->side[KV_SIDE_CAND].ctx.outputs[j];
        const kevo_tensor *want = &r->side[KV_SIDE_REF].ctx.outputs[j];
        double atol, rtol;
        kv_dev_rows rows;
        int counted = rows_of(r, j, &rows);
        kv_tensor_tolerance(&r->problem->outputs[j], r->w->world, &atol, &rtol);
        cudaError_t e = kv_dev_compare_slots(got->ptr, want->ptr, r->layout.slot_stride, slots,
                                             got->dtype, got->numel, counted ? &rows : NULL, atol,
                                             rtol, &r->w->reports[REP_TIMED_OUT + j], s);
        if (e != cudaSuccess)
            return kv_cuda_fail(f, e, "comparing the timed calls' outputs");
    }
    return 0;
}

int kv_timed_checks_result(kv_size_run *r, int calls, kv_size_outcome *o, kv_fail *f)
{
    kv_dev_report before, after, rep;
    if (read_report(r->w, REP_TIMED_REF_BEFORE, &before, f) != 0 ||
        read_report(r->w, REP_TIMED_REF_AFTER, &after, f) != 0)
        return -1;
    char detail[sizeof o->detail];
    if (before.checksum != after.checksum) {
        snprintf(detail, sizeof detail,
                 "the reference's outputs changed while the candidate's timed calls ran (they "
                 "were overwritten)");
        flag(r, o, "", detail);
        return 1;
    }
    for (int j = 0; j < r->problem->n_outputs; j++) {
        if (read_report(r->w, REP_TIMED_OUT + j, &rep, f) != 0)
            return -1;
        if (rep.bad == 0)
            continue;
        o->bad_rank = r->w->rank;
        snprintf(o->bad_tensor, sizeof o->bad_tensor, "%s", r->problem->outputs[j].name);
        o->bad_index = -1;
        o->bad_count = (int64_t)rep.bad;
        o->max_abs_err = rep.max_abs;
        o->max_rel_err = rep.max_rel;
        snprintf(o->detail, sizeof o->detail,
                 "%llu elements of %s out of tolerance (%llu not written) over %d timed calls, "
                 "each on inputs no earlier call saw",
                 rep.bad, r->problem->outputs[j].name, rep.unwritten, calls);
        return 1;
    }
    return 0;
}

int kv_quiesce(kv_size_run *r, kv_fail *f)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "waiting for the calls to finish");
    int all;
    return kv_agree(r->w, 0, &all, f);
}
