/* schedule_synth.c — a SYNTHETIC table of schedules for tests and CI
 * (tests/fixtures/schedules-synthetic.tsv, made by
 * tests/fixtures/make_schedules_synthetic.sh): N distinct random valid
 * schedules per collective (kv_sched_random), each "timed" by a made-up
 * cost model, in the format bench/schedule_sweep.sh writes for measured ones
 * (sched_table.h). Nothing here was measured; the model only has structure
 * (transports, protocols, launch and phase shape matter, in different ways
 * at different sizes) so that a search has something to find.
 *
 *   usage: schedule_synth [--n N] [--seed S] [--problems 'a b'] > FILE
 *
 * The model, per size of B bytes per rank, W = 8:
 *   time = latency + B × volume / bandwidth, × noise
 *   latency: 3 µs + 1.5 per phase (+3 per extra kernel under launch=split,
 *            +6 per ce phase, +1 per grid sync); ll / ll128 phases up to
 *            ll_max take 0.55 / 0.75 of their phase's share
 *   bandwidth (GB/s): sm4 90, sm8 170, sm16 280, tma 320, ce 340, × threads,
 *            ctas, inflight, chunk and order factors, ll 0.5×, ll128 0.9×
 *            below ll_max, ring 0.92× (but one step's volume), push 1.04×
 *   volume: what the phases move (one-shot allreduce W-1 parts in, two-shot
 *            2(W-1)/W; a ring the same volume in W-1 steps)
 *   noise: exp(0.04 g), g from a hash of the schedule and size
 *   verdicts: ~4% mismatch, ~1% timeout (a hash); measured cell = aimed
 *            cell, except ~3% measured sm/unfused
 *   reference: 18 µs + B × v / 240 GB/s, v the collective's volume (2(W-1)/W
 *            for allreduce, 1 for broadcast, ...): an NCCL-like line
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cell.h"
#include "common/rng.h"
#include "mutate/schedule.h"

static const char *const sizes[] = {"64KiB", "1MiB", "16MiB", "256MiB"};
static const double size_bytes[] = {64.0 * 1024, 1024.0 * 1024, 16.0 * 1024 * 1024,
                                    256.0 * 1024 * 1024};
#define N_SIZES 4
#define W 8.0

static uint64_t fnv(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A uniform double in [0, 1) from a hash. */
static double unit(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (double)(h >> 11) / 9007199254740992.0;
}

static double bw_of(const kv_schedule *s, const kv_sched_phase *p, double bytes)
{
    static const double xport[] = {90, 170, 280, 320, 340, 400};
    double bw = xport[p->xport];
    static const double threads[] = {0.7, 0.9, 1.0, 0.95};
    bw *= threads[s->threads == 128 ? 0 : s->threads == 256 ? 1 : s->threads == 512 ? 2 : 3];
    static const double ctas[] = {0.8, 1.0, 1.03, 0.97};
    if (p->xport != KV_XP_CE)
        bw *= ctas[s->ctas - 1 < 4 && s->ctas >= 1 ? s->ctas - 1 : 0];
    static const double inflight[] = {0.6, 0.8, 1.0, 1.06, 1.0};
    int k = 0;
    for (int v = p->inflight; v > 1; v >>= 1)
        k++;
    bw *= inflight[k < 5 ? k : 4];
    if (p->chunk) {
        double c = p->chunk;
        bw *= c <= 8192 ? 0.82 : c >= 65536 && c <= 262144 ? 1.05 : 0.97;
    }
    if (p->order == KV_ORDER_XOR)
        bw *= 1.02;
    if (p->algo == KV_ALGO_RING)
        bw *= 0.92;
    if (p->dir == KV_DIR_PUSH)
        bw *= 1.04;
    if (bytes <= s->ll_max)
        bw *= p->proto == KV_PROTO_LL ? 0.5 : p->proto == KV_PROTO_LL128 ? 0.9 : 1.0;
    return bw * 1e3; /* bytes per µs */
}

/* What a phase moves per rank, in units of B (the per-rank size). */
static double volume(kv_sched_kind k)
{
    switch (k) {
    case KV_PH_AR: return W - 1;
    case KV_PH_RS: return (W - 1) / W;
    case KV_PH_AG: return (W - 1) / W;
    case KV_PH_A2A: return (W - 1) / W;
    case KV_PH_BC: return 1;
    case KV_PH_SCATTER: return 1 / W;
    case KV_PH_QUANT: return 0.25;
    default: return 1 / W; /* local */
    }
}

