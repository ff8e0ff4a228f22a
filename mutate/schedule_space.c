/* schedule_space.c — a collective's space of valid schedules: its exact
 * size (kv_sched_space_size) and a uniform draw from it (kv_sched_random).
 *
 * A schedule of two phases has 288 heads times some 97,000 field values per
 * phase squared: too many to enumerate. schedule_check.c splits the
 * invariants so that a phase's validity depends on its own fields and the
 * phase sequence, and a link's (invariant 8) on the phase before's sync,
 * xport, algo and chunk and the phase after's xport, algo and chunk. So
 * each phase is enumerated alone, its valid settings counted per "link key"
 * (sync, xport, algo, chunk), and the phases combined key by key (a product
 * over a chain), the head counted apart (only invariant 10 ties it to the
 * phases). */
#include "mutate/schedule.h"

#include <string.h>

#define N_SYNC KV_SYNC_COUNT
#define N_XPORT KV_XP_COUNT
#define N_ALGO KV_ALGO_COUNT
#define N_CHUNK 10
#define N_KEYS (N_SYNC * N_XPORT * N_ALGO * N_CHUNK)

static int key_of(const kv_sched_phase *p)
{
    int c = kv_sched_phase_get(p, KV_SF_CHUNK);
    return (((int)p->sync * N_XPORT + (int)p->xport) * N_ALGO + (int)p->algo) * N_CHUNK + c;
}

static void key_apply(int key, kv_sched_phase *p)
{
    kv_sched_phase_set(p, KV_SF_CHUNK, key % N_CHUNK);
    key /= N_CHUNK;
    p->algo = (kv_sched_algo)(key % N_ALGO);
    key /= N_ALGO;
    p->xport = (kv_sched_xport)(key % N_XPORT);
    p->sync = (kv_sched_sync)(key / N_XPORT);
}

/* Counts phase i's valid settings of s per link key into cnt. Every phase
 * field runs over all its values (nvls skipped unless allow_nvls). */
static void count_phase(kv_schedule *s, int i, int allow_nvls, uint64_t cnt[N_KEYS])
{
    memset(cnt, 0, N_KEYS * sizeof cnt[0]);
    const int first = KV_SF_FIRST_PHASE, nf = KV_SF_COUNT - KV_SF_FIRST_PHASE;
    int v[KV_SF_COUNT - KV_SF_FIRST_PHASE] = {0};
    kv_sched_phase *p = &s->phase[i];
    for (;;) {
        for (int f = 0; f < nf; f++)
            kv_sched_phase_set(p, (kv_sched_field)(first + f), v[f]);
        if ((allow_nvls || p->xport != KV_XP_NVLS) && kv_sched_check_phase(s, i, NULL) == 0)
            cnt[key_of(p)]++;
        int f = nf - 1; /* the next setting, the last field fastest */
        while (f >= 0 && ++v[f] == kv_sched_field_n_values((kv_sched_field)(first + f)))
            v[f--] = 0;
        if (f < 0)
            return;
    }
}

/* The heads valid with n phases (invariant 10 the only tie). */
static uint64_t count_heads(kv_sched_coll c, int n)
{
    kv_schedule s;
    memset(&s, 0, sizeof s);
    s.coll = c;
    s.n_phases = n;
    uint64_t total = 0;
    int v[KV_SF_FIRST_PHASE] = {0};
    for (;;) {
        for (int f = 0; f < KV_SF_FIRST_PHASE; f++)
            kv_sched_head_set(&s, (kv_sched_field)f, v[f]);
        total += !(s.launch == KV_LAUNCH_SPLIT && n < 2);
        int f = KV_SF_FIRST_PHASE - 1;
        while (f >= 0 && ++v[f] == kv_sched_field_n_values((kv_sched_field)f))
            v[f--] = 0;
        if (f < 0)
            return total;
    }
}

static void sequence_schedule(kv_sched_coll c, int j, kv_schedule *s)
{
    kv_sched_default(c, s);
    kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
    s->n_phases = kv_sched_sequence(c, j, kinds);
    for (int i = 0; i < s->n_phases; i++) {
        s->phase[i] = s->phase[0];
        s->phase[i].kind = kinds[i];
    }
}

