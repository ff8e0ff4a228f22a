/* schedule_gen.c — kv_sched_generate: a schedule (schedule.h) written out as a
 * complete ABI 2 candidate built on patterns/kevo_sched.cuh.
 *
 * The generator reads in one direction: plan the call (which barriers end which
 * phases, which kernels hold which phases and barriers, where the copy engine
 * runs), then emit the file top to bottom: the header comment, the Args
 * struct, one `xfer`/`red` function per phase (what moves between two ranks,
 * host and device), one body per phase (one emitter per phase kind and
 * transport), the kernels, and kevo_init / kevo_run / kevo_fini.
 *
 * Every valid schedule is generated; docs/schedules.md "Generated code"
 * says where the code departs from the schedule, and why. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "mutate/schedule.h"

/* ---- names (the text form's words) -------------------------------------------------------- */

static const char *const coll_names[KV_SC_COUNT] = {"allreduce", "allgather", "reducescatter",
                                                    "alltoall",  "broadcast", "fp8_allgather"};
static const char *const kind_names[KV_PH_COUNT] = {"ar", "rs",      "ag",    "a2a",
                                                    "bc", "scatter", "quant", "local"};
static const char *const sync_words[KV_SYNC_COUNT] = {
    "a grid barrier (every CTA of every rank)", "a CTA barrier (CTA b with CTA b of every rank)",
    "per-chunk flags"};
static const char *const order_words[KV_ORDER_COUNT] = {"ring (r+k)", "rev (r-k)", "xor (r^k)"};
static const char *const order_macros[KV_ORDER_COUNT] = {"KEVO_SCHED_RING", "KEVO_SCHED_REV",
                                                         "KEVO_SCHED_XOR"};

/* ---- the plan ------------------------------------------------------------------------------ */

#define MAX_ITEMS 16
#define MAX_KERNELS 8
#define MAX_BARS 12

typedef enum { IT_BAR, IT_BODY, IT_CE, IT_SUM } item_type;
/* BK_CHUNK: sync=chunk between a phase and the one that reads it, in one kernel: flags per
 * chunk (a grid barrier at run time when they do not fit the pad). */
/* BK_STEPS: the W - 1 grid barriers between the steps of a ring or tree phase (slot s at
 * a.bar[b] + s * kevo_sched_grid_barrier_words(W)), run by the phase's body. */
typedef enum { BK_GRID, BK_CTA, BK_CHUNK, BK_STEPS } bar_kind;

typedef struct {
    item_type type;
    int phase; /* IT_BODY, IT_CE, IT_SUM; for IT_BAR the phase it precedes (n: the end) */
    int bar;   /* IT_BAR: index into bars */
} item;

typedef struct {
    bar_kind kind;
    int pos;      /* 0 .. n: before phase pos (n: the end); -1: a mid barrier */
    int phase;    /* a mid barrier: its phase */
    int kernel;   /* the kernel that runs it */
    int alone;    /* in a 1-CTA barrier kernel */
    int skip_ll;  /* skipped at run time when phase skip_ll - 1 runs LL (0: never) */
    int upgraded; /* sync=cta that runs as a grid barrier (see plan_bars) */
} bar_info;

typedef struct {
    int first, last; /* items [first, last] */
    int alone;       /* a 1-CTA barrier kernel */
    int tma;         /* holds a TMA phase */
} kernel_info;

typedef struct {
    const kv_schedule *s;
    kv_strbuf *b;
    int n;
    int has_local;
    item items[MAX_ITEMS];
    int n_items;
    bar_info bars[MAX_BARS];
    int n_bars;
    int ack; /* the bc LL acknowledgement slot (-1: none) */
    kernel_info kernels[MAX_KERNELS];
    int n_kernels;
    int any_ll, any_recv, any_tma, any_ce, any_alone, any_step, any_nvls;
} gen;

static void out(gen *g, const char *fmt, ...) KV_PRINTF(2, 3);
static void out(gen *g, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf) { /* long lines go through the heap */
        char *p = malloc((size_t)n + 1);
        if (!p) {
            g->b->oom = 1;
            return;
        }
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
        kv_sb_puts(g->b, p);
        free(p);
        return;
    }
    kv_sb_puts(g->b, buf);
}

static const kv_sched_phase *ph(const gen *g, int i)
{
    return &g->s->phase[i];
}

static int width_of(kv_sched_xport x)
{
    return x == KV_XP_SM4 ? 4 : x == KV_XP_SM8 ? 8 : 16;
}

static int is_red(kv_sched_kind k)
{
    return k == KV_PH_AR || k == KV_PH_RS;
}

/* A push reduction: the data goes to the owners' receive slots, then each sums. */
static int is_push_red(const kv_sched_phase *p)
{
    return is_red(p->kind) && p->dir == KV_DIR_PUSH && p->algo == KV_ALGO_DIRECT &&
           p->xport != KV_XP_NVLS; /* nvls: the switch sums, whatever the dir */
}

/* A ring or tree phase: steps between neighbours, grid barriers between the steps. */
static int is_stepped(const kv_sched_phase *p)
{
    return p->algo != KV_ALGO_DIRECT;
}

/* A ring reduce-scatter: running partials in two receive slots (flipped by step parity). */
static int is_ring_red(const kv_sched_phase *p)
{
    return is_red(p->kind) && p->algo == KV_ALGO_RING;
}

/* Receive slots in scratch: a direct push reduction (W slots) or a ring one (2 slots). */
static int needs_slots(const kv_sched_phase *p)
{
    return is_push_red(p) || is_ring_red(p);
}

/* An LL-family phase: ll words or ll128 lines, in receive buffers double-buffered by the
 * epoch's parity (kevo_ll.cuh's reuse rule for both), simple above ll_max. */
static int is_ll(const kv_sched_phase *p)
{
    return p->proto == KV_PROTO_LL || p->proto == KV_PROTO_LL128;
}

static int is_ll128(const kv_sched_phase *p)
{
    return p->proto == KV_PROTO_LL128;
}

int kv_sched_generatable(const kv_schedule *s, kv_err *err)
{
    /* every valid schedule is written (fuse=quant with nvls is invalid: invariant 9) */
    return kv_sched_check(s, err);
}

/* ---- partition signatures: may phases a and b meet with a CTA barrier in one kernel? -------- */

/* The CTA that handles a byte of a range depends on the chunk alone when the range is chunked,
 * on the unit (V) when the grid strides over it (kevo_sched.cuh). ll: the mode that runs LL. */
static long sig_of(const kv_sched_phase *p, int ll)
{
    if (p->kind == KV_PH_QUANT || p->fuse == KV_FUSE_QUANT)
        return -1; /* blocks of 128 elements and their scales: no other phase matches */
    if (p->xport == KV_XP_CE)
        return 16; /* the sum kernel of a ce reduction: V = 16, chunk 0 */
    if (ll && is_ll128(p))
        return -1; /* LL128 lines go to warps over the grid: no other phase matches */
    if (p->chunk > 0)
        return (long)p->chunk << 8;
    return ll ? 4 : width_of(p->xport);
}

static int sigs_match(const kv_sched_phase *a, const kv_sched_phase *b)
{
    for (int la = 0; la <= is_ll(a); la++)
        for (int lb = 0; lb <= is_ll(b); lb++) {
            const long x = sig_of(a, la), y = sig_of(b, lb);
            if (x < 0 || y < 0 || x != y)
                return 0;
        }
    return 1;
}

/* ---- the plan: items, barriers, kernels ----------------------------------------------------- */

static int add_bar(gen *g, int pos, int phase, kv_sched_sync sync)
{
    bar_info *b = &g->bars[g->n_bars];
    memset(b, 0, sizeof *b);
    b->kind = sync == KV_SYNC_GRID ? BK_GRID : BK_CTA;
    b->pos = pos;
    b->phase = phase;
    item *it = &g->items[g->n_items++];
    it->type = IT_BAR;
    it->phase = pos >= 0 ? pos : phase;
    it->bar = g->n_bars;
    return g->n_bars++;
}

static void add_item(gen *g, item_type t, int phase)
{
    item *it = &g->items[g->n_items++];
    it->type = t;
    it->phase = phase;
    it->bar = -1;
}

/* B0 P0 B1 P1 ... Bn; a ce push reduction is its copies, a mid barrier and an SM sum. An SM
 * push reduction's mid barrier is inside its body (a bar of pos -1 without an item). */
static void plan_items(gen *g)
{
    const kv_schedule *s = g->s;
    for (int i = 0; i <= g->n; i++) {
        const kv_sched_sync sync = i == 0 ? s->phase[0].sync : s->phase[i - 1].sync;
        const int b = add_bar(g, i, -1, sync);
        if (i == 0 && is_ll(ph(g, 0)))
            g->bars[b].skip_ll = 1;
        if (i == g->n && is_ll(ph(g, g->n - 1)))
            g->bars[b].skip_ll = g->n;
        if (i == g->n)
            break;
        const kv_sched_phase *p = ph(g, i);
        if (p->xport == KV_XP_CE && is_red(p->kind)) {
            add_item(g, IT_CE, i);
            add_bar(g, -1, i, KV_SYNC_GRID);
            add_item(g, IT_SUM, i);
        } else if (p->xport == KV_XP_CE) {
            add_item(g, IT_CE, i);
        } else {
            add_item(g, IT_BODY, i);
            if (is_stepped(p)) { /* the step barriers, run by the body itself */
                bar_info *m = &g->bars[g->n_bars];
                memset(m, 0, sizeof *m);
                m->kind = BK_STEPS;
                m->pos = -1;
                m->phase = i;
                g->n_bars++;
            }
            if (is_push_red(p)) { /* the mid barrier, run by the body itself */
                bar_info *m = &g->bars[g->n_bars];
                memset(m, 0, sizeof *m);
                m->kind = p->sync == KV_SYNC_GRID ? BK_GRID : BK_CTA;
                m->pos = -1;
                m->phase = i;
                g->n_bars++;
            }
        }
    }
    g->ack = -1;
    for (int i = 0; i < g->n; i++)
        if (ph(g, i)->kind == KV_PH_BC && is_ll(ph(g, i))) {
            bar_info *a = &g->bars[g->n_bars];
            memset(a, 0, sizeof *a);
            a->kind = BK_CTA; /* G x W words, like a CTA barrier */
            a->pos = -1;
            a->phase = i;
            g->ack = g->n_bars++;
        }
}

static int item_sm(const item *it)
{
    return it->type == IT_BODY || it->type == IT_SUM;
}

static void open_kernel(gen *g, int first, int alone)
{
    kernel_info *k = &g->kernels[g->n_kernels++];
    k->first = first;
    k->last = first;
    k->alone = alone;
    k->tma = 0;
}

/* Groups the items into kernels: launch=fused breaks only at ce copies; launch=split also
 * between phases. A barrier joins the kernel of the SM item after it, else the one before it,
 * else it is a 1-CTA kernel of its own. */
static void plan_kernels(gen *g)
{
    int open = 0, has_body = 0;
    const int split = g->s->launch == KV_LAUNCH_SPLIT;
    for (int j = 0; j < g->n_items; j++) {
        item *it = &g->items[j];
        if (it->type == IT_CE) {
            open = 0;
            continue;
        }
        if (item_sm(it)) {
            if (open && split && has_body)
                open = 0;
            if (!open) {
                open_kernel(g, j, 0);
                open = 1;
            }
            g->kernels[g->n_kernels - 1].last = j;
            has_body = 1;
            if (ph(g, it->phase)->xport == KV_XP_TMA)
                g->kernels[g->n_kernels - 1].tma = 1;
            continue;
        }
        /* a barrier */
        const int next_sm = j + 1 < g->n_items && item_sm(&g->items[j + 1]);
        const int prev_sm = j > 0 && item_sm(&g->items[j - 1]);
        bar_info *b = &g->bars[it->bar];
        if (next_sm) {
            if (open && split && has_body)
                open = 0;
            if (!open) {
                open_kernel(g, j, 0);
                open = 1;
                has_body = 0;
            }
        } else if (!(prev_sm && open)) {
            open_kernel(g, j, 1);
            b->alone = 1;
            g->any_alone = 1;
            b->kernel = g->n_kernels - 1;
            open = 0;
            continue;
        }
        g->kernels[g->n_kernels - 1].last = j;
        b->kernel = g->n_kernels - 1;
    }
    /* mid barriers and acks run in their phase's kernel */
    for (int k = 0; k < g->n_kernels; k++)
        for (int j = g->kernels[k].first; j <= g->kernels[k].last; j++)
            if (g->items[j].type == IT_BODY)
                for (int b = 0; b < g->n_bars; b++)
                    if (g->bars[b].pos < 0 && g->bars[b].phase == g->items[j].phase &&
                        ph(g, g->items[j].phase)->xport != KV_XP_CE)
                        g->bars[b].kernel = k;
}

