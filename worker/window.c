/* window.c — the symmetric window and how one size is laid out in it.
 *
 *   [signal ref][signal cand][scratch ref][scratch cand][slot 0][slot 1]...
 *   slot := input 0, guard, input 1, guard, ..., ref outputs + guards,
 *           cand outputs + guards
 *
 * Every tensor starts on a 4 KiB boundary and is followed, from its last
 * byte, by a guard band whose pattern is checked after the candidate runs.
 * There are at least MIN_SLOTS slots, and more when one slot is small (up to
 * 3x the L2 in all): timing gives every call of a replay or block a slot of
 * its own, with inputs no earlier call saw. */
#include <stdio.h>
#include <string.h>

#include "worker/worker.h"

#define ALIGN 4096u
#define MAX_SLOTS 4096
/* Timing gives each call of a block its own slot, and the untimed call that
 * opens a block another one (timing.c). */
#define MIN_SLOTS 2
#define GROW_UNIT ((size_t)64 << 20)

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* The guard band of a tensor at off runs from its last byte to the next
 * tensor: the alignment padding (where a vectorised tail would spill) and
 * KV_GUARD_BYTES more. Returns where the next tensor starts. */
static size_t add_guard(kv_layout *l, size_t off, size_t bytes)
{
    size_t end = off + align_up(bytes ? bytes : 1, ALIGN) + KV_GUARD_BYTES;
    l->guard_off[l->n_guards] = off + bytes;
    l->guard_len[l->n_guards] = end - (off + bytes);
    l->n_guards++;
    return end;
}

int kv_layout_compute(const kv_problem *p, const kv_shape *in, const kv_shape *out, int n_sides,
                      size_t scratch_bytes, size_t problem_scratch, size_t l2_bytes, kv_layout *l)
{
    memset(l, 0, sizeof *l);
    size_t largest = 0, off = 0;
    for (int i = 0; i < p->n_inputs; i++) {
        l->in_off[i] = off;
        off = add_guard(l, off, in[i].bytes);
        if (in[i].bytes > largest)
            largest = in[i].bytes;
    }
    for (int s = 0; s < n_sides; s++) {
        for (int j = 0; j < p->n_outputs; j++) {
            l->out_off[s][j] = off;
            off = add_guard(l, off, out[j].bytes);
            if (out[j].bytes > largest)
                largest = out[j].bytes;
        }
    }
    l->slot_stride = off;
    size_t want = 3 * l2_bytes;
    l->slots = off >= want || off == 0 ? 1 : (int)((want + off - 1) / off);
    if (l->slots > MAX_SLOTS)
        l->slots = MAX_SLOTS;
    if (l->slots < MIN_SLOTS)
        l->slots = MIN_SLOTS;

    l->signal_bytes = KV_SIGNAL_BYTES;
    l->scratch_bytes = scratch_bytes ? scratch_bytes : align_up(2 * largest, ALIGN);
    if (!scratch_bytes && l->scratch_bytes < align_up(problem_scratch, ALIGN))
        l->scratch_bytes = align_up(problem_scratch, ALIGN);
    if (l->scratch_bytes < ((size_t)64 << 20))
        l->scratch_bytes = (size_t)64 << 20;
    size_t at = 0;
    for (int s = 0; s < 2; s++) {
        l->signal_off[s] = at;
        at += l->signal_bytes;
    }
    for (int s = 0; s < 2; s++) {
        l->scratch_off[s] = at;
        at += align_up(l->scratch_bytes, ALIGN);
    }
    l->slots_base = at;
    l->total = at + (size_t)l->slots * l->slot_stride;
    return 0;
}

ncclResult_t kv_window_release(kv_worker *w)
{
    ncclResult_t first = ncclSuccess, r;
    if (w->window) {
        first = ncclCommWindowDeregister(w->comm, w->window);
        w->window = NULL;
    }
    if (w->win_base) {
        r = ncclMemFree(w->win_base);
        first = first != ncclSuccess ? first : r;
        w->win_base = NULL;
    }
    w->win_bytes = 0;
    return first;
}

int kv_window_ensure(kv_worker *w, size_t bytes, kv_fail *f)
{
    if (w->win_bytes >= bytes)
        return 0;
    /* Collective: every rank computes the same layout, so all of them take
     * this branch together and register in the same order. Nothing of the
     * last job may still use the old window. */
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "finishing the work on the old window");
    ncclResult_t r = kv_window_release(w);
    if (r != ncclSuccess)
        return kv_nccl_fail(f, r,
                            "releasing the old window (ncclCommWindowDeregister, ncclMemFree)");
    size_t want = align_up(bytes, GROW_UNIT);
    r = ncclMemAlloc(&w->win_base, want);
    if (r != ncclSuccess) {
        w->win_base = NULL;
        return kv_nccl_fail(f, r, "ncclMemAlloc of the symmetric window");
    }
    r = ncclCommWindowRegister(w->comm, w->win_base, want, &w->window, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) {
        w->window = NULL;
        (void)kv_window_release(w); /* the error above is the one to report */
        return kv_nccl_fail(f, r, "ncclCommWindowRegister");
    }
    e = kv_dev_window_peers(w->window, w->world, w->win_peers);
    if (e != cudaSuccess) {
        (void)kv_window_release(w); /* the error above is the one to report */
        return kv_cuda_fail(f, e, "resolving the window's peer pointers");
    }
    w->win_bytes = want;
    return 0;
}

/* A tensor at off in side s's copy of the layout: the window (with the
 * peers' copies) or plain memory (no peers, no window offset). */
static void bind_tensor(kv_size_run *r, int s, kevo_tensor *t, const char *name, kevo_dtype dtype,
                        const kv_shape *shape, size_t off)
{
    const kv_worker *w = r->w;
    int plain = r->layout.plain[s];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = shape->ndim;
    for (int d = 0; d < KEVO_MAX_DIMS; d++)
        t->shape[d] = d < shape->ndim ? shape->shape[d] : 1;
    t->numel = shape->numel;
    t->bytes = shape->bytes;
    t->ptr = kv_placement_base(w, &r->layout, s) + off;
    for (int p = 0; p < KEVO_MAX_RANKS; p++)
        t->peer[p] = !plain && p < w->world ? (char *)w->win_peers[p] + off : NULL;
    t->window_offset = plain ? SIZE_MAX : off;
}

void kv_size_run_bind_slot(kv_size_run *r, int k)
{
    const kv_layout *l = &r->layout;
    size_t base = l->slots_base + (size_t)k * l->slot_stride;
    for (int s = 0; s < r->n_sides; s++) {
        kevo_ctx *c = &r->side[s].ctx;
        c->n_inputs = r->problem->n_inputs;
        c->n_outputs = r->problem->n_outputs;
        for (int i = 0; i < r->problem->n_inputs; i++)
            bind_tensor(r, s, &c->inputs[i], r->problem->inputs[i].name,
                        r->problem->inputs[i].dtype, &r->in_shape[i], base + l->in_off[i]);
        for (int j = 0; j < r->problem->n_outputs; j++)
            bind_tensor(r, s, &c->outputs[j], r->problem->outputs[j].name,
                        r->problem->outputs[j].dtype, &r->out_shape[j], base + l->out_off[s][j]);
    }
}
