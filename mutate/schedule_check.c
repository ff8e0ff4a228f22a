/* schedule_check.c — the invariants of a schedule (docs/schedules.md,
 * "Invariants"), each with its own message, and the cell a schedule aims at.
 *
 * kv_sched_check = the fields in range, invariants 1 and 10 (the head),
 * kv_sched_check_phase for every phase (2-7, 9, and sync=chunk needing a
 * chunk) and kv_sched_check_link between every two phases (8). The counting
 * of schedule_space.c relies on that split: a phase's validity depends on
 * its own fields and the phase sequence only, and a link's on the sync,
 * xport, algo and chunk of the phase before and the xport, algo and chunk
 * of the phase after. */
#include "mutate/schedule.h"

#include <stdio.h>
#include <string.h>

#include "common/cell.h"

static int is_sm(kv_sched_xport x)
{
    return x == KV_XP_SM4 || x == KV_XP_SM8 || x == KV_XP_SM16;
}

static int has_kind(const kv_schedule *s, kv_sched_kind k)
{
    for (int i = 0; i < s->n_phases && i < KV_SCHED_MAX_PHASES; i++)
        if (s->phase[i].kind == k)
            return 1;
    return 0;
}

static const char *name_of(kv_sched_field f, int v, char *buf, size_t cap)
{
    kv_sched_field_text(f, v, buf, cap);
    return buf;
}

/* "phase N (kind)" */
static const char *label(const kv_schedule *s, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "phase %d (%s)", i + 1, kv_sched_kind_name(s->phase[i].kind));
    return buf;
}

/* A field out of its list: the raw value, and the list. */
static int out_of_range(kv_err *err, const char *where, kv_sched_field f, long long raw)
{
    char list[160], t[24];
    size_t o = 0;
    list[0] = '\0';
    int n = kv_sched_field_n_values(f);
    for (int v = 0; v < n && o < sizeof list; v++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s",
                              v == 0       ? ""
                              : v + 1 == n ? " or "
                                           : ", ",
                              name_of(f, v, t, sizeof t));
    return kv_err_set(err, "%s: %s %lld: expected %s", where, kv_sched_field_name(f), raw, list);
}

static long long raw_phase(const kv_sched_phase *p, kv_sched_field f)
{
    switch (f) {
    case KV_SF_ALGO: return p->algo;
    case KV_SF_DIR: return p->dir;
    case KV_SF_XPORT: return p->xport;
    case KV_SF_PROTO: return p->proto;
    case KV_SF_CHUNK: return p->chunk;
    case KV_SF_INFLIGHT: return p->inflight;
    case KV_SF_SYNC: return p->sync;
    case KV_SF_ORDER: return p->order;
    default: return p->fuse;
    }
}

int kv_sched_link_reads(const kv_schedule *s, int i)
{
    if (i < 0 || i + 1 >= s->n_phases || i + 1 >= KV_SCHED_MAX_PHASES)
        return 0;
    kv_sched_kind a = s->phase[i].kind, b = s->phase[i + 1].kind;
    return b == KV_PH_AG && (a == KV_PH_RS || a == KV_PH_SCATTER || a == KV_PH_QUANT);
}