static int kernel_of_item(const gen *g, int j)
{
    for (int k = 0; k < g->n_kernels; k++)
        if (j >= g->kernels[k].first && j <= g->kernels[k].last)
            return k;
    return -1;
}

/* sync=cta between two phases of one kernel is valid only when every byte the second phase
 * reads was written by the same CTA index: the same partition (sig_of). Otherwise the barrier
 * runs as a grid barrier (a kernel boundary makes a CTA barrier as strong as a grid one). */
static void plan_upgrades(gen *g)
{
    for (int j = 0; j < g->n_items; j++) {
        const item *it = &g->items[j];
        if (it->type != IT_BAR)
            continue;
        bar_info *b = &g->bars[it->bar];
        if (b->kind != BK_CTA || b->pos <= 0 || b->pos >= g->n || b->alone)
            continue;
        if (j == 0 || j + 1 >= g->n_items || !item_sm(&g->items[j - 1]) ||
            !item_sm(&g->items[j + 1]))
            continue;
        if (kernel_of_item(g, j - 1) != kernel_of_item(g, j + 1))
            continue;
        if (!sigs_match(ph(g, b->pos - 1), ph(g, b->pos))) {
            b->kind = BK_GRID;
            b->upgraded = 1;
        }
    }
}

/* A phase whose chunks the flags can follow: SM moves of one partition (chunk c to CTA c mod
 * G), in every mode it may run (simple, or ll words of the same chunks). */
static int flaggable(const kv_sched_phase *p)
{
    return p->xport != KV_XP_TMA && p->xport != KV_XP_CE && p->xport != KV_XP_NVLS &&
           p->algo == KV_ALGO_DIRECT && p->proto != KV_PROTO_LL128 && p->kind != KV_PH_QUANT &&
           p->fuse == KV_FUSE_NONE && p->chunk > 0;
}

/* sync=chunk: between a phase and the one that reads it, in one kernel and on one partition,
 * flags per chunk; elsewhere it stays the CTA barrier it was planned as (at the call's start
 * and end, after a local copy, or at a kernel boundary, the chunks' CTAs meet as a CTA
 * barrier; plan_upgrades made it a grid barrier where the partitions differ). */
static void plan_chunks(gen *g)
{
    for (int j = 1; j + 1 < g->n_items; j++) {
        const item *it = &g->items[j];
        if (it->type != IT_BAR)
            continue;
        bar_info *b = &g->bars[it->bar];
        if (b->kind != BK_CTA || b->pos <= 0 || b->pos >= g->n || b->alone)
            continue;
        const kv_sched_phase *a = ph(g, b->pos - 1), *c = ph(g, b->pos);
        if (a->sync != KV_SYNC_CHUNK || !kv_sched_link_reads(g->s, b->pos - 1))
            continue;
        if (!item_sm(&g->items[j - 1]) || !item_sm(&g->items[j + 1]) ||
            kernel_of_item(g, j - 1) != kernel_of_item(g, j + 1))
            continue;
        if (flaggable(a) && flaggable(c) && sigs_match(a, c))
            b->kind = BK_CHUNK;
    }
}

/* A ring or tree phase moves data between CTAs' ranges (a step forwards what another rank's
 * CTAs wrote, partitioned by another length), so the barriers before and after it are grid
 * barriers: a CTA barrier there would let CTA b of a rank start while another CTA of a
 * neighbour still reads what it overwrites. */
static void plan_stepped(gen *g)
{
    for (int b = 0; b < g->n_bars; b++) {
        bar_info *bi = &g->bars[b];
        if (bi->kind != BK_CTA || bi->pos < 0 || bi->alone || b == g->ack)
            continue;
        const int before = bi->pos > 0 && is_stepped(ph(g, bi->pos - 1));
        const int after = bi->pos < g->n && is_stepped(ph(g, bi->pos));
        if (before || after) {
            bi->kind = BK_GRID;
            bi->upgraded = 2;
        }
    }
}

static void plan(gen *g)
{
    g->n = g->s->n_phases;
    for (int i = 0; i < g->n; i++) {
        const kv_sched_phase *p = ph(g, i);
        g->has_local |= p->kind == KV_PH_LOCAL;
        g->any_ll |= is_ll(p);
        g->any_recv |= needs_slots(p);
        g->any_step |= is_stepped(p);
        g->any_tma |= p->xport == KV_XP_TMA;
        g->any_ce |= p->xport == KV_XP_CE;
        g->any_nvls |= p->xport == KV_XP_NVLS;
    }
    plan_items(g);
    plan_kernels(g);
    plan_upgrades(g);
    plan_chunks(g);
    plan_stepped(g);
}

/* ---- the header comment -------------------------------------------------------------------- */

static void cell_of(const gen *g, const char **transport, const char **fusion)
{
    int nvls = 0, tma = 0, ce_all = 1;
    for (int i = 0; i < g->n; i++) {
        nvls |= ph(g, i)->xport == KV_XP_NVLS;
        tma |= ph(g, i)->xport == KV_XP_TMA;
        /* the data phases: quant and local are local work (kv_sched_cell) */
        if (ph(g, i)->kind != KV_PH_QUANT && ph(g, i)->kind != KV_PH_LOCAL)
            ce_all &= ph(g, i)->xport == KV_XP_CE;
    }
    *transport = nvls ? "nvls" : tma ? "tma" : ce_all ? "ce" : "sm";
    *fusion = g->n_kernels == 1 && !g->any_ce ? "fused" : "unfused";
}

/* What the phase does, in words (docs/schedules.md "Phases"). */
static const char *what_of(const gen *g, const kv_sched_phase *p)
{
    const kv_sched_coll c = g->s->coll;
    switch (p->kind) {
    case KV_PH_AR: return "one-shot all-reduce: y = the sum over q of x_q";
    case KV_PH_RS:
        return c == KV_SC_ALLREDUCE ? "reduce-scatter of parts: part p (1/W of x) summed onto "
                                      "rank p's y[part p]"
                                    : "reduce-scatter: y = the sum over q of x_q[r*C ..]";
    case KV_PH_AG:
        if (c == KV_SC_ALLGATHER)
            return g->has_local ? "all-gather of the peers' shards: y[q*N ..] = x_q"
                                : "all-gather: y[q*N ..] = x_q for every q";
        if (c == KV_SC_FP8_ALLGATHER)
            return p->fuse == KV_FUSE_QUANT
                       ? "quantise-and-gather: every rank's shard quantised straight into "
                         "q[s*N ..] and scales[s*nb ..] of every rank"
                       : "all-gather of the quantised shards: q[s*N ..] and scales[s*nb ..]";
        return "all-gather of parts: part p of rank p's y into every rank's y";
    case KV_PH_A2A:
        return g->has_local ? "all-to-all of the peers' chunks: y[q*C ..] = x_q[r*C ..]"
                            : "all-to-all: y[q*C ..] = x_q[r*C ..] for every q";
    case KV_PH_BC: return "broadcast: y = x_0 on every rank";
    case KV_PH_SCATTER: return "scatter: rank q takes part q of x_0 into y[part q]";
    case KV_PH_QUANT:
        return "quantise this rank's shard into its own q[r*N ..] and scales[r*nb ..]";
    case KV_PH_LOCAL:
        return c == KV_SC_ALLGATHER ? "own shard: y[r*N ..] = x_r"
                                    : "own chunk: y[r*C ..] = x_r[r*C ..]";
    default: return "?";
    }
}

static void emit_phase_words(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    out(g, "//  phase %d (%s): %s;\n", i + 1, kind_names[p->kind], what_of(g, p));
    char how[512];
    const char *dir = p->dir == KV_DIR_PULL ? "each rank loads from its peers (pull)"
                                            : "each rank stores into its peers (push)";
    if (p->kind == KV_PH_QUANT || p->kind == KV_PH_LOCAL)
        dir = "local work";
    if (p->xport == KV_XP_CE)
        snprintf(how, sizeof how,
                 "%s with cudaMemcpyAsync, a stream per peer (forked from "
                 "ctx->stream and joined back, so the copies run at once), %d piece%s per peer%s",
                 dir, p->inflight, p->inflight > 1 ? "s" : "",
                 is_red(p->kind) ? " into the owners' receive slots, then a sum kernel" : "");
    else if (p->xport == KV_XP_TMA)
        snprintf(how, sizeof how,
                 "%s with TMA bulk copies through shared memory, tiles of %u "
                 "bytes, %d stage%s",
                 dir, p->chunk, p->inflight, p->inflight > 1 ? "s" : "");
    else
        snprintf(how, sizeof how, "%s with %d-byte SM vectors, %d in flight per thread, %s", dir,
                 width_of(p->xport), p->inflight, p->chunk ? "chunked" : "grid-stride (chunk 0)");
    out(g, "//    %s", how);
    if (p->chunk && p->xport != KV_XP_TMA && p->xport != KV_XP_CE)
        out(g, " (%u-byte chunks, chunk c to CTA c mod G)", p->chunk);
    if (is_push_red(p))
        out(g, ";\n//    the data goes to the owners' receive slots in scratch, then each sums "
               "its own in rank order");
    if (is_ll128(p))
        out(g, ";\n//    LL128 protocol up to ll_max bytes per rank (128-byte lines of 120 bytes "
               "and an 8-byte\n//    epoch flag, 4 lines a warp; no barrier needed), simple above "
               "it");
    else if (is_ll(p))
        out(g, ";\n//    LL protocol up to ll_max bytes per rank (8-byte words of 4 bytes and "
               "the epoch, no barrier needed), simple above it");
    if (is_ring_red(p))
        out(g, ";\n//    ring: W-1 steps, each with one neighbour: at step k rank r adds its x "
               "to the running partial\n//    of part (v - k - 1) (pull: read from its "
               "predecessor; push: part (v - k), stored into its\n//    successor), partials "
               "in bf16 in two receive slots in scratch flipped by step parity (the\n//    order "
               "differs from rank order; at W = 2 one fp32 addition rounded once, the reference's "
               "bits;\n//    at W > 2 W-1 roundings, within the problem's tolerance); a grid "
               "barrier between steps;\n//    no room for the slots: a direct pull");
    else if (p->kind == KV_PH_AG && is_stepped(p))
        out(g,
            ";\n//    ring: the own shard in place, then W-1 steps, each with one "
            "neighbour: at step k rank r\n//    %s the shard of position v - k%s (step 1: "
            "%s own shard, as the direct phase moves it;\n//    later: the one %s received "
            "at step k - 1); a grid barrier between steps",
            p->dir == KV_DIR_PULL ? "pulls from its predecessor" : "pushes to its successor",
            p->dir == KV_DIR_PULL ? "" : " + 1",
            p->dir == KV_DIR_PULL ? "the predecessor's" : "its",
            p->dir == KV_DIR_PULL ? "the predecessor" : "it");
    else if (p->kind == KV_PH_BC && p->algo == KV_ALGO_RING)
        out(g, ";\n//    chain: rank 0 copies x_0 into its y, then W-1 steps: at step k position "
               "k receives\n//    y from position k - 1 (x_0 from rank 0); a grid barrier "
               "between steps (not pipelined)");
    else if (p->kind == KV_PH_BC && p->algo == KV_ALGO_TREE)
        out(g, ";\n//    binary tree from rank 0: rank 0 copies x_0 into its y, then one step "
               "per level: position v\n//    receives y from its parent (v - 1) / 2 (x_0 from "
               "rank 0); a grid barrier between levels\n//    (not pipelined)");
    if (is_stepped(p))
        out(g, ";\n//    ring positions in %s order: rank r is position v = %s",
            p->order == KV_ORDER_REV ? "rev" : "ring", p->order == KV_ORDER_REV ? "-r mod W" : "r");
    else if (p->kind != KV_PH_QUANT && p->kind != KV_PH_LOCAL && p->xport != KV_XP_CE)
        out(g, ";\n//    peers in %s order", order_words[p->order]);
    out(g, ";\n//    ends with %s.\n", sync_words[p->sync]);
}

