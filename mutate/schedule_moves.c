/* schedule_moves.c — structural children of a schedule (schedule.h,
 * kv_sched_mutate; docs/schedules.md, "Moves").
 *
 * A move lists its options (phase x new value, or a new phase sequence),
 * makes each one's child, repairs the child where the change broke an
 * invariant, and keeps the options whose child is valid and differs from
 * the parent; one of those is drawn. The repair never touches the field the
 * move set, and changes as little as it can: the field an invariant ties to
 * the moved one, to the value it needs (xport=ce forces sync=grid, chunk=0,
 * proto=simple, ...), else, where the tied field may not move, the other
 * side back to a plain value (sm16, simple, direct, grid). An option whose
 * child cannot be repaired is dropped, so a move fails (1) only when none
 * of its options gives a valid, different child. */
#include "mutate/schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_OPTIONS 64
#define NOTE_MAX 192

typedef struct {
    kv_schedule s;
    char note[NOTE_MAX];
} option;

typedef struct {
    option o[MAX_OPTIONS];
    int n;
} options;

static const char *const move_names[KV_SMOVE_COUNT] = {"algo",  "dir",    "xport", "proto", "shape",
                                                       "chunk", "launch", "cross", "jump",  "any"};

const char *kv_sched_move_name(kv_sched_move m)
{
    return (int)m >= 0 && m < KV_SMOVE_COUNT ? move_names[m] : "unknown";
}

static int is_sm(kv_sched_xport x)
{
    return x == KV_XP_SM4 || x == KV_XP_SM8 || x == KV_XP_SM16;
}

/* ---- repair ----------------------------------------------------------------- */

/* The one field a move set, which the repair leaves alone: phase (-1: the
 * head) and field (-1: none, as after a change of shape). */
typedef struct {
    int phase;
    int field;
} lock;

static int is_free(lock l, int i, kv_sched_field f)
{
    return !(l.phase == i && l.field == (int)f);
}

static int algo_allowed(kv_sched_kind k, kv_sched_algo a)
{
    return a == KV_ALGO_DIRECT ||
           (a == KV_ALGO_RING && (k == KV_PH_RS || k == KV_PH_AG || k == KV_PH_BC)) ||
           (a == KV_ALGO_TREE && k == KV_PH_BC);
}

static int fp8_fused_ag(const kv_schedule *s, int i)
{
    if (s->coll != KV_SC_FP8_ALLGATHER || s->phase[i].kind != KV_PH_AG)
        return 0;
    for (int j = 0; j < s->n_phases; j++)
        if (s->phase[j].kind == KV_PH_QUANT)
            return 0;
    return 1;
}

/* Where "if X then Y must be y" breaks: Y to y when Y is free, else X to
 * its plain value when X is free. */
#define TIE(cond, yfree, yset, xfree, xset) \
    do {                                    \
        if (cond) {                         \
            if (yfree) {                    \
                yset;                       \
            } else if (xfree) {             \
                xset;                       \
            }                               \
        }                                   \
    } while (0)