uint64_t kv_sched_space_size(kv_sched_coll c, int allow_nvls)
{
    static uint64_t ways[N_KEYS], next[N_KEYS], cnt[N_KEYS]; /* 40 KB: off the stack */
    uint64_t total = 0;
    for (int j = 0; j < kv_sched_n_sequences(c); j++) {
        kv_schedule s;
        sequence_schedule(c, j, &s);
        count_phase(&s, 0, allow_nvls, ways);
        for (int i = 1; i < s.n_phases; i++) {
            count_phase(&s, i, allow_nvls, cnt);
            for (int b = 0; b < N_KEYS; b++) {
                next[b] = 0;
                if (!cnt[b])
                    continue;
                key_apply(b, &s.phase[i]);
                uint64_t w = 0;
                for (int a = 0; a < N_KEYS; a++) {
                    if (!ways[a])
                        continue;
                    key_apply(a, &s.phase[i - 1]);
                    if (kv_sched_check_link(&s, i - 1, NULL) == 0)
                        w += ways[a];
                }
                next[b] = w * cnt[b];
            }
            memcpy(ways, next, sizeof ways);
        }
        uint64_t phases = 0;
        for (int k = 0; k < N_KEYS; k++)
            phases += ways[k];
        total += phases * count_heads(c, s.n_phases);
    }
    return total;
}

/* ---- drawing ---------------------------------------------------------------- */

/* Whether value v of phase field f can be valid for phase i of s whatever
 * the other fields are (invariants 2, 3, 4's phase list, 7's and 9): the
 * draw's domain. Leaving out values that never pass keeps the draw uniform
 * over the valid settings and makes a valid one likely. */
static int possible(const kv_schedule *s, int i, kv_sched_field f, int v, int allow_nvls)
{
    kv_sched_kind k = s->phase[i].kind;
    int local = k == KV_PH_QUANT || k == KV_PH_LOCAL;
    kv_sched_phase p = s->phase[i];
    kv_sched_phase_set(&p, f, v);
    switch (f) {
    case KV_SF_ALGO:
        return p.algo == KV_ALGO_DIRECT ||
               (p.algo == KV_ALGO_RING && (k == KV_PH_RS || k == KV_PH_AG || k == KV_PH_BC)) ||
               (p.algo == KV_ALGO_TREE && k == KV_PH_BC);
    case KV_SF_DIR: return !local || p.dir == KV_DIR_PULL;
    case KV_SF_XPORT:
        if (p.xport == KV_XP_NVLS)
            return allow_nvls && (k == KV_PH_AR || k == KV_PH_RS || k == KV_PH_AG);
        return !local || p.xport == KV_XP_SM4 || p.xport == KV_XP_SM8 || p.xport == KV_XP_SM16;
    case KV_SF_PROTO: return p.proto == KV_PROTO_SIMPLE || (k != KV_PH_SCATTER && !local);
    case KV_SF_FUSE: {
        int wants = s->coll == KV_SC_FP8_ALLGATHER && k == KV_PH_AG;
        for (int j = 0; j < s->n_phases; j++)
            wants &= s->phase[j].kind != KV_PH_QUANT;
        return p.fuse == (wants ? KV_FUSE_QUANT : KV_FUSE_NONE);
    }
    default: return 1;
    }
}

/* Phase i of s drawn uniformly from its valid settings (rejection within
 * the domain above). */
static void draw_phase(kv_schedule *s, int i, int allow_nvls, kv_rng *rng)
{
    int dom[KV_SF_COUNT][16], n[KV_SF_COUNT];
    for (int f = KV_SF_FIRST_PHASE; f < KV_SF_COUNT; f++) {
        n[f] = 0;
        for (int v = 0; v < kv_sched_field_n_values((kv_sched_field)f); v++)
            if (possible(s, i, (kv_sched_field)f, v, allow_nvls))
                dom[f][n[f]++] = v;
    }
    do {
        for (int f = KV_SF_FIRST_PHASE; f < KV_SF_COUNT; f++)
            kv_sched_phase_set(&s->phase[i], (kv_sched_field)f,
                               dom[f][kv_rng_below(rng, (uint64_t)n[f])]);
    } while (kv_sched_check_phase(s, i, NULL) != 0);
}

void kv_sched_random(kv_sched_coll c, int allow_nvls, kv_rng *rng, kv_schedule *out)
{
    if ((int)c < 0 || c >= KV_SC_COUNT)
        c = KV_SC_ALLREDUCE;
    kv_schedule s;
    sequence_schedule(c, (int)kv_rng_below(rng, (uint64_t)kv_sched_n_sequences(c)), &s);
    for (int f = 0; f < KV_SF_FIRST_PHASE; f++) {
        int n = kv_sched_field_n_values((kv_sched_field)f);
        if (f == KV_SF_LAUNCH && s.n_phases < 2)
            n = 1; /* invariant 10: fused */
        kv_sched_head_set(&s, (kv_sched_field)f, (int)kv_rng_below(rng, (uint64_t)n));
    }
    /* The links: redraw every phase until they hold (uniform over the valid
     * chains; a two-phase draw passes about one time in three). */
    for (;;) {
        for (int i = 0; i < s.n_phases; i++)
            draw_phase(&s, i, allow_nvls, rng);
        if (kv_sched_check(&s, NULL) == 0)
            break;
    }
    *out = s;
}