static void emit_header(gen *g, const char *text)
{
    const kv_schedule *s = g->s;
    const char *tr, *fu;
    cell_of(g, &tr, &fu);
    out(g,
        "// %s.cu — generated by kevo from a schedule (mutate/schedule_gen.c, docs/schedules.md"
        "):\n// change the schedule and generate again rather than editing this file.\n//\n",
        coll_names[s->coll]);
    out(g, "// kevo:schedule %s\n", text);
    out(g, "// kevo:pattern problem=%s transport=%s fusion=%s\n//\n", coll_names[s->coll], tr, fu);
    out(g,
        "// What one call does, rank r of W, %d threads per CTA, at most %d CTAs per SM, the "
        "same grid on\n// every rank:\n",
        s->threads, s->ctas);
    for (int i = 0; i < g->n; i++)
        emit_phase_words(g, i);
    out(g, "//\n// Kernels, in order on ctx->stream (%s):\n",
        s->launch == KV_LAUNCH_FUSED ? "launch=fused" : "launch=split");
    int j = 0;
    for (int k = 0; k <= g->n_kernels; k++) {
        const int until = k < g->n_kernels ? g->kernels[k].first : g->n_items;
        for (; j < until; j++)
            if (g->items[j].type == IT_CE)
                out(g, "//  copies of phase %d: cudaMemcpyAsync\n", g->items[j].phase + 1);
        if (k == g->n_kernels)
            break;
        const kernel_info *kn = &g->kernels[k];
        out(g, "//  kernel_%d (epoch channel %d)%s:", k, k, kn->alone ? ", 1 CTA" : "");
        for (; j <= kn->last; j++) {
            const item *it = &g->items[j];
            if (it->type == IT_BAR) {
                const bar_info *b = &g->bars[it->bar];
                out(g, " %s%s;",
                    kn->alone             ? "the barrier"
                    : b->kind == BK_GRID  ? "grid barrier"
                    : b->kind == BK_CHUNK ? "per-chunk flags (a grid barrier if they do not fit "
                                            "the pad)"
                                          : "CTA barrier",
                    b->pos == 0      ? " (start)"
                    : b->pos == g->n ? " (end)"
                                     : "");
                if (b->skip_ll)
                    out(g, " [skipped while phase %d runs LL]", b->skip_ll);
            } else if (it->type == IT_SUM) {
                out(g, " sum of phase %d;", it->phase + 1);
            } else {
                out(g, " phase %d;", it->phase + 1);
            }
        }
        out(g, "\n");
    }
    for (int b = 0; b < g->n_bars; b++)
        if (g->bars[b].upgraded == 2)
            out(g,
                "// The %s barrier%s runs as a grid barrier: a ring or tree phase next to it "
                "forwards data\n// between CTAs' ranges.\n",
                g->bars[b].pos == 0      ? "start"
                : g->bars[b].pos == g->n ? "end"
                                         : "between-phase",
                g->bars[b].pos > 0 && g->bars[b].pos < g->n ? "" : " (sync=cta or chunk)");
        else if (g->bars[b].upgraded)
            out(g,
                "// sync=cta after phase %d runs as a grid barrier: phase %d partitions its "
                "data differently\n// (another unit, chunk or block), so CTA b would read "
                "what other CTAs wrote.\n",
                g->bars[b].pos, g->bars[b].pos + 1);
    out(g, "//\n// Rules kept: x is read-only on every rank; every output element is written by "
           "every call; a\n// peer's output is written only after the start barrier (the peer "
           "is in this call) and nobody\n// reads this rank's x or y after the end barrier. "
           "Flags hold epochs taken on the device\n// (kevo_epoch_begin / kevo_epoch_end, one "
           "channel per kernel), never reset; every wait is\n// bounded and traps; LL buffers are "
           "double-buffered by the epoch's parity. A CUDA graph replay\n// is as correct as a "
           "call from the host.\n");
    out(g,
        "//\n// Run-time fallbacks (the same decision on every rank): an ll phase above "
        "ll_max = %u bytes\n// per rank, or when the scratch cannot hold its buffers, runs "
        "simple; a push reduction whose\n// receive slots do not fit the scratch runs pull; "
        "order=xor at a W that is not a power of 2\n// runs ring. Template instances: W = 2, "
        "4, 8.\n",
        s->ll_max);
    if (g->any_step)
        out(g, "// A ring or tree phase with order=xor runs ring (a ring needs a cycle); a ring "
               "reduce-scatter\n// whose two receive slots do not fit the scratch runs a direct "
               "pull.\n");
}

/* ---- Args and the per-phase movement functions --------------------------------------------- */

/* Two-shot parts and scatter slices: allreduce's rs and ag, broadcast's scatter and ag. */
static int uses_parts(const gen *g)
{
    for (int i = 0; i < g->n; i++) {
        const kv_sched_kind k = ph(g, i)->kind;
        if (k == KV_PH_SCATTER || (g->s->coll == KV_SC_ALLREDUCE && k != KV_PH_AR) ||
            (g->s->coll == KV_SC_BROADCAST && k == KV_PH_AG))
            return 1;
    }
    return 0;
}

static void emit_prelude(gen *g)
{
    const kv_schedule *s = g->s;
    out(g, "#define THREADS %d\n#define CTAS_PER_SM %d\n#define LL_MAX %uull\n\n", s->threads,
        s->ctas, s->ll_max);
    out(g,
        "#include \"kevo/kernel.h\"\n#include \"kevo_host.cuh\"\n#include \"kevo_sched.cuh\"\n"
        "%s\n#include <cuda_bf16.h>\n#include <limits.h>\n#include <stdint.h>\n#include <stdio.h>\n"
        "#include <stdlib.h>\n%s\nnamespace {\n\n",
        g->any_ce ? "#include \"kevo_side.cuh\"\n" : "",
        g->any_nvls ? "\n#include <nccl_device.h> // ncclGetLsaMultimemPointer\n" : "");
    out(g, "constexpr const char *kWho = \"%s/generated\";\n", coll_names[s->coll]);
    out(g, "constexpr int kPhases = %d;\nconstexpr int kBars = %d;\n\n", g->n, g->n_bars);
    out(g,
        "struct Args {\n"
        "    const uint8_t *x[KEVO_MAX_RANKS]; // every rank's x\n"
        "    uint8_t *y[KEVO_MAX_RANKS];       // every rank's first output (y, or q)\n"
        "    uint8_t *s[KEVO_MAX_RANKS];       // every rank's second output (fp8 scales)\n"
        "    uint8_t *recv[KEVO_MAX_RANKS];    // every rank's receive slots (push reductions)\n"
        "    int64_t n;                        // N\n"
        "    int64_t total;                    // bytes of x\n"
        "    int64_t part;                     // bytes of a part (two-shot, scatter): 16-byte "
        "multiples\n"
        "    int64_t blk;                      // bytes of a block of x (C = N / W elements)\n"
        "    int64_t nb;                       // fp8 blocks of 128 elements per shard\n"
        "    int64_t slot;                     // bytes of a receive slot\n"
        "    int ll[kPhases];                  // the phase runs LL at this size\n"
        "    int pull[kPhases];                // the push reduction runs pull at this size\n"
        "    kevo_ll_bufs llb[kPhases];        // LL receive buffers, a row per source rank\n"
        "    int64_t row_words[kPhases];       // LL words of a row\n"
        "    uint64_t bar[kBars];              // first pad word of each barrier\n"
        "    uint64_t cbase[kBars];            // sync=chunk: first pad word of the flags\n"
        "    int64_t cnch[kBars];              // sync=chunk: chunks of a part\n"
        "    int cflag[kBars];                 // sync=chunk: the flags fit the pad\n"
        "    kevo_pads pads;                   // the launch's epoch channel\n"
        "%s"
        "};\n\n",
        g->any_nvls ? "    ncclWindow_t win;                 // nvls: the NCCL window of x, y, s\n"
                      "    ncclDevComm dc;                   // nvls: the device communicator\n"
                      "    int64_t xoff, yoff, soff;         // nvls: window offsets of x, y, s\n"
                      "    int mc;                           // nvls: multicast usable this call\n"
                    : "");
    if (g->any_nvls)
        out(g, "// nvls: the multicast address of window offset off (every rank's copy at once).\n"
               "__device__ __forceinline__ uint8_t *mc_of(const Args &a, int64_t off)\n{\n"
               "    return (uint8_t *)ncclGetLsaMultimemPointer(a.win, (size_t)off, a.dc);\n}\n\n");
    if (g->any_step)
        out(g, "// Ring and tree phases: rank of ring position v (position of rank v: the map is "
               "its own inverse);\n// ring: v, rev: -v, xor runs ring (a ring needs a cycle).\n"
               "__host__ __device__ __forceinline__ int ring_rank(int order, int v, int W)\n{\n"
               "    v = ((v %% W) + W) %% W;\n"
               "    return order == KEVO_SCHED_REV ? (W - v) %% W : v;\n}\n\n");
    if (!uses_parts(g))
        return;
    out(g, "// Elements [lo, lo + bytes) of part q (two-shot parts, scatter slices): 16-byte "
           "aligned starts.\n"
           "__host__ __device__ __forceinline__ int64_t part_lo(const Args &a, int q)\n"
           "{\n    const int64_t lo = (int64_t)q * a.part;\n    return lo < a.total ? lo : "
           "a.total;\n}\n\n"
           "__host__ __device__ __forceinline__ int64_t part_bytes(const Args &a, int q)\n"
           "{\n    const int64_t hi = (int64_t)(q + 1) * a.part;\n    return (hi < a.total ? hi : "
           "a.total) - part_lo(a, q);\n}\n\n");
}