static void repair_phase(kv_schedule *s, int i, lock l, int allow_nvls)
{
    kv_sched_phase *p = &s->phase[i];
    const kv_sched_kind k = p->kind;
    const int fx = is_free(l, i, KV_SF_XPORT), fp = is_free(l, i, KV_SF_PROTO);
    const int fa = is_free(l, i, KV_SF_ALGO), fd = is_free(l, i, KV_SF_DIR);
    const int fc = is_free(l, i, KV_SF_CHUNK), fi = is_free(l, i, KV_SF_INFLIGHT);
    const int fs = is_free(l, i, KV_SF_SYNC);

    /* 9: fusion is pinned by the sequence */
    p->fuse = fp8_fused_ag(s, i) ? KV_FUSE_QUANT : KV_FUSE_NONE;
    /* 2 */
    if (!algo_allowed(k, p->algo) && fa)
        p->algo = KV_ALGO_DIRECT;
    /* 3 */
    if (k == KV_PH_QUANT || k == KV_PH_LOCAL) {
        if (fd)
            p->dir = KV_DIR_PULL;
        if (!is_sm(p->xport) && fx)
            p->xport = KV_XP_SM16;
        if (fp)
            p->proto = KV_PROTO_SIMPLE;
    }
    /* 7 */
    if (p->xport == KV_XP_NVLS) {
        if ((!allow_nvls || (k != KV_PH_AR && k != KV_PH_RS && k != KV_PH_AG)) && fx)
            p->xport = KV_XP_SM16;
        TIE(p->xport == KV_XP_NVLS && p->proto != KV_PROTO_SIMPLE, fp, p->proto = KV_PROTO_SIMPLE,
            fx, p->xport = KV_XP_SM16);
        TIE(p->xport == KV_XP_NVLS && p->algo != KV_ALGO_DIRECT, fa, p->algo = KV_ALGO_DIRECT, fx,
            p->xport = KV_XP_SM16);
    }
    /* 9: the quantising gather is SM stores of simple data */
    if (p->fuse == KV_FUSE_QUANT) {
        if (!is_sm(p->xport) && fx)
            p->xport = KV_XP_SM16;
        if (p->proto != KV_PROTO_SIMPLE && fp)
            p->proto = KV_PROTO_SIMPLE;
    }
    /* 5 */
    if (p->xport == KV_XP_CE) {
        if (p->fuse != KV_FUSE_NONE && fx)
            p->xport = KV_XP_SM16;
        int rd = k == KV_PH_AR || k == KV_PH_RS;
        TIE(p->xport == KV_XP_CE && rd && p->dir != KV_DIR_PUSH, fd, p->dir = KV_DIR_PUSH, fx,
            p->xport = KV_XP_SM16);
        TIE(p->xport == KV_XP_CE && p->proto != KV_PROTO_SIMPLE, fp, p->proto = KV_PROTO_SIMPLE, fx,
            p->xport = KV_XP_SM16);
        TIE(p->xport == KV_XP_CE && p->algo != KV_ALGO_DIRECT, fa, p->algo = KV_ALGO_DIRECT, fx,
            p->xport = KV_XP_SM16);
        TIE(p->xport == KV_XP_CE && p->chunk != 0, fc, p->chunk = 0, fx, p->xport = KV_XP_SM16);
        TIE(p->xport == KV_XP_CE && p->sync != KV_SYNC_GRID, fs, p->sync = KV_SYNC_GRID, fx,
            p->xport = KV_XP_SM16);
    }
    /* 6 */
    if (p->xport == KV_XP_TMA) {
        TIE(p->proto != KV_PROTO_SIMPLE, fp, p->proto = KV_PROTO_SIMPLE, fx, p->xport = KV_XP_SM16);
        if (p->xport == KV_XP_TMA && (p->chunk < 4096 || p->chunk > 64u * 1024)) {
            if (fc)
                p->chunk = p->chunk == 0 ? 16u * 1024 : p->chunk < 4096 ? 4096 : 64u * 1024;
            else if (fx)
                p->xport = KV_XP_SM16;
        }
        if (p->xport == KV_XP_TMA && (uint64_t)p->chunk * (uint64_t)p->inflight > 192u * 1024) {
            if (fi) /* fewer stages */
                while (p->inflight > 1 && (uint64_t)p->chunk * (uint64_t)p->inflight > 192u * 1024)
                    p->inflight /= 2;
            else if (fc) /* a smaller tile */
                while (p->chunk > 4096 && (uint64_t)p->chunk * (uint64_t)p->inflight > 192u * 1024)
                    p->chunk /= 2;
            else if (fx)
                p->xport = KV_XP_SM16;
        }
    }
    /* 4 */
    if (p->proto != KV_PROTO_SIMPLE) {
        int kind_ok =
            k == KV_PH_AR || k == KV_PH_RS || k == KV_PH_AG || k == KV_PH_A2A || k == KV_PH_BC;
        if (!kind_ok && fp)
            p->proto = KV_PROTO_SIMPLE;
        TIE(p->proto != KV_PROTO_SIMPLE && p->dir != KV_DIR_PUSH, fd, p->dir = KV_DIR_PUSH, fp,
            p->proto = KV_PROTO_SIMPLE);
        TIE(p->proto != KV_PROTO_SIMPLE && !is_sm(p->xport), fx, p->xport = KV_XP_SM16, fp,
            p->proto = KV_PROTO_SIMPLE);
        TIE(p->proto != KV_PROTO_SIMPLE && p->algo != KV_ALGO_DIRECT, fa, p->algo = KV_ALGO_DIRECT,
            fp, p->proto = KV_PROTO_SIMPLE);
    }
    /* 8, within the phase */
    if (p->sync == KV_SYNC_CHUNK && p->chunk == 0) {
        if (fs)
            p->sync = KV_SYNC_GRID;
        else if (fc && p->xport != KV_XP_CE)
            p->chunk = 16u * 1024;
    }
}