int kv_sched_check_phase(const kv_schedule *s, int i, kv_err *err)
{
    const kv_sched_phase *p = &s->phase[i];
    char at[48], t[24];
    label(s, i, at, sizeof at);
    if ((int)p->kind < 0 || p->kind >= KV_PH_COUNT)
        return kv_err_set(err, "phase %d: kind %d: unknown", i + 1, (int)p->kind);
    for (int f = KV_SF_FIRST_PHASE; f < KV_SF_COUNT; f++)
        if (kv_sched_phase_get(p, (kv_sched_field)f) < 0)
            return out_of_range(err, at, (kv_sched_field)f, raw_phase(p, (kv_sched_field)f));
    const kv_sched_kind k = p->kind;

    /* 2: algorithms */
    if (p->algo == KV_ALGO_RING && k != KV_PH_RS && k != KV_PH_AG && k != KV_PH_BC)
        return kv_err_set(err, "%s: algo=ring only for rs, ag and bc (invariant 2)", at);
    if (p->algo == KV_ALGO_TREE && k != KV_PH_BC)
        return kv_err_set(err, "%s: algo=tree only for bc (invariant 2)", at);

    /* 3: local work */
    if (k == KV_PH_QUANT || k == KV_PH_LOCAL) {
        if (p->dir != KV_DIR_PULL)
            return kv_err_set(err, "%s: local work needs dir=pull, not %s (invariant 3)", at,
                              name_of(KV_SF_DIR, p->dir, t, sizeof t));
        if (!is_sm(p->xport))
            return kv_err_set(err,
                              "%s: local work needs xport sm4, sm8 or sm16, not %s "
                              "(invariant 3)",
                              at, name_of(KV_SF_XPORT, p->xport, t, sizeof t));
        if (p->proto != KV_PROTO_SIMPLE)
            return kv_err_set(err, "%s: local work needs proto=simple, not %s (invariant 3)", at,
                              name_of(KV_SF_PROTO, p->proto, t, sizeof t));
    }

    /* 4: ll and ll128 */
    if (p->proto != KV_PROTO_SIMPLE) {
        char pr[24];
        name_of(KV_SF_PROTO, p->proto, pr, sizeof pr);
        if (k != KV_PH_AR && k != KV_PH_RS && k != KV_PH_AG && k != KV_PH_A2A && k != KV_PH_BC)
            return kv_err_set(err, "%s: proto=%s only for ar, rs, ag, a2a and bc (invariant 4)", at,
                              pr);
        if (p->dir != KV_DIR_PUSH)
            return kv_err_set(err, "%s: proto=%s needs dir=push (invariant 4)", at, pr);
        if (!is_sm(p->xport))
            return kv_err_set(err,
                              "%s: proto=%s needs xport sm4, sm8 or sm16, not %s "
                              "(invariant 4)",
                              at, pr, name_of(KV_SF_XPORT, p->xport, t, sizeof t));
        if (p->algo != KV_ALGO_DIRECT)
            return kv_err_set(err, "%s: proto=%s needs algo=direct (invariant 4)", at, pr);
    }

    /* 5: the copy engine */
    if (p->xport == KV_XP_CE) {
        /* quant and local: invariant 3 has refused ce already */
        if ((k == KV_PH_AR || k == KV_PH_RS) && p->dir != KV_DIR_PUSH)
            return kv_err_set(err, "%s: xport=ce on %s needs dir=push (invariant 5)", at,
                              kv_sched_kind_name(k));
        if (p->proto != KV_PROTO_SIMPLE)
            return kv_err_set(err, "%s: xport=ce needs proto=simple (invariant 5)", at);
        if (p->chunk != 0)
            return kv_err_set(err, "%s: xport=ce needs chunk=0 (invariant 5)", at);
        if (p->sync != KV_SYNC_GRID)
            return kv_err_set(err, "%s: xport=ce needs sync=grid (invariant 5)", at);
        if (p->fuse != KV_FUSE_NONE)
            return kv_err_set(err, "%s: xport=ce needs fuse=none (invariant 5)", at);
        if (p->algo != KV_ALGO_DIRECT)
            return kv_err_set(err, "%s: xport=ce needs algo=direct (invariant 5)", at);
    }

    /* 6: TMA */
    if (p->xport == KV_XP_TMA) {
        if (p->proto != KV_PROTO_SIMPLE)
            return kv_err_set(err, "%s: xport=tma needs proto=simple (invariant 6)", at);
        if (p->chunk < 4096 || p->chunk > 64u * 1024)
            return kv_err_set(
                err,
                "%s: xport=tma needs a chunk (the tile) of 4K..64K, not %s "
                "(invariant 6)",
                at, name_of(KV_SF_CHUNK, kv_sched_phase_get(p, KV_SF_CHUNK), t, sizeof t));
        if ((uint64_t)p->chunk * (uint64_t)p->inflight > 192u * 1024)
            return kv_err_set(
                err,
                "%s: xport=tma needs inflight x chunk <= 192K (shared "
                "memory), not %d x %s (invariant 6)",
                at, p->inflight,
                name_of(KV_SF_CHUNK, kv_sched_phase_get(p, KV_SF_CHUNK), t, sizeof t));
    }

    /* 7: NVLS */
    if (p->xport == KV_XP_NVLS) {
        if (k != KV_PH_AR && k != KV_PH_RS && k != KV_PH_AG)
            return kv_err_set(err, "%s: xport=nvls only for ar, rs and ag (invariant 7)", at);
        if (p->proto != KV_PROTO_SIMPLE)
            return kv_err_set(err, "%s: xport=nvls needs proto=simple (invariant 7)", at);
        if (p->algo != KV_ALGO_DIRECT)
            return kv_err_set(err, "%s: xport=nvls needs algo=direct (invariant 7)", at);
    }

    /* 8, within the phase: a flag per chunk needs chunks */
    if (p->sync == KV_SYNC_CHUNK && p->chunk == 0)
        return kv_err_set(err, "%s: sync=chunk needs a chunk, not chunk=0 (invariant 8)", at);

    /* 9: fusion */
    int wants_quant = s->coll == KV_SC_FP8_ALLGATHER && k == KV_PH_AG && !has_kind(s, KV_PH_QUANT);
    if (p->fuse == KV_FUSE_QUANT && !wants_quant)
        return kv_err_set(err,
                          "%s: fuse=quant only on the ag of fp8_allgather without a quant "
                          "phase (invariant 9)",
                          at);
    if (p->fuse != KV_FUSE_QUANT && wants_quant)
        return kv_err_set(err,
                          "%s: the ag of fp8_allgather without a quant phase needs "
                          "fuse=quant (invariant 9)",
                          at);
    if (p->fuse == KV_FUSE_QUANT && (!is_sm(p->xport) || p->proto != KV_PROTO_SIMPLE))
        return kv_err_set(err,
                          "%s: fuse=quant needs an SM xport (sm4, sm8, sm16) and "
                          "proto=simple (invariant 9)",
                          at);
    return 0;
}