/* The segments (dst on `to`, src on `from`) that phase i moves from rank `from` to rank `to`. */
static void emit_xfer(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const kv_sched_coll c = g->s->coll;
    out(g,
        "// Phase %d (%s): what moves from rank `from` to rank `to` (0 segments: nothing).\n"
        "__host__ __device__ __forceinline__ int xfer_%d(const Args &a, int from, int to, "
        "uint8_t *(&dst)[2], const uint8_t *(&src)[2], int64_t (&bytes)[2])\n{\n",
        i + 1, kind_names[p->kind], i + 1);
    const char *skip_own = "    if (from == to)\n        return 0; // already in place\n";
    switch (p->kind) {
    case KV_PH_LOCAL:
        out(g, "    if (from != to)\n        return 0;\n");
        /* fall through */
    case KV_PH_AG:
    case KV_PH_A2A:
        if (p->kind != KV_PH_LOCAL && g->has_local)
            out(g, "    if (from == to)\n        return 0; // the local phase copies it\n");
        if (c == KV_SC_ALLGATHER) {
            out(g, "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)from * a.total;\n"
                   "    src[0] = kevo_sched_pick(a.x, from);\n    bytes[0] = a.total;\n"
                   "    return 1;\n");
        } else if (c == KV_SC_ALLTOALL) {
            out(g, "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)from * a.blk;\n"
                   "    src[0] = kevo_sched_pick(a.x, from) + (int64_t)to * a.blk;\n"
                   "    bytes[0] = a.blk;\n    return 1;\n");
        } else if (c == KV_SC_FP8_ALLGATHER && p->fuse == KV_FUSE_QUANT) {
            out(g, "    // quantised on the way: src is the bf16 shard, dst q's and scales' "
                   "slices\n"
                   "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)from * a.n;\n"
                   "    dst[1] = kevo_sched_pick(a.s, to) + (int64_t)from * a.nb * 4;\n"
                   "    src[0] = kevo_sched_pick(a.x, from);\n    src[1] = nullptr;\n"
                   "    bytes[0] = a.total;\n    bytes[1] = a.nb * 4;\n    return 2;\n");
        } else if (c == KV_SC_FP8_ALLGATHER) {
            out(g,
                "%s    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)from * a.n;\n"
                "    src[0] = kevo_sched_pick(a.y, from) + (int64_t)from * a.n;\n"
                "    bytes[0] = a.n;\n"
                "    dst[1] = kevo_sched_pick(a.s, to) + (int64_t)from * a.nb * 4;\n"
                "    src[1] = kevo_sched_pick(a.s, from) + (int64_t)from * a.nb * 4;\n"
                "    bytes[1] = a.nb * 4;\n    return 2;\n",
                skip_own);
        } else { /* allreduce, broadcast: the parts after rs / scatter */
            out(g,
                "%s    const int64_t lo = part_lo(a, from);\n"
                "    dst[0] = kevo_sched_pick(a.y, to) + lo;\n"
                "    src[0] = kevo_sched_pick(a.y, from) + lo;\n"
                "    bytes[0] = part_bytes(a, from);\n    return 1;\n",
                skip_own);
        }
        break;
    case KV_PH_BC:
        out(g, "    if (from != 0)\n        return 0; // rank 0 is the root\n"
               "    dst[0] = kevo_sched_pick(a.y, to);\n    src[0] = a.x[0];\n"
               "    bytes[0] = a.total;\n    return 1;\n");
        break;
    case KV_PH_SCATTER:
        out(g, "    if (from != 0)\n        return 0; // slices of rank 0's x\n"
               "    const int64_t lo = part_lo(a, to);\n"
               "    dst[0] = kevo_sched_pick(a.y, to) + lo;\n    src[0] = a.x[0] + lo;\n"
               "    bytes[0] = part_bytes(a, to);\n    return 1;\n");
        break;
    case KV_PH_QUANT:
        out(g, "    if (from != to)\n        return 0;\n"
               "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)from * a.n;\n"
               "    dst[1] = kevo_sched_pick(a.s, to) + (int64_t)from * a.nb * 4;\n"
               "    src[0] = kevo_sched_pick(a.x, from);\n    src[1] = nullptr;\n"
               "    bytes[0] = a.total;\n    bytes[1] = a.nb * 4;\n    return 2;\n");
        break;
    default: break;
    }
    out(g, "}\n\n");
}

/* A ring ag: where shard o lies in a rank's outputs once it has arrived (steps 2 .. W-1
 * forward it from there). */
static void emit_fwd(gen *g, int i)
{
    const kv_sched_coll c = g->s->coll;
    out(g,
        "// Phase %d (ag, ring): shard o as it lies in rank `from`'s outputs, to the same place "
        "in rank `to`'s.\n"
        "__host__ __device__ __forceinline__ int fwd_%d(const Args &a, int o, int from, int to, "
        "uint8_t *(&dst)[2], const uint8_t *(&src)[2], int64_t (&bytes)[2])\n{\n",
        i + 1, i + 1);
    if (c == KV_SC_ALLGATHER)
        out(g, "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)o * a.total;\n"
               "    src[0] = kevo_sched_pick(a.y, from) + (int64_t)o * a.total;\n"
               "    bytes[0] = a.total;\n    return 1;\n");
    else if (c == KV_SC_FP8_ALLGATHER)
        out(g, "    dst[0] = kevo_sched_pick(a.y, to) + (int64_t)o * a.n;\n"
               "    src[0] = kevo_sched_pick(a.y, from) + (int64_t)o * a.n;\n"
               "    bytes[0] = a.n;\n"
               "    dst[1] = kevo_sched_pick(a.s, to) + (int64_t)o * a.nb * 4;\n"
               "    src[1] = kevo_sched_pick(a.s, from) + (int64_t)o * a.nb * 4;\n"
               "    bytes[1] = a.nb * 4;\n    return 2;\n");
    else
        out(g, "    const int64_t lo = part_lo(a, o);\n"
               "    dst[0] = kevo_sched_pick(a.y, to) + lo;\n"
               "    src[0] = kevo_sched_pick(a.y, from) + lo;\n"
               "    bytes[0] = part_bytes(a, o);\n    return 1;\n");
    out(g, "}\n\n");
}

/* For a reduction phase: the bytes of x reduced onto rank q and where the sum goes. */
static void emit_red(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const kv_sched_coll c = g->s->coll;
    const char *lo, *bytes, *dst;
    if (p->kind == KV_PH_AR) {
        lo = "0";
        bytes = "a.total";
        dst = "0";
    } else if (c == KV_SC_ALLREDUCE) {
        lo = "part_lo(a, q)";
        bytes = "part_bytes(a, q)";
        dst = "part_lo(a, q)";
    } else {
        lo = "(int64_t)q * a.blk";
        bytes = "a.blk";
        dst = "0";
    }
    out(g,
        "// Phase %d (%s): the bytes of x summed onto rank q, and their place in q's y.\n"
        "__host__ __device__ __forceinline__ int64_t red_lo_%d(const Args &a, int q)\n"
        "{\n    (void)a, (void)q;\n    return %s;\n}\n\n"
        "__host__ __device__ __forceinline__ int64_t red_bytes_%d(const Args &a, int q)\n"
        "{\n    (void)a, (void)q;\n    return %s;\n}\n\n"
        "__host__ __device__ __forceinline__ int64_t red_dst_%d(const Args &a, int q)\n"
        "{\n    (void)a, (void)q;\n    return %s;\n}\n\n",
        i + 1, kind_names[p->kind], i + 1, lo, i + 1, bytes, i + 1, dst);
}

/* ---- phase bodies ---------------------------------------------------------------------------- */

static int mid_bar(const gen *g, int phase)
{
    for (int b = 0; b < g->n_bars; b++)
        if (g->bars[b].pos < 0 && g->bars[b].phase == phase && b != g->ack)
            return b;
    return -1;
}

static void emit_barrier_call(gen *g, int b, const char *indent)
{
    if (g->bars[b].kind == BK_GRID)
        out(g, "%skevo_sched_grid_barrier(p, a.bar[%d]);\n", indent, b);
    else
        out(g, "%skevo_cta_barrier(p, 0, a.bar[%d]);\n", indent, b);
}

/* The per-chunk flags phase i waits for (the barrier before it is BK_CHUNK: it reads part
 * `from`) or raises (the one after it: it writes part `to`), as a trailing argument of the
 * primitive, or "" when neither. */
static const char *hook_of(const gen *g, int i, const char *from, const char *to, char *buf,
                           size_t cap)
{
    buf[0] = 0;
    for (int b = 0; b < g->n_bars; b++) {
        const bar_info *bi = &g->bars[b];
        if (bi->kind != BK_CHUNK)
            continue;
        if (bi->pos == i)
            snprintf(buf, cap, ", kevo_sched_flags{p, a.cbase[%d], a.cnch[%d], %s, a.cflag[%d], 0}",
                     b, b, from, b);
        else if (bi->pos == i + 1)
            snprintf(buf, cap, ", kevo_sched_flags{p, a.cbase[%d], a.cnch[%d], %s, 0, a.cflag[%d]}",
                     b, b, to, b);
    }
    return buf;
}

/* The copy of phase i's segments for one (from, to) pair, by the phase's transport. */
static void emit_copy_segs(gen *g, int i, const char *from, const char *to, const char *indent)
{
    const kv_sched_phase *p = ph(g, i);
    out(g,
        "%s{\n%s    uint8_t *d[2];\n%s    const uint8_t *s[2];\n%s    int64_t n[2];\n"
        "%s    const int m = xfer_%d(a, %s, %s, d, s, n);\n",
        indent, indent, indent, indent, indent, i + 1, from, to);
    if (p->fuse == KV_FUSE_QUANT || p->kind == KV_PH_QUANT) {
        out(g,
            "%s    if (m == 2) // quantised as it is stored\n"
            "%s        kevo_sched_quant<%d>(reinterpret_cast<const __nv_bfloat16 *>(s[0]), "
            "a.n, d[0], reinterpret_cast<float *>(d[1]), %uu);\n",
            indent, indent, width_of(p->xport), p->chunk);
    } else if (p->xport == KV_XP_TMA) {
        out(g,
            "%s    for (int j = 0; j < m; j++)\n"
            "%s        kevo_sched_tma_copy(t%d, d[j], s[j], n[j]);\n",
            indent, indent, i + 1);
    } else {
        char h[160];
        out(g,
            "%s    for (int j = 0; j < m; j++)\n"
            "%s        kevo_sched_copy<%d, %d>(d[j], s[j], n[j], %uu%s);\n",
            indent, indent, width_of(p->xport), p->inflight, p->chunk,
            hook_of(g, i, from, to, h, sizeof h));
    }
    out(g, "%s}\n", indent);
}

/* Steps k = 0 .. W-1 in the phase's peer order (k = 0: this rank). */
static void emit_peer_loop_open(gen *g, int i, int first_k, const char *indent)
{
    out(g,
        "%s#pragma unroll 1\n%sfor (int k = %d; k < W; k++) {\n"
        "%s    const int q = kevo_sched_peer(%s, r, k, W);\n",
        indent, indent, first_k, indent, order_macros[ph(g, i)->order]);
}

/* Steps k = 1 .. W-1 in the phase's peer order, then this rank (k = W, taken as 0): a sender
 * puts its remote stores on the link before its local copy, which only delays them. */
static void emit_peer_loop_open_own_last(gen *g, int i, const char *indent)
{
    out(g,
        "%s#pragma unroll 1\n%sfor (int k = 1; k <= W; k++) { // this rank last\n"
        "%s    const int q = kevo_sched_peer(%s, r, k %% W, W);\n",
        indent, indent, indent, order_macros[ph(g, i)->order]);
}

static void emit_body_copy_simple(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    if (p->dir == KV_DIR_PULL || p->kind == KV_PH_LOCAL || p->kind == KV_PH_QUANT) {
        emit_peer_loop_open(g, i, 0, "    ");
        emit_copy_segs(g, i, "q", "r", "        ");
    } else {
        emit_peer_loop_open_own_last(g, i, "    ");
        emit_copy_segs(g, i, "r", "q", "        ");
    }
    out(g, "    }\n");
}

/* LL: senders store words into row r of every destination's buffer; receivers poll row s of
 * their own buffer for every source s, and write where a plain push would have. */
static void emit_body_copy_ll(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const int U = p->inflight;
    char h[160];
    hook_of(g, i, "r", "q", h, sizeof h);
    if (!is_ll128(p))
        out(g, "    const uint32_t e32 = (uint32_t)p.epoch;\n");
    if (p->kind == KV_PH_BC) { /* the root receives nothing: peers acknowledge (kevo_ll.cuh) */
        out(g,
            "    const uint64_t ack = a.bar[%d]; // [cta][rank] acknowledgements on rank 0\n"
            "    if (r == 0) {\n"
            "        if (p.epoch > 2 && threadIdx.x > 0 && threadIdx.x < (unsigned)W)\n"
            "            kevo_wait_flag(p.mine + ack + (uint64_t)blockIdx.x * W + "
            "threadIdx.x, p.epoch - 2);\n"
            "        __syncthreads(); // every peer is done with launch e - 2's buffer\n"
            "    }\n",
            g->ack);
    }
    out(g, "    // send: rank r's segments into row r of each destination's buffer\n");
    emit_peer_loop_open_own_last(g, i, "    ");
    out(g,
        "        uint8_t *d[2];\n        const uint8_t *s[2];\n        int64_t n[2];\n"
        "        const int m = xfer_%d(a, r, q, d, s, n);\n"
        "        if (q == r) { // the own segment: a local copy\n"
        "            for (int k2 = 0; k2 < m; k2++)\n"
        "                kevo_sched_copy<%d, %d>(d[k2], s[k2], n[k2], %uu);\n"
        "            continue;\n        }\n"
        "        uint64_t *row = kevo_ll_send(a.llb[%d], p.epoch, q, r);\n"
        "        for (int k2 = 0; k2 < m; k2++) {\n",
        i + 1, width_of(p->xport), U, p->chunk, i);
    if (is_ll128(p))
        out(g, "            kevo_sched_ll128_send(row, s[k2], n[k2], p.epoch);\n"
               "            row += kevo_sched_ll128_lines(n[k2]) * 16;\n        }\n    }\n");
    else
        out(g,
            "            kevo_sched_ll_send<%d>(row, s[k2], n[k2], e32, %uu%s);\n"
            "            row += kevo_sched_ll_words(n[k2]);\n        }\n    }\n",
            U, p->chunk, h);
    out(g, "    // receive: row s of this rank's buffer, for every source s\n");
    out(g, "    const uint64_t *recv = kevo_ll_recv(a.llb[%d], p.epoch);\n", i);
    emit_peer_loop_open(g, i, 1, "    ");
    out(g,
        "        uint8_t *d[2];\n        const uint8_t *s[2];\n        int64_t n[2];\n"
        "        const int m = xfer_%d(a, q, r, d, s, n);\n"
        "        const uint64_t *row = recv + (int64_t)q * a.row_words[%d];\n"
        "        for (int k2 = 0; k2 < m; k2++) {\n",
        i + 1, i);
    if (is_ll128(p))
        out(g, "            kevo_sched_ll128_recv(d[k2], row, n[k2], p.epoch);\n"
               "            row += kevo_sched_ll128_lines(n[k2]) * 16;\n        }\n    }\n");
    else
        out(g,
            "            kevo_sched_ll_recv<%d>(d[k2], row, n[k2], e32, %uu);\n"
            "            row += kevo_sched_ll_words(n[k2]);\n        }\n    }\n",
            U, p->chunk);
    if (p->kind == KV_PH_BC)
        out(g, "    if (r != 0) {\n"
               "        __syncthreads(); // the CTA is done with this parity's buffer\n"
               "        if (threadIdx.x == 0)\n"
               "            kevo_store_release_sys(p.peer[0] + ack + (uint64_t)blockIdx.x * W + "
               "r, p.epoch);\n    }\n");
}