/* Repairs s around the locked field; the caller checks the result. */
static void repair(kv_schedule *s, lock l, int allow_nvls)
{
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < s->n_phases; i++)
            repair_phase(s, i, l, allow_nvls);
    for (int i = 0; i + 1 < s->n_phases; i++) /* 8: the phase's sync back to grid */
        if (kv_sched_check_link(s, i, NULL) != 0 && is_free(l, i, KV_SF_SYNC))
            s->phase[i].sync = KV_SYNC_GRID;
    if (s->launch == KV_LAUNCH_SPLIT && s->n_phases < 2 && is_free(l, -1, KV_SF_LAUNCH))
        s->launch = KV_LAUNCH_FUSED;
}

/* ---- notes ------------------------------------------------------------------ */

/* Appends to the string note (cap bytes), truncating. */
static void addf(char *note, size_t cap, const char *fmt, ...) KV_PRINTF(3, 4);
static void addf(char *note, size_t cap, const char *fmt, ...)
{
    size_t l = strlen(note);
    if (l + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + l, cap - l, fmt, ap);
    va_end(ap);
}

/* Every field that differs between a and b (same phase sequence), the
 * locked one first: "rs: xport sm16->ce (+ rs: dir pull->push, rs: sync cta->grid)". */
static void diff_note(const kv_schedule *a, const kv_schedule *b, lock l, char *note, size_t cap)
{
    note[0] = '\0';
    int others = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = -1; i < a->n_phases; i++) {
            int lo = i < 0 ? 0 : KV_SF_FIRST_PHASE, hi = i < 0 ? KV_SF_FIRST_PHASE : KV_SF_COUNT;
            for (int f = lo; f < hi; f++) {
                int locked = l.phase == i && l.field == f;
                if (locked != (round == 0))
                    continue;
                int va = i < 0 ? kv_sched_head_get(a, (kv_sched_field)f)
                               : kv_sched_phase_get(&a->phase[i], (kv_sched_field)f);
                int vb = i < 0 ? kv_sched_head_get(b, (kv_sched_field)f)
                               : kv_sched_phase_get(&b->phase[i], (kv_sched_field)f);
                if (va == vb)
                    continue;
                char ta[24], tb[24];
                kv_sched_field_text((kv_sched_field)f, va, ta, sizeof ta);
                kv_sched_field_text((kv_sched_field)f, vb, tb, sizeof tb);
                const char *sep = round == 0 ? "" : others++ ? ", " : " (+ ";
                addf(note, cap, "%s%s: %s %s->%s", sep,
                     i < 0 ? "head" : kv_sched_kind_name(a->phase[i].kind),
                     kv_sched_field_name((kv_sched_field)f), ta, tb);
            }
        }
    }
    if (others)
        addf(note, cap, ")");
}

