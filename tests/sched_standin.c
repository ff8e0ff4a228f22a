/* sched_standin.c — TEST CODE ONLY: a tiny stand-in for the schedule
 * language (mutate/schedule.h) so that bench/search_quality.c and
 * bench/schedule_synth.c can be built and tested before mutate/schedule.c
 * and mutate/schedule_moves.c exist (bench/CMakeLists.txt uses it only
 * when mutate/schedule.c is missing). Its space is a small valid corner of
 * the real one: SM transports and TMA, simple protocol, direct algorithms,
 * grid syncs. It is not the language; never link it into kevo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cell.h"
#include "mutate/schedule.h"

static const char *const colls[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                    "broadcast", "fp8_allgather"};
static const char *const kinds[] = {"ar", "rs", "ag", "a2a", "bc", "scatter", "quant", "local"};
static const char *const algos[] = {"direct", "ring", "tree"};
static const char *const dirs[] = {"pull", "push"};
static const char *const xports[] = {"sm4", "sm8", "sm16", "tma", "ce", "nvls"};
static const char *const protos[] = {"simple", "ll", "ll128"};
static const char *const syncs[] = {"grid", "cta", "chunk"};
static const char *const orders[] = {"ring", "rev", "xor"};
static const char *const fuses[] = {"none", "quant"};
static const char *const launches[] = {"fused", "split"};

const char *kv_sched_coll_name(kv_sched_coll c) { return c < KV_SC_COUNT ? colls[c] : "?"; }
const char *kv_sched_kind_name(kv_sched_kind k) { return k < KV_PH_COUNT ? kinds[k] : "?"; }

static int find(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], s, len) == 0)
            return i;
    return -1;
}

int kv_sched_coll_parse(const char *p) { return find(colls, KV_SC_COUNT, p, strlen(p)); }

/* sequences per collective: kinds, terminated by -1 */
static const int seqs[KV_SC_COUNT][2][3] = {
    {{KV_PH_AR, -1}, {KV_PH_RS, KV_PH_AG, -1}},
    {{KV_PH_AG, -1}, {KV_PH_LOCAL, KV_PH_AG, -1}},
    {{KV_PH_RS, -1}, {KV_PH_RS, -1}},
    {{KV_PH_A2A, -1}, {KV_PH_LOCAL, KV_PH_A2A, -1}},
    {{KV_PH_BC, -1}, {KV_PH_SCATTER, KV_PH_AG, -1}},
    {{KV_PH_QUANT, KV_PH_AG, -1}, {KV_PH_AG, -1}},
};

static void set_seq(kv_schedule *s, int which)
{
    const int *q = seqs[s->coll][which];
    s->n_phases = 0;
    for (int i = 0; q[i] >= 0; i++) {
        kv_sched_phase *p = &s->phase[s->n_phases++];
        memset(p, 0, sizeof *p);
        p->kind = (kv_sched_kind)q[i];
        p->xport = KV_XP_SM16;
        p->inflight = 4;
        p->dir = KV_DIR_PULL;
    }
    if (s->coll == KV_SC_FP8_ALLGATHER && s->n_phases == 1)
        s->phase[0].fuse = KV_FUSE_QUANT;
    if (s->n_phases < 2)
        s->launch = KV_LAUNCH_FUSED;
}

void kv_sched_default(kv_sched_coll c, kv_schedule *out)
{
    memset(out, 0, sizeof *out);
    out->coll = c;
    out->threads = 512;
    out->ctas = 2;
    out->ll_max = 256 * 1024;
    set_seq(out, 0);
}

int kv_sched_format(const kv_schedule *s, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s threads=%d ctas=%d launch=%s ll_max=%uK",
                                colls[s->coll], s->threads, s->ctas, launches[s->launch],
                                s->ll_max / 1024);
    for (int i = 0; i < s->n_phases && n < cap; i++) {
        const kv_sched_phase *p = &s->phase[i];
        char chunk[16];
        snprintf(chunk, sizeof chunk, p->chunk ? "%uK" : "0", p->chunk / 1024);
        n += (size_t)snprintf(buf + n, cap - n,
                              "; %s algo=%s dir=%s xport=%s proto=%s chunk=%s inflight=%d sync=%s "
                              "order=%s fuse=%s",
                              kinds[p->kind], algos[p->algo], dirs[p->dir], xports[p->xport],
                              protos[p->proto], chunk, p->inflight, syncs[p->sync],
                              orders[p->order], fuses[p->fuse]);
    }
    return n < cap ? 0 : -1;
}