/* ---- ring and tree phases ---- */

static void emit_sum_call(gen *g, int i, int push, int V, int U, unsigned chunk, int tma);

static int steps_bar(const gen *g, int phase)
{
    for (int b = 0; b < g->n_bars; b++)
        if (g->bars[b].kind == BK_STEPS && g->bars[b].phase == phase)
            return b;
    return -1;
}

/* Grid barrier `slot` (0 .. W-2) between two steps of phase i. */
static void emit_step_barrier(gen *g, int i, const char *slot, const char *indent)
{
    const int tma = ph(g, i)->xport == KV_XP_TMA;
    out(g, "%s{\n", indent);
    if (tma)
        out(g, "%s    kevo_sched_tma_release();\n", indent);
    out(g,
        "%s    kevo_sched_grid_barrier(p, a.bar[%d] + (uint64_t)(%s) * "
        "kevo_sched_grid_barrier_words(W)); // the step before is done on every rank\n",
        indent, steps_bar(g, i), slot);
    if (tma)
        out(g, "%s    kevo_sched_tma_acquire();\n", indent);
    out(g, "%s}\n", indent);
}

/* dst[0, n) = src[0, n) by the phase's transport (bytes as they are: no quantisation). */
static void emit_plain_copy(gen *g, int i, const char *d, const char *s, const char *n,
                            const char *indent)
{
    const kv_sched_phase *p = ph(g, i);
    if (p->xport == KV_XP_TMA)
        out(g, "%skevo_sched_tma_copy(t%d, %s, %s, %s);\n", indent, i + 1, d, s, n);
    else
        out(g, "%skevo_sched_copy<%d, %d>(%s, %s, %s, %uu);\n", indent, width_of(p->xport),
            p->inflight, d, s, n, p->chunk);
}

/* dst[0][0, n) = src[0] + src[1] in fp32, rounded once to bf16. */
static void emit_sum2(gen *g, int i, const char *n, const char *indent)
{
    const kv_sched_phase *p = ph(g, i);
    if (p->xport == KV_XP_TMA)
        out(g, "%skevo_sched_tma_sum<2>(t%d, dst[0], src, %s);\n", indent, i + 1, n);
    else
        out(g, "%skevo_sched_sum<2, 1, %d, %d>(dst, src, %s, %uu);\n", indent, width_of(p->xport),
            p->inflight, n, p->chunk);
}

static void emit_ring_ids(gen *g, int i)
{
    const char *o = order_macros[ph(g, i)->order];
    out(g,
        "    const int vr = ring_rank(%s, r, W); // this rank's ring position\n"
        "    const int nx = ring_rank(%s, vr + 1, W), pv = ring_rank(%s, vr - 1, W);\n"
        "    (void)nx, (void)pv;\n",
        o, o, o);
}

/* Ring all-gather: the own shard in place (k = 0), then W-1 steps: at step k rank r receives
 * shard (vr - k) from its predecessor (pull) or sends shard (vr - k + 1) to its successor
 * (push); step 1 moves the owner's shard as a direct phase would (from x, or the quantised q),
 * steps 2 .. W-1 forward what arrived at the step before, a grid barrier between steps. */
static void emit_body_ring_ag(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const char *ord = order_macros[p->order];
    const int pull = p->dir == KV_DIR_PULL;
    emit_ring_ids(g, i);
    out(g, "    // the own shard (nothing when it is in place already)\n");
    emit_copy_segs(g, i, "r", "r", "    ");
    out(g, "#pragma unroll 1\n    for (int k = 1; k < W; k++) {\n        if (k > 1)\n");
    emit_step_barrier(g, i, "k - 2", "        ");
    out(g, "        if (k == 1) { // the owner's shard, as a direct phase moves it\n");
    if (pull)
        emit_copy_segs(g, i, "pv", "r", "            ");
    else
        emit_copy_segs(g, i, "r", "nx", "            ");
    out(g, "            continue;\n        }\n");
    out(g,
        "        // forward shard o, which arrived at step k - 1\n"
        "        const int o = ring_rank(%s, vr - k%s, W);\n"
        "        uint8_t *d[2];\n        const uint8_t *s[2];\n        int64_t n[2];\n"
        "        const int m = fwd_%d(a, o, %s, d, s, n);\n"
        "        for (int j = 0; j < m; j++)\n",
        ord, pull ? "" : " + 1", i + 1, pull ? "pv, r" : "r, nx");
    emit_plain_copy(g, i, "d[j]", "s[j]", "n[j]", "            ");
    out(g, "    }\n");
}

/* Ring reduce-scatter: W-1 steps of running partials in two receive slots per rank (flipped
 * by step parity, bf16 like the data). pull: at step k rank r sums its predecessor's partial
 * of part (vr - k - 1) (its x at step 1) with its own x into its own slot, or into y at the
 * last step. push: at step k rank r sums the partial it received (none at step 1) with its
 * own x of part (vr - k) into its successor's slot; a last local step sums its own part into
 * y. No room for the slots: a direct pull (the same decision on every rank). */
static void emit_body_ring_rs(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const char *ord = order_macros[p->order];
    const int V = width_of(p->xport), U = p->inflight, tma = p->xport == KV_XP_TMA;
    const int I = i + 1;
    char npt[64], nr[64], sx[96];
    snprintf(npt, sizeof npt, "red_bytes_%d(a, pt)", I);
    snprintf(nr, sizeof nr, "red_bytes_%d(a, r)", I);
    snprintf(sx, sizeof sx, "kevo_sched_pick(a.x, r) + red_lo_%d(a, pt)", I);
    emit_ring_ids(g, i);
    out(g,
        "    if (a.pull[%d]) {\n        // no room for the ring's slots: a direct pull, sum "
        "in rank order\n",
        i);
    emit_sum_call(g, i, 0, V, U, p->chunk, tma);
    out(g, "    } else { // the ring\n");
    out(g, "#pragma unroll 1\n    for (int k = 1; k < W; k++) {\n        if (k > 1)\n");
    emit_step_barrier(g, i, "k - 2", "        ");
    if (p->dir == KV_DIR_PULL) {
        out(g,
            "        const int pt = ring_rank(%s, vr - k - 1, W); // the part summed here\n"
            "        const uint8_t *src[2] = {k == 1 ? kevo_sched_pick(a.x, pv) + red_lo_%d(a, "
            "pt) : kevo_sched_pick(a.recv, pv) + (int64_t)((k - 1) & 1) * a.slot,\n"
            "                                 %s};\n"
            "        uint8_t *const dst[1] = {k == W - 1 ? kevo_sched_pick(a.y, r) + "
            "red_dst_%d(a, r) : kevo_sched_pick(a.recv, r) + (int64_t)(k & 1) * a.slot};\n",
            ord, I, sx, I);
        emit_sum2(g, i, npt, "        ");
        out(g, "    }\n    }\n");
    } else {
        out(g,
            "        const int pt = ring_rank(%s, vr - k, W); // the part sent on\n"
            "        uint8_t *const to = kevo_sched_pick(a.recv, nx) + (int64_t)(k & 1) * "
            "a.slot;\n        if (k == 1) {\n",
            ord);
        emit_plain_copy(g, i, "to", sx, npt, "            ");
        out(g,
            "            continue;\n        }\n"
            "        const uint8_t *src[2] = {kevo_sched_pick(a.recv, r) + (int64_t)((k - 1) & "
            "1) * a.slot, %s};\n        uint8_t *const dst[1] = {to};\n",
            sx);
        emit_sum2(g, i, npt, "        ");
        out(g, "    }\n    // the last step: this rank's own part, the partial of every other "
               "rank plus its own x\n");
        emit_step_barrier(g, i, "W - 2", "    ");
        out(g,
            "    {\n        const uint8_t *src[2] = {kevo_sched_pick(a.recv, r) + (int64_t)((W "
            "- 1) & 1) * a.slot, kevo_sched_pick(a.x, r) + red_lo_%d(a, r)};\n"
            "        uint8_t *const dst[1] = {kevo_sched_pick(a.y, r) + red_dst_%d(a, r)};\n",
            I, I);
        emit_sum2(g, i, nr, "        ");
        out(g, "    }\n    }\n");
    }
}

/* Broadcast as a chain (ring: position k receives from position k - 1 at step k) or a binary
 * tree (position v's parent is (v - 1) / 2; level l receives at step l), a grid barrier
 * between steps. Rank 0 (position 0) copies x_0 into its own y first. */
static void emit_body_bc_stepped(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const char *ord = order_macros[p->order];
    const int pull = p->dir == KV_DIR_PULL;
    emit_ring_ids(g, i);
    out(g, "    if (r == 0) // the root's own copy\n");
    emit_plain_copy(g, i, "kevo_sched_pick(a.y, r)", "a.x[0]", "a.total", "        ");
    if (p->algo == KV_ALGO_RING) {
        out(g, "#pragma unroll 1\n    for (int k = 1; k < W; k++) { // step k: position k - 1 "
               "to position k\n        if (k > 1)\n");
        emit_step_barrier(g, i, "k - 2", "        ");
        if (pull)
            out(g, "        if (vr == k) {\n            const int f = pv;\n");
        else
            out(g, "        if (vr == k - 1) {\n            const int f = r, dst_rank = nx;\n");
    } else {
        out(g, "    const int depth = 31 - __clz(W); // the level of position W - 1\n"
               "    const int lv = 31 - __clz(vr + 1); // this position's level\n"
               "#pragma unroll 1\n    for (int l = 1; l <= depth; l++) { // step l: level l - 1 "
               "to level l\n        if (l > 1)\n");
        emit_step_barrier(g, i, "l - 2", "        ");
        if (pull)
            out(g,
                "        if (vr > 0 && lv == l) {\n"
                "            const int f = ring_rank(%s, (vr - 1) / 2, W); // the parent\n",
                ord);
        else
            out(g,
                "        for (int c = 2 * vr + 1; lv == l - 1 && c <= 2 * vr + 2 && c < W; c++) "
                "{\n            const int f = r, dst_rank = ring_rank(%s, c, W); // a child\n",
                ord);
    }
    out(g, "            const uint8_t *src = f == 0 ? a.x[0] : kevo_sched_pick(a.y, f);\n");
    emit_plain_copy(g, i, pull ? "kevo_sched_pick(a.y, r)" : "kevo_sched_pick(a.y, dst_rank)",
                    "src", "a.total", "            ");
    out(g, "        }\n    }\n");
}