static double model_us(const kv_schedule *s, double bytes, uint64_t h)
{
    double lat = 3, data = 0;
    for (int i = 0; i < s->n_phases; i++) {
        const kv_sched_phase *p = &s->phase[i];
        double l = 1.5;
        if (s->launch == KV_LAUNCH_SPLIT && i > 0)
            l += 3;
        if (p->xport == KV_XP_CE)
            l += 6;
        if (p->sync == KV_SYNC_GRID)
            l += 1;
        else if (p->sync == KV_SYNC_CHUNK)
            l += 0.4;
        if (bytes <= s->ll_max && p->proto != KV_PROTO_SIMPLE)
            l *= p->proto == KV_PROTO_LL ? 0.55 : 0.75;
        if (p->algo == KV_ALGO_RING)
            l += 0.8 * (W - 1);
        else if (p->algo == KV_ALGO_TREE)
            l += 0.8 * 3;
        lat += l;
        data += bytes * volume(p->kind) / bw_of(s, p, bytes);
    }
    double g = sqrt(-2 * log(unit(h) + 1e-12)) * cos(6.283185307179586 * unit(h * 31 + 7));
    return (lat + data) * exp(0.04 * g);
}

static void usage_exit(void)
{
    fputs("usage: schedule_synth [--n N] [--seed S] [--problems 'a b'] > FILE\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    long n = 200, seed = 1;
    const char *problems = "allreduce allgather reducescatter alltoall broadcast fp8_allgather";
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage_exit();
        char *end;
        if (strcmp(argv[i], "--n") == 0) {
            n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000)
                usage_exit();
        } else if (strcmp(argv[i], "--seed") == 0) {
            seed = strtol(argv[++i], &end, 10);
            if (*end || seed < 0)
                usage_exit();
        } else if (strcmp(argv[i], "--problems") == 0) {
            problems = argv[++i];
        } else {
            usage_exit();
        }
    }
    printf("# SYNTHETIC schedule table: made-up cost model (bench/schedule_synth.c), nothing "
           "measured\n");
    printf("# command: schedule_synth --n %ld --seed %ld --problems '%s'\n", n, seed, problems);
    printf("collective\tschedule\taimed_cell\tmeasured_cell\tverdict");
    for (int s = 0; s < N_SIZES; s++)
        printf("\tus_%s\tref_%s", sizes[s], sizes[s]);
    printf("\n");
    char list[512];
    snprintf(list, sizeof list, "%s", problems);
    char *save = NULL;
    for (char *name = strtok_r(list, " ,", &save); name; name = strtok_r(NULL, " ,", &save)) {
        int c = kv_sched_coll_parse(name);
        if (c < 0) {
            fprintf(stderr, "schedule_synth: %s is not a collective with schedules\n", name);
            return 2;
        }
        kv_rng rng;
        kv_rng_seed(&rng, (uint64_t)seed * 7919u + (uint64_t)c);
        char(*seen)[KV_SCHED_TEXT_MAX] = calloc((size_t)n, KV_SCHED_TEXT_MAX);
        if (!seen)
            return 1;
        long got = 0;
        /* the default first (the search's seed), then random points */
        for (long tries = 0; got < n && tries < 100 * n; tries++) {
            kv_schedule s;
            if (tries == 0)
                kv_sched_default((kv_sched_coll)c, &s);
            else
                kv_sched_random((kv_sched_coll)c, 0, &rng, &s);
            char text[KV_SCHED_TEXT_MAX];
            if (kv_sched_format(&s, text, sizeof text) != 0)
                continue;
            int dup = 0;
            for (long k = 0; k < got && !dup; k++)
                dup = strcmp(seen[k], text) == 0;
            if (dup)
                continue;
            memcpy(seen[got++], text, sizeof text);
            for (char *q = text; *q; q++) /* one line: sections end at ';' */
                if (*q == '\n')
                    *q = ';';
            uint64_t h = fnv(text, 1469598103934665603ull);
            int aimed = kv_sched_cell(&s), measured = aimed;
            char an[KV_CELL_NAME_MAX], mn[KV_CELL_NAME_MAX];
            kv_cell_name(aimed, an);
            double u = unit(h ^ 0x5eed);
            const char *verdict = u < 0.04 ? "mismatch" : u < 0.05 ? "timeout" : "ok";
            if (unit(h ^ 0xce11) < 0.03)
                measured = kv_cell_index(KV_TRANSPORT_SM, KV_FUSION_UNFUSED);
            kv_cell_name(measured, mn);
            printf("%s\t%s\t%s\t%s\t%s", name, text, an, strcmp(verdict, "ok") ? "-" : mn, verdict);
            static const double refvol[] = {2 * (W - 1) / W, (W - 1) / W, (W - 1) / W,
                                            (W - 1) / W,     1.0,         1.25 * (W - 1) / W};
            for (int z = 0; z < N_SIZES; z++) {
                double ref = 18 + size_bytes[z] * refvol[c] / 240e3;
                ref *= exp(0.02 * (unit(h * 3 + (uint64_t)z) - 0.5));
                if (strcmp(verdict, "ok") != 0)
                    printf("\t-\t%.2f", ref);
                else
                    printf("\t%.2f\t%.2f", model_us(&s, size_bytes[z], h + (uint64_t)z), ref);
            }
            printf("\n");
        }
        free(seen);
    }
    return 0;
}