/* ---- options ---------------------------------------------------------------- */

/* Keeps child (after repairing it around l) when it is valid and differs
 * from the parent. note: NULL to write the field diff. */
static void offer(options *os, const kv_schedule *parent, kv_schedule *child, lock l,
                  int allow_nvls, const char *note)
{
    if (os->n == MAX_OPTIONS)
        return;
    repair(child, l, allow_nvls);
    if (!allow_nvls)
        for (int i = 0; i < child->n_phases; i++)
            if (child->phase[i].xport == KV_XP_NVLS && parent->phase[i].xport != KV_XP_NVLS)
                return;
    if (kv_sched_check(child, NULL) != 0 || kv_sched_equal(child, parent))
        return;
    option *o = &os->o[os->n++];
    o->s = *child;
    if (note)
        snprintf(o->note, sizeof o->note, "%s", note);
    else
        diff_note(parent, child, l, o->note, sizeof o->note);
}

/* Every other value of field f of every phase (window > 0: only the values
 * at most `window` steps from the current one, for the small steps of chunk
 * and launch). */
static void field_options(options *os, const kv_schedule *parent, kv_sched_field f, int window,
                          int allow_nvls)
{
    int head = f < KV_SF_FIRST_PHASE;
    for (int i = head ? -1 : 0; i < (head ? 0 : parent->n_phases); i++) {
        int cur = head ? kv_sched_head_get(parent, f) : kv_sched_phase_get(&parent->phase[i], f);
        for (int v = 0; v < kv_sched_field_n_values(f); v++) {
            if (v == cur || (window && cur >= 0 && (v < cur - window || v > cur + window)))
                continue;
            if (f == KV_SF_XPORT && v == KV_XP_NVLS && !allow_nvls)
                continue;
            kv_schedule c = *parent;
            if (head)
                kv_sched_head_set(&c, f, v);
            else
                kv_sched_phase_set(&c.phase[i], f, v);
            offer(os, parent, &c, (lock){i, (int)f}, allow_nvls, NULL);
        }
    }
}

static void seq_text(const kv_schedule *s, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_phases && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "",
                              kv_sched_kind_name(s->phase[i].kind));
}

/* parent with phases kinds[0..n-1], phase j taken from parent's phase
 * from[j] (its fields, the new kind), repaired. */
static void shape_option(options *os, const kv_schedule *parent, int n, const kv_sched_kind *kinds,
                         const int *from, int allow_nvls)
{
    kv_schedule c = *parent;
    c.n_phases = n;
    for (int j = 0; j < n; j++) {
        c.phase[j] = parent->phase[from[j]];
        c.phase[j].kind = kinds[j];
    }
    for (int j = n; j < KV_SCHED_MAX_PHASES; j++)
        memset(&c.phase[j], 0, sizeof c.phase[j]);
    char a[48], b[48], note[NOTE_MAX];
    seq_text(parent, a, sizeof a);
    seq_text(&c, b, sizeof b);
    snprintf(note, sizeof note, "phases %s->%s", a, b);
    offer(os, parent, &c, (lock){-2, -1}, allow_nvls, note);
}

/* The splits and merges of the doc's table: ar <-> rs ag, bc <-> scatter ag,
 * quant ag <-> ag fuse=quant, ag <-> local ag, a2a <-> local a2a. */