/* Sum of this rank's reduced bytes from W sources (the ranks' x, or receive slots). */
static void emit_sum_call(gen *g, int i, int push, int V, int U, unsigned chunk, int tma)
{
    char h[160];
    hook_of(g, i, "r", "r", h, sizeof h);
    out(g, "        const uint8_t *src[W];\n"
           "#pragma unroll\n        for (int s = 0; s < W; s++)\n");
    if (push)
        out(g,
            "            src[s] = s == r ? a.x[s] + red_lo_%d(a, r) : "
            "kevo_sched_pick(a.recv, r) + (int64_t)s * a.slot;\n",
            i + 1);
    else
        out(g, "            src[s] = a.x[s] + red_lo_%d(a, r);\n", i + 1);
    out(g, "        uint8_t *const dst[1] = {kevo_sched_pick(a.y, r) + red_dst_%d(a, r)};\n",
        i + 1);
    if (tma)
        out(g, "        kevo_sched_tma_sum<W>(t%d, dst[0], src, red_bytes_%d(a, r));\n", i + 1,
            i + 1);
    else
        out(g, "        kevo_sched_sum<W, 1, %d, %d>(dst, src, red_bytes_%d(a, r), %uu%s);\n", V, U,
            i + 1, chunk, h);
}

static void emit_body_red(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const int V = width_of(p->xport), U = p->inflight, tma = p->xport == KV_XP_TMA;
    char h[160];
    hook_of(g, i, "r", "r", h, sizeof h);
    if (is_ll128(p)) {
        out(g,
            "    if (a.ll[%d]) {\n"
            "        // send: x[part q] of this rank into row r of rank q's buffer, as LL128 "
            "lines\n",
            i);
        emit_peer_loop_open(g, i, 1, "        ");
        out(g,
            "            kevo_sched_ll128_send(kevo_ll_send(a.llb[%d], p.epoch, q, r), "
            "kevo_sched_pick(a.x, r) + red_lo_%d(a, q), red_bytes_%d(a, q), p.epoch);\n"
            "        }\n",
            i, i + 1, i + 1);
        out(g,
            "        // receive and sum in rank order (own bytes from x)\n"
            "        kevo_sched_ll128_recv_sum<W>(kevo_sched_pick(a.y, r) + red_dst_%d(a, r), "
            "kevo_sched_pick(a.x, r) + red_lo_%d(a, r), kevo_ll_recv(a.llb[%d], p.epoch), "
            "a.row_words[%d], r, red_bytes_%d(a, r), p.epoch);\n    } else {\n",
            i + 1, i + 1, i, i, i + 1);
    } else if (is_ll(p)) {
        out(g,
            "    if (a.ll[%d]) {\n        const uint32_t e32 = (uint32_t)p.epoch;\n"
            "        // send: x[part q] of this rank into row r of rank q's buffer\n",
            i);
        emit_peer_loop_open(g, i, 1, "        ");
        out(g,
            "            kevo_sched_ll_send<%d>(kevo_ll_send(a.llb[%d], p.epoch, q, r), "
            "kevo_sched_pick(a.x, r) + red_lo_%d(a, q), "
            "red_bytes_%d(a, q), e32, %uu);\n        }\n",
            U, i, i + 1, i + 1, p->chunk);
        out(g,
            "        // receive and sum in rank order (own words from x)\n"
            "        kevo_sched_ll_recv_sum<W, %d>(kevo_sched_pick(a.y, r) + red_dst_%d(a, r), "
            "kevo_sched_pick(a.x, r) + red_lo_%d(a, r), kevo_ll_recv(a.llb[%d], p.epoch), "
            "a.row_words[%d], r, red_bytes_%d(a, r), e32, %uu%s);\n    } else {\n",
            U, i + 1, i + 1, i, i, i + 1, p->chunk, h);
    }
    if (p->dir == KV_DIR_PUSH) {
        out(g,
            "    if (!a.pull[%d]) {\n"
            "        // send: x[part q] of this rank into slot r of rank q's receive slots\n",
            i);
        emit_peer_loop_open(g, i, 1, "        ");
        out(g,
            "            uint8_t *d = kevo_sched_pick(a.recv, q) + (int64_t)r * a.slot;\n"
            "            const uint8_t *s = kevo_sched_pick(a.x, r) + red_lo_%d(a, q);\n",
            i + 1);
        if (tma)
            out(g, "            kevo_sched_tma_copy(t%d, d, s, red_bytes_%d(a, q));\n", i + 1,
                i + 1);
        else
            out(g, "            kevo_sched_copy<%d, %d>(d, s, red_bytes_%d(a, q), %uu);\n", V, U,
                i + 1, p->chunk);
        out(g, "        }\n");
        if (tma)
            out(g, "        kevo_sched_tma_release();\n");
        emit_barrier_call(g, mid_bar(g, i), "        ");
        if (tma)
            out(g, "        kevo_sched_tma_acquire();\n");
        out(g, "        // sum: own part from x, the peers' from the receive slots\n");
        emit_sum_call(g, i, 1, V, U, p->chunk, tma);
        out(g, "    } else {\n");
    } else {
        out(g, "    {\n");
    }
    out(g, "        // pull: load this rank's part from every rank's x, sum in rank order\n");
    emit_sum_call(g, i, 0, V, U, p->chunk, tma);
    out(g, "    }\n");
    if (is_ll(p))
        out(g, "    }\n");
}

/* The SM sum after a ce push reduction's copies (or, at run time, a pull sum). */
static void emit_body_sum(gen *g, int i)
{
    out(g, "    if (!a.pull[%d]) {\n", i);
    emit_sum_call(g, i, 1, 16, 8, 0, 0);
    out(g, "    } else {\n");
    emit_sum_call(g, i, 0, 16, 8, 0, 0);
    out(g, "    }\n");
}

static void emit_body_nvls(gen *g, int i);

static void emit_body(gen *g, int i, int sum_only)
{
    const kv_sched_phase *p = ph(g, i);
    const int tma = p->xport == KV_XP_TMA;
    out(g,
        "// Phase %d (%s)%s.\ntemplate <int W>\n__device__ __forceinline__ void %s_%d(const "
        "Args &a, const kevo_pads &p%s)\n{\n    const int r = p.rank;\n",
        i + 1, kind_names[p->kind], sum_only ? ": the sum after the copy engine's copies" : "",
        sum_only ? "sum" : "phase", i + 1, tma ? ", const kevo_sched_tma &t" : "");
    if (tma)
        out(g,
            "    const kevo_sched_tma &t%d = t;\n    kevo_sched_tma_acquire(); // after the "
            "barrier's acquire\n",
            i + 1);
    if (sum_only)
        emit_body_sum(g, i);
    else if (p->xport == KV_XP_NVLS)
        emit_body_nvls(g, i);
    else if (is_ring_red(p))
        emit_body_ring_rs(g, i);
    else if (p->kind == KV_PH_AG && is_stepped(p))
        emit_body_ring_ag(g, i);
    else if (p->kind == KV_PH_BC && is_stepped(p))
        emit_body_bc_stepped(g, i);
    else if (is_red(p->kind))
        emit_body_red(g, i);
    else if (is_ll(p)) {
        out(g, "    if (a.ll[%d]) {\n", i);
        emit_body_copy_ll(g, i);
        out(g, "    } else {\n");
        emit_body_copy_simple(g, i);
        out(g, "    }\n");
    } else
        emit_body_copy_simple(g, i);
    if (tma)
        out(g, "    kevo_sched_tma_release(); // before the next barrier publishes it\n");
    out(g, "}\n\n");
}

/* nvls (multimem): ar / rs: this rank's bytes summed by the switch from every rank's x
 * (ld_reduce through x's multicast address) into its own y; ag: this rank's segments stored
 * into every rank's outputs at once (multimem.st). Offsets not 16-byte aligned (the validation
 * size) or no multicast this call: the SM path, units of 16 (the same partition). */
static void emit_body_nvls(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const int U = p->inflight;
    if (is_red(p->kind)) {
        out(g,
            "    const int64_t lo = red_lo_%d(a, r), nb = red_bytes_%d(a, r), at = "
            "red_dst_%d(a, r);\n"
            "    if (a.mc && ((a.xoff + lo) | nb | (a.yoff + at)) %% 16 == 0) {\n"
            "        // the switch sums x[lo ..] of every rank (fp32, rounded once)\n"
            "        kevo_sched_nvls_sum<%d>(kevo_sched_pick(a.y, r) + at, 0, mc_of(a, a.xoff + "
            "lo), nb, %uu);\n"
            "    } else {\n"
            "        // SM: load this rank's part from every rank's x, sum in rank order\n",
            i + 1, i + 1, i + 1, U, p->chunk);
        emit_sum_call(g, i, 0, 16, U, p->chunk, 0);
        out(g, "    }\n");
        return;
    }
    out(g,
        "    // the segments this rank sends: their places are the same on every rank (peer q)\n"
        "    const int q0 = r + 1 < W ? r + 1 : 0;\n"
        "    uint8_t *md[2];\n    const uint8_t *ms[2];\n    int64_t mn[2], off[2] = {0, 0};\n"
        "    const int m = xfer_%d(a, r, q0, md, ms, mn);\n"
        "    int ok = a.mc;\n"
        "    for (int j = 0; j < m; j++) {\n"
        "        off[j] = j == 0 ? a.yoff + (md[0] - kevo_sched_pick(a.y, q0))\n"
        "                        : a.soff + (md[1] - kevo_sched_pick(a.s, q0));\n"
        "        ok &= ((off[j] | mn[j] | (int64_t)(uintptr_t)ms[j]) %% 16) == 0;\n"
        "    }\n"
        "    if (ok) {\n"
        "        for (int j = 0; j < m; j++)\n"
        "            kevo_sched_nvls_store<%d>(mc_of(a, off[j]), ms[j], mn[j], %uu);\n"
        "    } else {\n",
        i + 1, U, p->chunk);
    emit_body_copy_simple(g, i); /* width_of(nvls): 16 */
    out(g, "    }\n");
}

/* ---- kernels --------------------------------------------------------------------------------- */

static unsigned kernel_smem(const gen *g, int k)
{
    unsigned most = 0;
    for (int j = g->kernels[k].first; j <= g->kernels[k].last; j++)
        if (g->items[j].type == IT_BODY && ph(g, g->items[j].phase)->xport == KV_XP_TMA) {
            const kv_sched_phase *p = ph(g, g->items[j].phase);
            const unsigned b = p->chunk * (unsigned)p->inflight;
            most = b > most ? b : most;
        }
    return most;
}

static int kernel_stages(const gen *g, int k)
{
    int most = 0;
    for (int j = g->kernels[k].first; j <= g->kernels[k].last; j++)
        if (g->items[j].type == IT_BODY && ph(g, g->items[j].phase)->xport == KV_XP_TMA)
            most = ph(g, g->items[j].phase)->inflight > most ? ph(g, g->items[j].phase)->inflight
                                                             : most;
    return most;
}