int kv_sched_check_link(const kv_schedule *s, int i, kv_err *err)
{
    if (!kv_sched_link_reads(s, i))
        return 0;
    const kv_sched_phase *a = &s->phase[i], *b = &s->phase[i + 1];
    char at[48], ta[24], tb[24];
    label(s, i, at, sizeof at);
    const char *next = kv_sched_kind_name(b->kind);
    if (a->sync == KV_SYNC_CTA) {
        if (a->xport == KV_XP_CE || b->xport == KV_XP_CE)
            return kv_err_set(err,
                              "%s: sync=cta before %s needs no ce in either phase "
                              "(invariant 8)",
                              at, next);
        if (a->algo != KV_ALGO_DIRECT || b->algo != KV_ALGO_DIRECT)
            return kv_err_set(err,
                              "%s: sync=cta before %s needs algo=direct in both phases "
                              "(invariant 8)",
                              at, next);
        int same_sm = is_sm(a->xport) && a->xport == b->xport;
        int same_tile = a->xport == KV_XP_TMA && b->xport == KV_XP_TMA && a->chunk == b->chunk;
        if (!same_sm && !same_tile)
            return kv_err_set(err,
                              "%s: sync=cta before %s needs both phases on the same SM "
                              "width or the same TMA tile, not %s then %s (invariant 8)",
                              at, next, name_of(KV_SF_XPORT, a->xport, ta, sizeof ta),
                              name_of(KV_SF_XPORT, b->xport, tb, sizeof tb));
    }
    if (a->sync == KV_SYNC_CHUNK && (a->chunk == 0 || a->chunk != b->chunk))
        return kv_err_set(err,
                          "%s: sync=chunk before %s needs the same chunk in both phases, "
                          "not %s then %s (invariant 8)",
                          at, next,
                          name_of(KV_SF_CHUNK, kv_sched_phase_get(a, KV_SF_CHUNK), ta, sizeof ta),
                          name_of(KV_SF_CHUNK, kv_sched_phase_get(b, KV_SF_CHUNK), tb, sizeof tb));
    return 0;
}

/* "ar | rs ag" of c's sequences. */
static void sequences_text(kv_sched_coll c, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int j = 0; j < kv_sched_n_sequences(c) && o < cap; j++) {
        kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
        int n = kv_sched_sequence(c, j, kinds);
        o += (size_t)snprintf(buf + o, cap - o, "%s", j ? " | " : "");
        for (int i = 0; i < n && o < cap; i++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "",
                                  kv_sched_kind_name(kinds[i]));
    }
}