static void shape_options(options *os, const kv_schedule *p, int allow_nvls)
{
    kv_sched_kind kk[KV_SCHED_MAX_PHASES];
    int n = p->n_phases;
    kv_sched_kind first = p->phase[0].kind, last = p->phase[n - 1].kind;
    if (n == 1 && (first == KV_PH_AR || first == KV_PH_BC)) {
        kk[0] = first == KV_PH_AR ? KV_PH_RS : KV_PH_SCATTER;
        kk[1] = KV_PH_AG;
        shape_option(os, p, 2, kk, (const int[]){0, 0}, allow_nvls);
    } else if (n == 2 && (first == KV_PH_RS || first == KV_PH_SCATTER) && last == KV_PH_AG) {
        kk[0] = first == KV_PH_RS ? KV_PH_AR : KV_PH_BC;
        shape_option(os, p, 1, kk, (const int[]){0}, allow_nvls);
        shape_option(os, p, 1, kk, (const int[]){1}, allow_nvls);
    } else if (n == 1 && (first == KV_PH_AG || first == KV_PH_A2A)) {
        /* a local copy before (fp8: the quantisation) */
        kk[0] = p->coll == KV_SC_FP8_ALLGATHER ? KV_PH_QUANT : KV_PH_LOCAL;
        kk[1] = first;
        shape_option(os, p, 2, kk, (const int[]){0, 0}, allow_nvls);
    } else if (n == 2 && (first == KV_PH_LOCAL || first == KV_PH_QUANT)) {
        kk[0] = last;
        shape_option(os, p, 1, kk, (const int[]){1}, allow_nvls);
    }
}

/* Crossover: with the same phase sequence, the head and each phase from
 * one parent or the other (every mix that is valid as it stands); else the
 * head of one and the phases of the other. */
static void cross_options(options *os, const kv_schedule *a, const kv_schedule *b, int allow_nvls)
{
    int same = a->n_phases == b->n_phases;
    for (int i = 0; same && i < a->n_phases; i++)
        same = a->phase[i].kind == b->phase[i].kind;
    if (same) {
        int units = 1 + a->n_phases;
        for (unsigned mask = 1; mask < 1u << units; mask++) {
            kv_schedule c = *a;
            char note[NOTE_MAX] = "cross: from the other parent:";
            if (mask & 1u) {
                c.threads = b->threads;
                c.ctas = b->ctas;
                c.launch = b->launch;
                c.ll_max = b->ll_max;
                addf(note, sizeof note, " head");
            }
            for (int i = 0; i < a->n_phases; i++)
                if (mask & (1u << (i + 1))) {
                    c.phase[i] = b->phase[i];
                    addf(note, sizeof note, " %s", kv_sched_kind_name(a->phase[i].kind));
                }
            if (kv_sched_check(&c, NULL) == 0 && !kv_sched_equal(&c, a) && os->n < MAX_OPTIONS) {
                os->o[os->n].s = c;
                snprintf(os->o[os->n].note, NOTE_MAX, "%s", note);
                os->n++;
            }
        }
        return;
    }
    kv_schedule c = *b; /* the head of a, the phases of b */
    c.threads = a->threads;
    c.ctas = a->ctas;
    c.launch = a->launch;
    c.ll_max = a->ll_max;
    offer(os, a, &c, (lock){-2, -1}, allow_nvls, "cross: the phases of the other parent");
    c = *a; /* the head of b, the phases of a */
    c.threads = b->threads;
    c.ctas = b->ctas;
    c.launch = b->launch;
    c.ll_max = b->ll_max;
    offer(os, a, &c, (lock){-2, -1}, allow_nvls, "cross: the head of the other parent");
}