static void emit_kernel(gen *g, int k)
{
    const kernel_info *kn = &g->kernels[k];
    if (kn->alone)
        return; /* the shared barrier kernel */
    out(g,
        "template <int W>\n__global__ void __launch_bounds__(THREADS) kernel_%d(const "
        "__grid_constant__ Args a)\n{\n    const kevo_pads p = kevo_epoch_begin(a.pads);\n",
        k);
    if (kn->tma) {
        out(g,
            "    extern __shared__ __align__(128) uint8_t smem[];\n"
            "    __shared__ uint64_t bars[%d];\n    __shared__ uint32_t parity;\n"
            "    kevo_sched_tma_init(kevo_sched_tma{smem, bars, &parity, 0, %d});\n"
            "    __syncthreads(); // the mbarriers are initialised\n",
            kernel_stages(g, k), kernel_stages(g, k));
    }
    for (int j = kn->first; j <= kn->last; j++) {
        const item *it = &g->items[j];
        if (it->type == IT_BAR) {
            const bar_info *b = &g->bars[it->bar];
            const char *what = b->pos == 0      ? "start: every rank has entered this call"
                               : b->pos == g->n ? "end: nobody reads this rank's x or y any more"
                               : b->pos < 0     ? "the copy engine's copies of every rank are done"
                                                : "the previous phase is done on every rank";
            if (b->kind == BK_CHUNK) {
                out(g, "    if (!a.cflag[%d]) // the flags did not fit the pad: a grid barrier\n",
                    it->bar);
                out(g, "        kevo_sched_grid_barrier(p, a.bar[%d]);\n", it->bar);
                out(g,
                    "    // ^ else per-chunk flags: phase %d raises flag [part][c] of chunk c on "
                    "every rank, phase %d waits\n    //   for the flags of the chunks it reads\n",
                    b->pos, b->pos + 1);
                continue;
            } else if (b->skip_ll) {
                out(g, "    if (!a.ll[%d]) // an LL phase needs no barrier here\n", b->skip_ll - 1);
                emit_barrier_call(g, it->bar, "        ");
            } else {
                emit_barrier_call(g, it->bar, "    ");
            }
            out(g, "    // ^ %s\n", what);
        } else {
            const kv_sched_phase *p = ph(g, it->phase);
            if (it->type == IT_BODY && p->xport == KV_XP_TMA)
                out(g, "    phase_%d<W>(a, p, kevo_sched_tma{smem, bars, &parity, %u, %d});\n",
                    it->phase + 1, p->chunk, p->inflight);
            else
                out(g, "    %s_%d<W>(a, p);\n", it->type == IT_SUM ? "sum" : "phase",
                    it->phase + 1);
        }
    }
    out(g, "    kevo_epoch_end(p);\n}\n\n");
    out(g,
        "typedef void (*kernel_%d_fn)(Args);\n\nkernel_%d_fn kernel_%d_for(int W)\n{\n"
        "    switch (W) {\n    case 2: return kernel_%d<2>;\n    case 4: return "
        "kernel_%d<4>;\n    case 8: return kernel_%d<8>;\n    default: return NULL;\n    }\n}\n\n",
        k, k, k, k, k, k);
}

static void emit_kernels(gen *g)
{
    if (g->any_alone)
        out(g, "// A 1-CTA kernel: a CTA barrier with every rank (as strong as a grid barrier: "
               "the work before\n// it on the stream is complete when it runs).\n"
               "__global__ void __launch_bounds__(32) barrier_kernel(const __grid_constant__ Args "
               "a, int b)\n{\n    const kevo_pads p = kevo_epoch_begin(a.pads);\n"
               "    kevo_cta_barrier(p, 0, a.bar[b]);\n    kevo_epoch_end(p);\n}\n\n");
    for (int k = 0; k < g->n_kernels; k++)
        emit_kernel(g, k);
}

/* ---- host ------------------------------------------------------------------------------------ */

static void emit_state(gen *g)
{
    out(g,
        "struct State {\n    Args base;          // sizes, fallbacks, buffers, pad layout\n"
        "    int grid;           // CTAs of every multi-CTA kernel, the same on every rank\n"
        "    int world;\n%s};\n\n",
        g->any_ce
            ? "    kevo_side side[KEVO_MAX_RANKS]; // copy-engine phases: the stream of step k "
              "(k = 0: this rank's own copy)\n"
            : "");
    if (!g->any_ll)
        return;
    /* LL rows: words of the largest segment list one rank sends another */
    out(g, "// LL words of a row of phase i: the most one rank sends another.\n"
           "int64_t row_words_of(const Args &a, int i, int W)\n{\n    int64_t most = 0;\n"
           "    for (int f = 0; f < W; f++)\n        for (int t = 0; t < W; t++) {\n"
           "            int64_t n[2] = {};\n            int m = 0, l128 = 0;\n"
           "            switch (i) {\n");
    for (int i = 0; i < g->n; i++) {
        if (!is_ll(ph(g, i)))
            continue;
        const int l128 = is_ll128(ph(g, i));
        if (is_red(ph(g, i)->kind))
            out(g, "            case %d: m = 1, l128 = %d, n[0] = red_bytes_%d(a, t); break;\n", i,
                l128, i + 1);
        else
            out(g,
                "            case %d: {\n                uint8_t *d[2];\n"
                "                const uint8_t *s[2];\n"
                "                m = xfer_%d(a, f, t, d, s, n);\n                l128 = %d;\n"
                "                break;\n            }\n",
                i, i + 1, l128);
    }
    out(g, "            default: break;\n            }\n            int64_t w = 0;\n"
           "            for (int k = 0; k < m; k++) // LL words, or LL128 lines of 16 words\n"
           "                w += l128 ? kevo_sched_ll128_lines(n[k]) * 16 : "
           "kevo_sched_ll_words(n[k]);\n            most = w > most ? w : most;\n        }\n    "
           "return most;\n}\n\n");
}

/* kevo_init: sizes, buffers (the same sizes in the same order on every rank), occupancy,
 * grid and the pad's layout. */
static void emit_init(gen *g)
{
    const kv_schedule *s = g->s;
    out(g,
        "} // namespace\n\nextern \"C\" int kevo_init(kevo_ctx *ctx)\n{\n"
        "    const int W = ctx->world;\n    const int64_t n = kevo_param(ctx, \"N\", 0);\n"
        "    if (W != 2 && W != 4 && W != 8)\n"
        "        return kevo_fail(kWho, \"world %%d: generated for W = 2, 4, 8\", W);\n"
        "    if (n < 1 || ctx->n_inputs < 1 || ctx->n_outputs < %d)\n"
        "        return kevo_fail(kWho, \"bad context (N %%lld)\", (long long)n);\n"
        "    State *st = kevo_state_new<State>(ctx, kWho);\n    if (!st)\n        return 1;\n"
        "    st->world = W;\n    Args &a = st->base;\n    a.n = n;\n    a.total = 2 * n;\n"
        "    a.part = ((a.total + 15) / 16 + W - 1) / W * 16;\n    a.blk = a.total / W;\n"
        "    a.nb = (n + 127) / 128;\n",
        s->coll == KV_SC_FP8_ALLGATHER ? 2 : 1);
    if (g->any_ce)
        out(g,
            "    for (int k = 0; k < W; k++) { // copy-engine phases: a stream per step\n"
            "        const cudaError_t e = kevo_side_create(&st->side[k]);\n"
            "        if (e != cudaSuccess)\n"
            "            return kevo_fail(kWho, \"a side stream: %%s\", cudaGetErrorString(e));\n"
            "    }\n");
    for (int i = 0; i < g->n; i++) {
        if (!is_ll(ph(g, i)))
            continue;
        out(g,
            "    { // phase %d: LL buffers when x is at most ll_max bytes and they fit\n"
            "        a.row_words[%d] = row_words_of(a, %d, W);\n"
            "        const int ll = kevo_ll_alloc(ctx, kWho, a.total, (int64_t)LL_MAX, W, "
            "a.row_words[%d], &a.llb[%d]);\n        if (ll < 0)\n            return 1;\n"
            "        a.ll[%d] = ll;\n    }\n",
            i + 1, i, i, i, i, i);
    }
    if (g->any_recv) {
        out(g, "    { // receive slots of the push reductions (the simple path of an ll one; a "
               "ring's two)\n        int64_t most = 0;\n        for (int q = 0; q < W; q++) {\n");
        for (int i = 0; i < g->n; i++)
            if (needs_slots(ph(g, i)))
                out(g,
                    "            most = red_bytes_%d(a, q) > most ? red_bytes_%d(a, q) : most;\n",
                    i + 1, i + 1);
        out(g, "        }\n        a.slot = (most + 15) / 16 * 16;\n        int need = 0, "
               "slots = 0;\n");
        for (int i = 0; i < g->n; i++)
            if (needs_slots(ph(g, i)))
                out(g, "        need |= !a.ll[%d];\n        slots = %s\n", i,
                    is_ring_red(ph(g, i)) ? "2; // the running partial, flipped by step parity"
                                          : "W;");
        out(g, "        const size_t bytes = (size_t)slots * (size_t)a.slot;\n"
               "        void *peers[KEVO_MAX_RANKS] = {};\n"
               "        const int fits = need && bytes <= ctx->scratch_bytes_left;\n"
               "        if (fits && ctx->scratch_alloc(ctx, bytes, (void **)&a.recv[0], peers, "
               "NULL) != 0)\n"
               "            return kevo_fail(kWho, \"scratch_alloc(%%zu) failed\", bytes);\n"
               "        for (int q = 0; q < W; q++)\n"
               "            a.recv[q] = fits ? (uint8_t *)peers[q] : NULL;\n");
        for (int i = 0; i < g->n; i++)
            if (needs_slots(ph(g, i)))
                out(g, "        a.pull[%d] = !fits; // no room: the phase pulls%s\n", i,
                    is_ring_red(ph(g, i)) ? " (direct)" : "");
        out(g, "    }\n");
    }
    /* occupancy of every multi-CTA kernel */
    out(g, "    int per_sm = CTAS_PER_SM;\n");
    for (int k = 0; k < g->n_kernels; k++) {
        if (g->kernels[k].alone)
            continue;
        const unsigned smem = kernel_smem(g, k);
        out(g, "    {\n        int nk = 0;\n");
        if (smem > 0)
            out(g,
                "        const cudaError_t e = cudaFuncSetAttribute(kernel_%d_for(W), "
                "cudaFuncAttributeMaxDynamicSharedMemorySize, %u);\n"
                "        if (e != cudaSuccess)\n"
                "            return kevo_fail(kWho, \"kernel_%d: %u bytes of shared memory: "
                "%%s\", cudaGetErrorString(e));\n",
                k, smem, k, smem);
        out(g,
            "        if (kevo_ctas_per_sm(kWho, (const void *)kernel_%d_for(W), THREADS, %u, "
            "CTAS_PER_SM, &nk) != 0)\n            return 1;\n"
            "        per_sm = nk < per_sm ? nk : per_sm;\n    }\n",
            k, smem);
    }
    /* the pad: words of the barriers, then the grid that fits */
    out(g, "    // The pad: CTA barriers and acknowledgements of multi-CTA kernels take G x W "
           "words, grid\n    // barriers 1 + W, the 1-CTA kernels' barriers W.\n"
           "    const kevo_pads pads = kevo_pads_of(ctx);\n    uint64_t fixed = 0, per_cta = 0;\n");
    for (int b = 0; b < g->n_bars; b++) {
        const bar_info *bi = &g->bars[b];
        if (bi->alone)
            out(g, "    fixed += (uint64_t)W; // barrier %d\n", b);
        else if (bi->kind == BK_STEPS)
            out(g,
                "    fixed += (uint64_t)(W - 1) * kevo_sched_grid_barrier_words(W); // barrier "
                "%d: steps of phase %d\n",
                b, bi->phase + 1);
        else if (bi->kind == BK_GRID || bi->kind == BK_CHUNK)
            out(g, "    fixed += kevo_sched_grid_barrier_words(W); // barrier %d\n", b);
        else
            out(g, "    per_cta += (uint64_t)W; // barrier %d\n", b);
    }
    out(g,
        "    if (pads.words <= fixed)\n        return kevo_fail(kWho, \"the signal pad is too "
        "small\");\n"
        "    int64_t most = (int64_t)per_sm * ctx->sm_count;\n"
        "    if (per_cta > 0 && (int64_t)((pads.words - fixed) / per_cta) < most)\n"
        "        most = (int64_t)((pads.words - fixed) / per_cta);\n"
        "    if (most < 1)\n        return kevo_fail(kWho, \"no grid fits the signal pad\");\n"
        "    // One 16-byte vector of x per thread; a phase running LL wants a thread per word of\n"
        "    // its longest row (LL128: per 8 lanes a line), so that small calls spread their\n"
        "    // stores over as many SMs as it takes.\n"
        "    int64_t want = (a.total + 16 * THREADS - 1) / (16 * THREADS);\n");
    for (int i = 0; i < g->n; i++)
        if (is_ll(ph(g, i)))
            out(g,
                "    if (a.ll[%d] && (a.row_words[%d]%s + THREADS - 1) / THREADS > want)\n"
                "        want = (a.row_words[%d]%s + THREADS - 1) / THREADS;\n",
                i, i, is_ll128(ph(g, i)) ? " / 2" : "", i, is_ll128(ph(g, i)) ? " / 2" : "");
    out(g, "    st->grid = (int)kevo_clamp_grid(want, most);\n"
           "    uint64_t at = 0;\n"
           "    for (int b = 0; b < kBars; b++) {\n        a.bar[b] = at;\n        switch (b) {\n");
    for (int b = 0; b < g->n_bars; b++) {
        const bar_info *bi = &g->bars[b];
        if (bi->alone)
            out(g, "        case %d: at += (uint64_t)W; break;\n", b);
        else if (bi->kind == BK_STEPS)
            out(g,
                "        case %d: at += (uint64_t)(W - 1) * kevo_sched_grid_barrier_words(W); "
                "break;\n",
                b);
        else if (bi->kind == BK_GRID || bi->kind == BK_CHUNK)
            out(g, "        case %d: at += kevo_sched_grid_barrier_words(W); break;\n", b);
        else
            out(g, "        case %d: at += (uint64_t)st->grid * W; break;\n", b);
    }
    out(g, "        default: break;\n        }\n    }\n");
    for (int b = 0; b < g->n_bars; b++) {
        const bar_info *bi = &g->bars[b];
        if (bi->kind != BK_CHUNK)
            continue;
        out(g,
            "    { // barrier %d: W x (chunks of a part) flags after the barriers, when they fit "
            "the pad\n        // (the same decision on every rank); otherwise its grid "
            "barrier runs\n"
            "        a.cnch[%d] = (a.part + %uLL - 1) / %uLL;\n"
            "        const uint64_t words = (uint64_t)W * (uint64_t)a.cnch[%d];\n"
            "        a.cflag[%d] = at + words <= pads.words;\n"
            "        a.cbase[%d] = at;\n        if (a.cflag[%d])\n            at += words;\n"
            "    }\n",
            b, b, ph(g, bi->pos - 1)->chunk, ph(g, bi->pos - 1)->chunk, b, b, b, b);
    }
    out(g, "    (void)at;\n    return 0;\n}\n\n");
}