static int check_sequence(const kv_schedule *s, kv_err *err)
{
    for (int j = 0; j < kv_sched_n_sequences(s->coll); j++) {
        kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
        int n = kv_sched_sequence(s->coll, j, kinds);
        int same = n == s->n_phases;
        for (int i = 0; same && i < n; i++)
            same = kinds[i] == s->phase[i].kind;
        if (same)
            return 0;
    }
    char have[64], want[96];
    size_t o = 0;
    have[0] = '\0';
    for (int i = 0; i < s->n_phases && o < sizeof have; i++)
        o += (size_t)snprintf(have + o, sizeof have - o, "%s%s", i ? " " : "",
                              kv_sched_kind_name(s->phase[i].kind));
    sequences_text(s->coll, want, sizeof want);
    return kv_err_set(err, "phases '%s': not a phase sequence of %s (%s) (invariant 1)", have,
                      kv_sched_coll_name(s->coll), want);
}

static long long raw_head(const kv_schedule *s, kv_sched_field f)
{
    return f == KV_SF_THREADS  ? s->threads
           : f == KV_SF_CTAS   ? s->ctas
           : f == KV_SF_LAUNCH ? (long long)s->launch
                               : (long long)s->ll_max;
}

int kv_sched_check(const kv_schedule *s, kv_err *err)
{
    if ((int)s->coll < 0 || s->coll >= KV_SC_COUNT)
        return kv_err_set(err, "head: collective %d: unknown", (int)s->coll);
    char at[48];
    snprintf(at, sizeof at, "head (%s)", kv_sched_coll_name(s->coll));
    for (int f = 0; f < KV_SF_FIRST_PHASE; f++)
        if (kv_sched_head_get(s, (kv_sched_field)f) < 0)
            return out_of_range(err, at, (kv_sched_field)f, raw_head(s, (kv_sched_field)f));
    if (s->n_phases < 1 || s->n_phases > KV_SCHED_MAX_PHASES)
        return kv_err_set(err, "schedule: %d phases; 1 to %d", s->n_phases, KV_SCHED_MAX_PHASES);
    for (int i = 0; i < s->n_phases; i++)
        if ((int)s->phase[i].kind < 0 || s->phase[i].kind >= KV_PH_COUNT)
            return kv_err_set(err, "phase %d: kind %d: unknown", i + 1, (int)s->phase[i].kind);
    if (check_sequence(s, err) != 0)
        return -1;
    if (s->launch == KV_LAUNCH_SPLIT && s->n_phases < 2)
        return kv_err_set(err, "%s: launch=split needs at least two phases (invariant 10)", at);
    for (int i = 0; i < s->n_phases; i++)
        if (kv_sched_check_phase(s, i, err) != 0)
            return -1;
    for (int i = 0; i + 1 < s->n_phases; i++)
        if (kv_sched_check_link(s, i, err) != 0)
            return -1;
    return 0;
}

int kv_sched_cell(const kv_schedule *s)
{
    int nvls = 0, tma = 0, ce = 0, all_ce = 1;
    for (int i = 0; i < s->n_phases && i < KV_SCHED_MAX_PHASES; i++) {
        const kv_sched_phase *p = &s->phase[i];
        nvls |= p->xport == KV_XP_NVLS;
        tma |= p->xport == KV_XP_TMA;
        ce |= p->xport == KV_XP_CE;
        if (p->kind != KV_PH_QUANT && p->kind != KV_PH_LOCAL) /* the data phases */
            all_ce &= p->xport == KV_XP_CE;
    }
    kv_transport t = nvls     ? KV_TRANSPORT_NVLS
                     : tma    ? KV_TRANSPORT_TMA
                     : all_ce ? KV_TRANSPORT_CE
                              : KV_TRANSPORT_SM;
    kv_fusion f = s->launch == KV_LAUNCH_FUSED && !ce ? KV_FUSION_FUSED : KV_FUSION_UNFUSED;
    return kv_cell_index(t, f);
}