int kv_sched_equal(const kv_schedule *a, const kv_schedule *b)
{
    char x[KV_SCHED_TEXT_MAX], y[KV_SCHED_TEXT_MAX];
    return kv_sched_format(a, x, sizeof x) == 0 && kv_sched_format(b, y, sizeof y) == 0 &&
           strcmp(x, y) == 0;
}

static int value(const char *v, size_t n, uint32_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = 0;
    char *end;
    unsigned long x = strtoul(buf, &end, 10);
    if (*end == 'K')
        x *= 1024, end++;
    else if (*end == 'M')
        x *= 1024 * 1024, end++;
    if (*end)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

/* the stand-in parses what its kv_sched_format writes (every field) */
int kv_sched_parse(const char *text, kv_schedule *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    int sect = 0;
    while (*p) {
        const char *end = p + strcspn(p, ";\n");
        const char *w = p;
        while (w < end && *w == ' ')
            w++;
        size_t wl = strcspn(w, " ;\n");
        kv_sched_phase *ph = sect ? &out->phase[sect - 1] : NULL;
        if (sect == 0) {
            int c = find(colls, KV_SC_COUNT, w, wl);
            if (c < 0)
                return kv_err_set(err, "unknown collective");
            kv_sched_default((kv_sched_coll)c, out);
            out->n_phases = 0;
        } else {
            if (sect > KV_SCHED_MAX_PHASES)
                return kv_err_set(err, "too many phases");
            memset(ph, 0, sizeof *ph);
            int k = find(kinds, KV_PH_COUNT, w, wl);
            if (k < 0)
                return kv_err_set(err, "unknown phase");
            ph->kind = (kv_sched_kind)k;
            out->n_phases = sect;
        }
        for (const char *f = w + wl; f < end;) {
            while (f < end && *f == ' ')
                f++;
            size_t fl = strcspn(f, " ;\n");
            const char *eq = memchr(f, '=', fl);
            if (!eq)
                break;
            size_t kl = (size_t)(eq - f), vl = fl - kl - 1;
            const char *v = eq + 1;
            uint32_t num = 0;
            int r = 0;
#define KEY(s) (kl == strlen(s) && strncmp(f, s, kl) == 0)
            if (!ph && KEY("threads"))
                r = value(v, vl, &num), out->threads = (int)num;
            else if (!ph && KEY("ctas"))
                r = value(v, vl, &num), out->ctas = (int)num;
            else if (!ph && KEY("ll_max"))
                r = value(v, vl, &out->ll_max);
            else if (!ph && KEY("launch"))
                r = (int)(out->launch = (kv_sched_launch)find(launches, 2, v, vl));
            else if (ph && KEY("algo"))
                r = (int)(ph->algo = (kv_sched_algo)find(algos, 3, v, vl));
            else if (ph && KEY("dir"))
                r = (int)(ph->dir = (kv_sched_dir)find(dirs, 2, v, vl));
            else if (ph && KEY("xport"))
                r = (int)(ph->xport = (kv_sched_xport)find(xports, 6, v, vl));
            else if (ph && KEY("proto"))
                r = (int)(ph->proto = (kv_sched_proto)find(protos, 3, v, vl));
            else if (ph && KEY("sync"))
                r = (int)(ph->sync = (kv_sched_sync)find(syncs, 3, v, vl));
            else if (ph && KEY("order"))
                r = (int)(ph->order = (kv_sched_order)find(orders, 3, v, vl));
            else if (ph && KEY("fuse"))
                r = (int)(ph->fuse = (kv_sched_fuse)find(fuses, 2, v, vl));
            else if (ph && KEY("chunk"))
                r = value(v, vl, &ph->chunk);
            else if (ph && KEY("inflight"))
                r = value(v, vl, &num), ph->inflight = (int)num;
            else
                r = -1;
#undef KEY
            if (r < 0)
                return kv_err_set(err, "bad field in section %d", sect);
            f += fl;
        }
        sect++;
        p = *end ? end + 1 : end;
    }
    return out->n_phases > 0 ? 0 : kv_err_set(err, "no phase");
}

int kv_sched_cell(const kv_schedule *s)
{
    int tma = 0, ce = 0;
    for (int i = 0; i < s->n_phases; i++) {
        tma |= s->phase[i].xport == KV_XP_TMA;
        ce |= s->phase[i].xport == KV_XP_CE;
    }
    kv_transport t = tma ? KV_TRANSPORT_TMA : KV_TRANSPORT_SM;
    kv_fusion f = s->launch == KV_LAUNCH_FUSED && !ce ? KV_FUSION_FUSED : KV_FUSION_UNFUSED;
    return kv_cell_index(t, f);
}

static const int threads_v[] = {128, 256, 512, 1024};
static const int inflight_v[] = {1, 2, 4, 8, 16};

static void set_xport(kv_sched_phase *p, int x)
{
    if (p->kind == KV_PH_QUANT || p->kind == KV_PH_LOCAL)
        x = x % 3;
    p->xport = (kv_sched_xport)x;
    p->chunk = x == KV_XP_TMA ? 16384 : 0;
    if (x == KV_XP_TMA && p->inflight > 8)
        p->inflight = 8;
}

void kv_sched_random(kv_sched_coll c, int allow_nvls, kv_rng *rng, kv_schedule *out)
{
    (void)allow_nvls;
    memset(out, 0, sizeof *out);
    out->coll = c;
    out->threads = threads_v[kv_rng_below(rng, 4)];
    out->ctas = 1 + (int)kv_rng_below(rng, 4);
    out->ll_max = 16384u << kv_rng_below(rng, 9);
    out->launch = (kv_sched_launch)kv_rng_below(rng, 2);
    set_seq(out, (int)kv_rng_below(rng, 2));
    for (int i = 0; i < out->n_phases; i++) {
        kv_sched_phase *p = &out->phase[i];
        p->inflight = inflight_v[kv_rng_below(rng, 5)];
        set_xport(p, (int)kv_rng_below(rng, 4));
        if (p->kind != KV_PH_QUANT && p->kind != KV_PH_LOCAL)
            p->dir = (kv_sched_dir)kv_rng_below(rng, 2);
        p->order = (kv_sched_order)kv_rng_below(rng, 3);
    }
}

int kv_sched_mutate(const kv_schedule *parent, const kv_schedule *other, kv_sched_move m,
                    int allow_nvls, kv_rng *rng, kv_schedule *out, char *note, size_t note_cap)
{
    if (note_cap)
        note[0] = 0;
    for (int tries = 0; tries < 64; tries++) {
        kv_sched_move mv = m;
        if (mv == KV_SMOVE_ANY)
            mv = other && kv_rng_below(rng, 4) == 0 ? KV_SMOVE_CROSS
                                                     : (kv_sched_move)kv_rng_below(rng, 7);
        *out = *parent;
        kv_sched_phase *p = &out->phase[kv_rng_below(rng, (uint64_t)out->n_phases)];
        switch (mv) {
        case KV_SMOVE_JUMP: kv_sched_random(parent->coll, allow_nvls, rng, out); break;
        case KV_SMOVE_CROSS:
            if (!other || other->n_phases != parent->n_phases)
                return 1;
            for (int i = 0; i < out->n_phases; i++)
                if (kv_rng_below(rng, 2))
                    out->phase[i] = other->phase[i];
            if (kv_rng_below(rng, 2))
                out->threads = other->threads, out->ctas = other->ctas;
            break;
        case KV_SMOVE_DIR:
            if (p->kind != KV_PH_QUANT && p->kind != KV_PH_LOCAL)
                p->dir = (kv_sched_dir)!p->dir;
            break;
        case KV_SMOVE_XPORT: set_xport(p, (int)kv_rng_below(rng, 4)); break;
        case KV_SMOVE_SHAPE: {
            int which = out->n_phases == 1 && seqs[out->coll][0][1] < 0 ? 1 : 0;
            kv_sched_launch l = out->launch;
            set_seq(out, which);
            if (out->n_phases > 1)
                out->launch = l;
            break;
        }
        case KV_SMOVE_CHUNK:
            p->inflight = inflight_v[kv_rng_below(rng, p->xport == KV_XP_TMA ? 4 : 5)];
            break;
        case KV_SMOVE_LAUNCH:
            switch (kv_rng_below(rng, 4)) {
            case 0: out->threads = threads_v[kv_rng_below(rng, 4)]; break;
            case 1: out->ctas = 1 + (int)kv_rng_below(rng, 4); break;
            case 2: out->ll_max = 16384u << kv_rng_below(rng, 9); break;
            default:
                if (out->n_phases > 1)
                    out->launch = (kv_sched_launch)!out->launch;
            }
            break;
        default: p->order = (kv_sched_order)kv_rng_below(rng, 3); break;
        }
        if (!kv_sched_equal(out, parent))
            return 0;
        if (mv == KV_SMOVE_CROSS)
            return 1;
    }
    return 1;
}