static void emit_ce(gen *g, int i)
{
    const kv_sched_phase *p = ph(g, i);
    const int k0 = is_red(p->kind) ? 1 : 0; /* a push reduction copies nothing to itself */
    out(g,
        "    { // phase %d: the copy engine, step k's copies on stream k (at once), %d piece%s "
        "per peer\n",
        i + 1, p->inflight, p->inflight > 1 ? "s" : "");
    if (is_red(p->kind))
        out(g, "        const int on = !a.pull[%d]; // else the sum kernel pulls\n", i);
    else
        out(g, "        const int on = 1;\n");
    out(g,
        "        for (int k = %d; k < W && on; k++)\n"
        "            if (const cudaError_t e = kevo_side_fork(st->side[k], ctx->stream))\n"
        "                return kevo_fail(kWho, \"fork: %%s\", cudaGetErrorString(e));\n",
        k0);
    if (is_red(p->kind)) {
        out(g,
            "        for (int c = 0; c < %d && !a.pull[%d]; c++)\n"
            "            for (int k = 1; k < W; k++) {\n"
            "                const int q = kevo_sched_peer(%s, r, k, W);\n"
            "                uint8_t *d = a.recv[q] + (int64_t)r * a.slot;\n"
            "                const uint8_t *s = a.x[r] + red_lo_%d(a, q);\n"
            "                const int64_t n = red_bytes_%d(a, q);\n",
            p->inflight, i, order_macros[p->order], i + 1, i + 1);
    } else {
        out(g,
            "        for (int c = 0; c < %d; c++)\n            for (int k = 0; k < W; k++) {\n"
            "                const int q = kevo_sched_peer(%s, r, k, W);\n"
            "                uint8_t *dd[2];\n                const uint8_t *ss[2];\n"
            "                int64_t nn[2];\n"
            "                const int m = xfer_%d(a, %s, dd, ss, nn);\n"
            "                for (int j = 0; j < m; j++) {\n"
            "                uint8_t *d = dd[j];\n                const uint8_t *s = ss[j];\n"
            "                const int64_t n = nn[j];\n",
            p->inflight, order_macros[p->order], i + 1,
            p->dir == KV_DIR_PULL || p->kind == KV_PH_LOCAL ? "q, r" : "r, q");
    }
    out(g,
        "                const int64_t lo = n * c / %d / 16 * 16;\n"
        "                const int64_t hi = c + 1 == %d ? n : n * (c + 1) / %d / 16 * 16;\n"
        "                if (hi <= lo)\n                    continue;\n"
        "                const cudaError_t e = cudaMemcpyAsync(d + lo, s + lo, (size_t)(hi - lo), "
        "cudaMemcpyDeviceToDevice, st->side[k].stream);\n"
        "                if (e != cudaSuccess)\n"
        "                    return kevo_fail(kWho, \"cudaMemcpyAsync: %%s\", "
        "cudaGetErrorString(e));\n",
        p->inflight, p->inflight, p->inflight);
    if (!is_red(p->kind))
        out(g, "                }\n");
    out(g,
        "            }\n"
        "        for (int k = %d; k < W && on; k++)\n"
        "            if (const cudaError_t e = kevo_side_join(st->side[k], ctx->stream))\n"
        "                return kevo_fail(kWho, \"join: %%s\", cudaGetErrorString(e));\n"
        "    }\n",
        k0);
}

static void emit_run(gen *g)
{
    const kv_schedule *s = g->s;
    out(g,
        "extern \"C\" int kevo_run(kevo_ctx *ctx)\n{\n"
        "    const State *st = kevo_state_of<State>(ctx, kWho);\n    if (!st)\n        return 1;\n"
        "    const int W = ctx->world, r = ctx->rank;\n"
        "    if (W != st->world)\n        return kevo_fail(kWho, \"the world changed since "
        "kevo_init\");\n");
    if (s->coll == KV_SC_FP8_ALLGATHER)
        out(g,
            "    if (ctx->inputs[0].dtype != KEVO_BF16 || ctx->inputs[0].numel != st->base.n ||\n"
            "        ctx->outputs[0].numel != W * st->base.n || ctx->outputs[1].numel != W * "
            "st->base.nb)\n"
            "        return kevo_fail(kWho, \"expected bf16 x of N, q of W*N, scales of "
            "W*nb\");\n");
    else
        out(g, "    if (ctx->inputs[0].dtype != KEVO_BF16 || ctx->inputs[0].numel != st->base.n)\n"
               "        return kevo_fail(kWho, \"expected bf16 x of N elements\");\n");
    out(g,
        "    // Tensor pointers change between calls: read them from ctx every time.\n"
        "    Args a = st->base;\n    for (int q = 0; q < W; q++) {\n"
        "        a.x[q] = (const uint8_t *)ctx->inputs[0].peer[q];\n"
        "        a.y[q] = (uint8_t *)ctx->outputs[0].peer[q];\n%s    }\n",
        s->coll == KV_SC_FP8_ALLGATHER ? "        a.s[q] = (uint8_t *)ctx->outputs[1].peer[q];\n"
                                       : "");
    if (g->any_nvls)
        out(g,
            "    // nvls: the window, the device communicator and the tensors' offsets in the "
            "window\n"
            "    a.mc = ctx->devcomm != NULL && ctx->inputs[0].window_offset != SIZE_MAX &&\n"
            "           ctx->outputs[0].window_offset != SIZE_MAX%s;\n"
            "    if (a.mc) {\n        a.win = ctx->window;\n        a.dc = *ctx->devcomm;\n"
            "        a.xoff = (int64_t)ctx->inputs[0].window_offset;\n"
            "        a.yoff = (int64_t)ctx->outputs[0].window_offset;\n%s    }\n",
            s->coll == KV_SC_FP8_ALLGATHER ? " && ctx->outputs[1].window_offset != SIZE_MAX" : "",
            s->coll == KV_SC_FP8_ALLGATHER
                ? "        a.soff = (int64_t)ctx->outputs[1].window_offset;\n"
                : "");
    out(g, "    (void)r;\n");
    int j = 0;
    for (int k = 0; k <= g->n_kernels; k++) {
        const int until = k < g->n_kernels ? g->kernels[k].first : g->n_items;
        for (; j < until; j++)
            if (g->items[j].type == IT_CE)
                emit_ce(g, g->items[j].phase);
        if (k == g->n_kernels)
            break;
        const kernel_info *kn = &g->kernels[k];
        if (kn->alone) {
            out(g,
                "    a.pads = kevo_pads_of(ctx, %d);\n"
                "    barrier_kernel<<<1, 32, 0, ctx->stream>>>(a, %d);\n"
                "    if (kevo_launched(kWho, \"barrier kernel %d\") != 0)\n        return 1;\n",
                k, g->items[kn->first].bar, k);
        } else {
            out(g,
                "    a.pads = kevo_pads_of(ctx, %d);\n"
                "    kernel_%d_for(W)<<<(unsigned)st->grid, THREADS, %u, ctx->stream>>>(a);\n"
                "    if (kevo_launched(kWho, \"kernel_%d\") != 0)\n        return 1;\n",
                k, k, kernel_smem(g, k), k);
        }
        j = kn->last + 1;
    }
    out(g, "    return 0;\n}\n\nextern \"C\" void kevo_fini(kevo_ctx *ctx)\n{\n");
    if (g->any_ce)
        out(g, "    State *st = (State *)ctx->user;\n    for (int k = 0; st && k < KEVO_MAX_RANKS; "
               "k++)\n"
               "        kevo_side_destroy(&st->side[k]);\n");
    out(g, "    kevo_state_free(ctx);\n}\n");
}

/* ---- kv_sched_generate ----------------------------------------------------------------------- */

/* The canonical text on one line: sections joined by "; ". */
static int one_line(const kv_schedule *s, char *buf, size_t cap, kv_err *err)
{
    if (kv_sched_format(s, buf, cap) != 0)
        return kv_err_set(err, "schedule: the text does not fit %zu bytes", cap);
    char *w = buf;
    for (const char *r = buf; *r; r++) {
        if (*r == '\n') {
            while (w > buf && w[-1] == ' ')
                w--;
            if (w > buf && w[-1] != ';')
                *w++ = ';';
            *w++ = ' ';
            while (r[1] == ' ')
                r++;
            continue;
        }
        if (*r == ';') {
            *w++ = ';';
            *w++ = ' ';
            while (r[1] == ' ' || r[1] == '\n')
                r++;
            continue;
        }
        *w++ = *r;
    }
    while (w > buf && (w[-1] == ' ' || w[-1] == ';'))
        w--;
    *w = 0;
    return 0;
}

int kv_sched_generate(const kv_schedule *s, char **out_src, size_t *len, kv_err *err)
{
    *out_src = NULL;
    if (len)
        *len = 0;
    if (kv_sched_check(s, err) != 0)
        return -1;
    if (kv_sched_generatable(s, err) != 0)
        return -1;
    char text[KV_SCHED_TEXT_MAX * 2];
    if (one_line(s, text, sizeof text, err) != 0)
        return -1;
    kv_strbuf b = {0};
    gen g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.b = &b;
    plan(&g);
    if (g.n_kernels > MAX_KERNELS || g.n_kernels > 8)
        return kv_err_set(err, "schedule: %d kernels (epoch channels: at most 8)", g.n_kernels);
    emit_header(&g, text);
    emit_prelude(&g);
    for (int i = 0; i < g.n; i++) {
        if (is_red(ph(&g, i)->kind))
            emit_red(&g, i);
        else if (!(ph(&g, i)->kind == KV_PH_BC && is_stepped(ph(&g, i))))
            emit_xfer(&g, i); /* a stepped bc names its sources itself */
        if (ph(&g, i)->kind == KV_PH_AG && ph(&g, i)->algo == KV_ALGO_RING)
            emit_fwd(&g, i);
    }
    for (int j = 0; j < g.n_items; j++) {
        if (g.items[j].type == IT_BODY)
            emit_body(&g, g.items[j].phase, 0);
        else if (g.items[j].type == IT_SUM)
            emit_body(&g, g.items[j].phase, 1);
    }
    emit_kernels(&g);
    emit_state(&g);
    emit_init(&g);
    emit_run(&g);
    size_t n = b.len;
    char *src = kv_sb_take(&b);
    if (!src)
        return kv_err_set(err, "schedule: out of memory");
    *out_src = src;
    if (len)
        *len = n;
    return 0;
}