static void move_options(options *os, const kv_schedule *parent, const kv_schedule *other,
                         kv_sched_move m, int allow_nvls)
{
    os->n = 0;
    switch (m) {
    case KV_SMOVE_ALGO: field_options(os, parent, KV_SF_ALGO, 0, allow_nvls); break;
    case KV_SMOVE_DIR: field_options(os, parent, KV_SF_DIR, 0, allow_nvls); break;
    case KV_SMOVE_XPORT: field_options(os, parent, KV_SF_XPORT, 0, allow_nvls); break;
    case KV_SMOVE_PROTO: field_options(os, parent, KV_SF_PROTO, 0, allow_nvls); break;
    case KV_SMOVE_SHAPE: shape_options(os, parent, allow_nvls); break;
    case KV_SMOVE_CHUNK:
        field_options(os, parent, KV_SF_CHUNK, 1, allow_nvls);
        field_options(os, parent, KV_SF_INFLIGHT, 1, allow_nvls);
        field_options(os, parent, KV_SF_SYNC, 0, allow_nvls);
        break;
    case KV_SMOVE_LAUNCH:
        /* ll_max by up to x4: the sizes measured are 16x apart, so a x2 step
         * alone often changes nothing, and a neutral child is dropped */
        for (int f = 0; f < KV_SF_FIRST_PHASE; f++)
            field_options(os, parent, (kv_sched_field)f, f == KV_SF_LL_MAX ? 2 : 1, allow_nvls);
        break;
    case KV_SMOVE_CROSS:
        if (other && other->coll == parent->coll && kv_sched_check(other, NULL) == 0)
            cross_options(os, parent, other, allow_nvls);
        break;
    default: break;
    }
}

/* ---- the move --------------------------------------------------------------- */

static int jump(const kv_schedule *parent, int allow_nvls, kv_rng *rng, kv_schedule *out)
{
    for (int tries = 0; tries < 64; tries++) {
        kv_sched_random(parent->coll, allow_nvls, rng, out);
        if (!kv_sched_equal(out, parent))
            return 0;
    }
    return 1;
}

static int one_move(const kv_schedule *parent, const kv_schedule *other, kv_sched_move m,
                    int allow_nvls, kv_rng *rng, kv_schedule *out, char *note, size_t note_cap)
{
    if (m == KV_SMOVE_JUMP) {
        if (jump(parent, allow_nvls, rng, out) != 0)
            return 1;
        snprintf(note, note_cap, "jump");
        return 0;
    }
    static _Thread_local options os; /* ~14 KB: off the stack */
    move_options(&os, parent, other, m, allow_nvls);
    if (os.n == 0)
        return 1;
    const option *o = &os.o[kv_rng_below(rng, (uint64_t)os.n)];
    *out = o->s;
    snprintf(note, note_cap, "%s", o->note);
    return 0;
}

int kv_sched_mutate(const kv_schedule *parent, const kv_schedule *other, kv_sched_move m,
                    int allow_nvls, kv_rng *rng, kv_schedule *out, char *note, size_t note_cap)
{
    char scratch[NOTE_MAX];
    if (!note || note_cap == 0) {
        note = scratch;
        note_cap = sizeof scratch;
    }
    note[0] = '\0';
    kv_schedule p = *parent; /* out may be parent */
    if ((int)m < 0 || m >= KV_SMOVE_COUNT || (int)p.coll < 0 || p.coll >= KV_SC_COUNT ||
        p.n_phases < 1 || p.n_phases > KV_SCHED_MAX_PHASES) {
        *out = p;
        return 1;
    }
    if (m != KV_SMOVE_ANY) {
        int rc = one_move(&p, other, m, allow_nvls, rng, out, note, note_cap);
        if (rc != 0) {
            *out = p;
            snprintf(note, note_cap, "no %s move", kv_sched_move_name(m));
        }
        return rc;
    }
    /* any: the structural moves in a random order, a jump when none can */
    kv_sched_move order[] = {KV_SMOVE_ALGO,  KV_SMOVE_DIR,   KV_SMOVE_XPORT,  KV_SMOVE_PROTO,
                             KV_SMOVE_SHAPE, KV_SMOVE_CHUNK, KV_SMOVE_LAUNCH, KV_SMOVE_CROSS};
    int n = other ? 8 : 7;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)kv_rng_below(rng, (uint64_t)i + 1);
        kv_sched_move t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < n; i++)
        if (one_move(&p, other, order[i], allow_nvls, rng, out, note, note_cap) == 0)
            return 0;
    if (one_move(&p, other, KV_SMOVE_JUMP, allow_nvls, rng, out, note, note_cap) == 0)
        return 0;
    *out = p;
    snprintf(note, note_cap, "no move");
    return 1;
}
