/* test_schedule_gen.c — kv_sched_generate on the CPU: hand-built schedules of every
 * collective and every implemented combination (direct, ring and tree algos; sm4/sm8/sm16, tma,
 * ce; simple and ll; pull and push; chunk 0 and chunked; sync grid and cta; launch fused and
 * split), each
 *  - generated twice: the same bytes (generation is deterministic);
 *  - its `// kevo:schedule` line parses back to the same schedule (kv_sched_from_source);
 *  - no multicast (multimem, cuMulticast) in its text;
 *  - compiled with the evaluator's flags (nvcc, sm_90a, W = 2, 4, 8 instances), warning-free,
 *    and its compiled evidence in the cell its kevo:pattern line aims at (ce: copies present);
 * and nvls schedules generated (compile-only: multimem through ncclGetLsaMultimemPointer, cell
 * nvls/...); 60 random schedules per collective (nvls off) all generatable and generated. sync=chunk,
 * proto=ll128 and ring/tree cases follow the list's first part.
 *
 * Compiling all 98 takes about 5 minutes on 2 cores (the compile pool uses every core);
 * KEVO_SCHED_GEN_QUICK=1 compiles only the schedules marked `ci` below (every collective and
 * every transport, 33 of them). Without nvcc the compiles are skipped. KEVO_SCHED_GEN_DUMP=<dir>
 * writes the generated sources there, for reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/checks/classify.h"
#include "evaluator/evaluator.h"
#include "mutate/schedule.h"
#include "test.h"
#include "test_util.h"

/* ---- building schedules ------------------------------------------------------------------- */

typedef struct {
    kv_sched_kind kind;
    kv_sched_dir dir;
    kv_sched_xport xport;
    kv_sched_proto proto;
    uint32_t chunk;
    int inflight;
    kv_sched_sync sync;
    kv_sched_order order;
    kv_sched_fuse fuse;
    kv_sched_algo algo;
} ph;

static ph P(kv_sched_kind k, kv_sched_dir d, kv_sched_xport x, kv_sched_proto pr, uint32_t chunk,
            int inflight, kv_sched_sync sy)
{
    ph p = {k, d, x, pr, chunk, inflight, sy, KV_ORDER_RING, KV_FUSE_NONE, KV_ALGO_DIRECT};
    return p;
}

static ph with_order(ph p, kv_sched_order o)
{
    p.order = o;
    return p;
}

static ph with_fuse(ph p)
{
    p.fuse = KV_FUSE_QUANT;
    return p;
}

static ph with_algo(ph p, kv_sched_algo a)
{
    p.algo = a;
    return p;
}

static kv_schedule S(kv_sched_coll c, int threads, int ctas, kv_sched_launch l, int n, ph a, ph b)
{
    kv_schedule s;
    memset(&s, 0, sizeof s);
    s.coll = c;
    s.threads = threads;
    s.ctas = ctas;
    s.launch = l;
    s.ll_max = 256 * 1024;
    s.n_phases = n;
    const ph *in[2] = {&a, &b};
    for (int i = 0; i < n; i++) {
        kv_sched_phase *p = &s.phase[i];
        p->kind = in[i]->kind;
        p->algo = in[i]->algo;
        p->dir = in[i]->dir;
        p->xport = in[i]->xport;
        p->proto = in[i]->proto;
        p->chunk = in[i]->chunk;
        p->inflight = in[i]->inflight;
        p->sync = in[i]->sync;
        p->order = in[i]->order;
        p->fuse = in[i]->fuse;
    }
    return s;
}

#define PULL KV_DIR_PULL
#define PUSH KV_DIR_PUSH
#define SM4 KV_XP_SM4
#define SM8 KV_XP_SM8
#define SM16 KV_XP_SM16
#define TMA KV_XP_TMA
#define CE KV_XP_CE
#define NVLS KV_XP_NVLS
#define SIMPLE KV_PROTO_SIMPLE
#define LL KV_PROTO_LL
#define LL128 KV_PROTO_LL128
#define GRID KV_SYNC_GRID
#define CTA KV_SYNC_CTA
#define CHUNK KV_SYNC_CHUNK
#define FUSED KV_LAUNCH_FUSED
#define SPLIT KV_LAUNCH_SPLIT
#define KB 1024u
static const ph none = {0};

typedef struct {
    kv_schedule s;
    int ci; /* compiled by default */
} tcase;

static int build_cases(tcase *t)
{
    int n = 0;
#define ADD(ci_, ...) (t[n].s = S(__VA_ARGS__), t[n].ci = (ci_), n++)
    /* allreduce */
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 1, P(KV_PH_AR, PULL, SM16, SIMPLE, 0, 8, GRID), none);
    /* nvls (multimem; compile-only: the evaluator refuses to run them) */
    ADD(1, KV_SC_ALLREDUCE, 256, 2, FUSED, 1, P(KV_PH_AR, PULL, NVLS, SIMPLE, 0, 4, GRID), none);
    ADD(1, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, P(KV_PH_RS, PULL, NVLS, SIMPLE, 0, 4, GRID),
        P(KV_PH_AG, PUSH, NVLS, SIMPLE, 0, 4, GRID));
    ADD(1, KV_SC_ALLREDUCE, 256, 2, SPLIT, 2, P(KV_PH_RS, PULL, NVLS, SIMPLE, 0, 4, GRID),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID));
    ADD(1, KV_SC_ALLGATHER, 256, 2, FUSED, 1, P(KV_PH_AG, PUSH, NVLS, SIMPLE, 0, 4, GRID), none);
    ADD(1, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, P(KV_PH_RS, PULL, NVLS, SIMPLE, 64 * KB, 4, GRID),
        none);
    ADD(0, KV_SC_ALLREDUCE, 512, 2, FUSED, 1, P(KV_PH_AR, PUSH, SM16, SIMPLE, 0, 4, CTA), none);
    ADD(1, KV_SC_ALLREDUCE, 512, 1, FUSED, 1, P(KV_PH_AR, PUSH, SM8, LL, 0, 2, CTA), none);
    ADD(0, KV_SC_ALLREDUCE, 256, 1, FUSED, 1, P(KV_PH_AR, PULL, TMA, SIMPLE, 16 * KB, 2, GRID),
        none);
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 1, P(KV_PH_AR, PUSH, CE, SIMPLE, 0, 2, GRID), none);
    ADD(0, KV_SC_ALLREDUCE, 128, 4, FUSED, 1, P(KV_PH_AR, PUSH, TMA, SIMPLE, 8 * KB, 4, CTA), none);
    ADD(1, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 4, CTA),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, CTA));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PULL, SM8, SIMPLE, 64 * KB, 8, CTA),
        P(KV_PH_AG, PULL, SM8, SIMPLE, 64 * KB, 8, CTA));
    ADD(0, KV_SC_ALLREDUCE, 1024, 1, SPLIT, 2, P(KV_PH_RS, PUSH, SM4, SIMPLE, 0, 16, GRID),
        P(KV_PH_AG, PULL, SM4, SIMPLE, 0, 16, GRID));
    ADD(1, KV_SC_ALLREDUCE, 256, 1, FUSED, 2, P(KV_PH_RS, PULL, TMA, SIMPLE, 16 * KB, 2, CTA),
        P(KV_PH_AG, PUSH, TMA, SIMPLE, 16 * KB, 2, CTA));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PUSH, CE, SIMPLE, 0, 2, GRID),
        P(KV_PH_AG, PULL, CE, SIMPLE, 0, 1, GRID));
    ADD(0, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, P(KV_PH_RS, PUSH, SM16, LL, 0, 4, GRID),
        P(KV_PH_AG, PUSH, SM16, LL, 0, 4, GRID));
    /* sync=cta across different chunks: runs as a grid barrier */
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 4, CTA),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 64 * KB, 4, CTA));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, SPLIT, 2, P(KV_PH_RS, PUSH, SM8, SIMPLE, 4 * KB, 4, CTA),
        with_order(P(KV_PH_AG, PUSH, SM8, SIMPLE, 4 * KB, 4, CTA), KV_ORDER_XOR));
    /* allgather */
    ADD(0, KV_SC_ALLGATHER, 256, 2, FUSED, 1, P(KV_PH_AG, PULL, SM16, SIMPLE, 0, 4, GRID), none);
    ADD(1, KV_SC_ALLGATHER, 512, 2, FUSED, 1,
        with_order(P(KV_PH_AG, PUSH, SM8, SIMPLE, 4 * KB, 8, CTA), KV_ORDER_REV), none);
    ADD(0, KV_SC_ALLGATHER, 128, 1, FUSED, 1, P(KV_PH_AG, PUSH, TMA, SIMPLE, 32 * KB, 4, CTA),
        none);
    ADD(1, KV_SC_ALLGATHER, 256, 2, FUSED, 1, P(KV_PH_AG, PULL, CE, SIMPLE, 0, 2, GRID), none);
    ADD(0, KV_SC_ALLGATHER, 512, 2, FUSED, 1, P(KV_PH_AG, PUSH, SM4, LL, 0, 4, CTA), none);
    ADD(0, KV_SC_ALLGATHER, 256, 2, SPLIT, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, CTA),
        with_order(P(KV_PH_AG, PULL, SM16, SIMPLE, 0, 4, CTA), KV_ORDER_XOR));
    ADD(0, KV_SC_ALLGATHER, 256, 2, FUSED, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, GRID),
        P(KV_PH_AG, PULL, CE, SIMPLE, 0, 4, GRID));
    ADD(0, KV_SC_ALLGATHER, 256, 1, FUSED, 2, P(KV_PH_LOCAL, PULL, SM8, SIMPLE, 0, 2, GRID),
        P(KV_PH_AG, PUSH, TMA, SIMPLE, 8 * KB, 2, GRID));
    /* reducescatter */
    ADD(0, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 8, CTA), none);
    ADD(0, KV_SC_REDUCESCATTER, 512, 2, FUSED, 1, P(KV_PH_RS, PUSH, SM8, SIMPLE, 16 * KB, 4, CTA),
        none);
    ADD(1, KV_SC_REDUCESCATTER, 512, 1, FUSED, 1, P(KV_PH_RS, PUSH, SM16, LL, 0, 2, GRID), none);
    ADD(0, KV_SC_REDUCESCATTER, 256, 1, FUSED, 1, P(KV_PH_RS, PULL, TMA, SIMPLE, 4 * KB, 8, GRID),
        none);
    ADD(1, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, P(KV_PH_RS, PUSH, CE, SIMPLE, 0, 1, GRID), none);
    ADD(0, KV_SC_REDUCESCATTER, 256, 1, FUSED, 1, P(KV_PH_RS, PUSH, TMA, SIMPLE, 16 * KB, 2, CTA),
        none);
    /* alltoall */
    ADD(0, KV_SC_ALLTOALL, 256, 2, FUSED, 1, P(KV_PH_A2A, PULL, SM16, SIMPLE, 0, 4, GRID), none);
    ADD(0, KV_SC_ALLTOALL, 1024, 1, FUSED, 1, P(KV_PH_A2A, PUSH, SM4, SIMPLE, 1024 * KB, 1, CTA),
        none);
    ADD(1, KV_SC_ALLTOALL, 512, 2, FUSED, 1, P(KV_PH_A2A, PUSH, SM8, LL, 0, 2, CTA), none);
    ADD(0, KV_SC_ALLTOALL, 128, 1, FUSED, 1, P(KV_PH_A2A, PULL, TMA, SIMPLE, 64 * KB, 2, GRID),
        none);
    ADD(0, KV_SC_ALLTOALL, 256, 2, FUSED, 1, P(KV_PH_A2A, PUSH, CE, SIMPLE, 0, 4, GRID), none);
    ADD(1, KV_SC_ALLTOALL, 256, 2, SPLIT, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, GRID),
        P(KV_PH_A2A, PUSH, SM16, SIMPLE, 0, 4, CTA));
    ADD(0, KV_SC_ALLTOALL, 256, 2, FUSED, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, GRID),
        P(KV_PH_A2A, PULL, CE, SIMPLE, 0, 1, GRID));
    /* broadcast */
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 1, P(KV_PH_BC, PULL, SM16, SIMPLE, 0, 4, CTA), none);
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 1, P(KV_PH_BC, PUSH, SM8, SIMPLE, 0, 4, GRID), none);
    ADD(1, KV_SC_BROADCAST, 512, 2, FUSED, 1, P(KV_PH_BC, PUSH, SM16, LL, 0, 2, CTA), none);
    ADD(0, KV_SC_BROADCAST, 256, 1, FUSED, 1, P(KV_PH_BC, PULL, TMA, SIMPLE, 16 * KB, 2, CTA),
        none);
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 1, P(KV_PH_BC, PULL, CE, SIMPLE, 0, 2, GRID), none);
    ADD(1, KV_SC_BROADCAST, 256, 2, FUSED, 2, P(KV_PH_SCATTER, PULL, SM16, SIMPLE, 0, 4, CTA),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, CTA));
    ADD(0, KV_SC_BROADCAST, 256, 2, SPLIT, 2, P(KV_PH_SCATTER, PULL, CE, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PULL, CE, SIMPLE, 0, 1, GRID));
    ADD(0, KV_SC_BROADCAST, 256, 1, FUSED, 2, P(KV_PH_SCATTER, PUSH, TMA, SIMPLE, 8 * KB, 2, CTA),
        P(KV_PH_AG, PULL, TMA, SIMPLE, 8 * KB, 2, CTA));
    ADD(0, KV_SC_BROADCAST, 512, 2, FUSED, 2, P(KV_PH_SCATTER, PULL, SM16, SIMPLE, 0, 4, GRID),
        P(KV_PH_AG, PUSH, SM16, LL, 0, 4, GRID));
    /* fp8_allgather */
    ADD(1, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, CTA),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, CTA));
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 2, SPLIT, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PULL, SM8, SIMPLE, 0, 4, GRID));
    ADD(1, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 1,
        with_fuse(P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 1, GRID)), none);
    ADD(0, KV_SC_FP8_ALLGATHER, 512, 1, FUSED, 1,
        with_fuse(P(KV_PH_AG, PULL, SM8, SIMPLE, 8 * KB, 1, CTA)), none);
    ADD(0, KV_SC_FP8_ALLGATHER, 512, 2, FUSED, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PUSH, SM16, LL, 0, 2, GRID));
    ADD(1, KV_SC_FP8_ALLGATHER, 256, 1, FUSED, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PULL, TMA, SIMPLE, 8 * KB, 2, GRID));
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 2, P(KV_PH_QUANT, PULL, SM4, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PULL, CE, SIMPLE, 0, 1, GRID));
    /* sync=chunk: per-chunk flags between rs/scatter and the ag that reads it (simple, ll;
     * pull, push), at the call's ends and after a local copy (CTA barriers), across a kernel
     * boundary, and where the partitions differ (a grid barrier) */
    ADD(1, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, P(KV_PH_RS, PULL, SM16, SIMPLE, 16 * KB, 4, CHUNK),
        P(KV_PH_AG, PULL, SM16, SIMPLE, 16 * KB, 4, CHUNK));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PUSH, SM8, SIMPLE, 8 * KB, 2, CHUNK),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 8 * KB, 4, GRID));
    ADD(0, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, P(KV_PH_RS, PUSH, SM16, LL, 64 * KB, 4, CHUNK),
        P(KV_PH_AG, PUSH, SM16, LL, 64 * KB, 4, CHUNK));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, SPLIT, 2, P(KV_PH_RS, PULL, SM16, SIMPLE, 16 * KB, 4, CHUNK),
        P(KV_PH_AG, PULL, SM16, SIMPLE, 16 * KB, 4, CTA));
    ADD(0, KV_SC_ALLREDUCE, 256, 1, FUSED, 2, P(KV_PH_RS, PULL, TMA, SIMPLE, 16 * KB, 4, CHUNK),
        P(KV_PH_AG, PULL, SM4, SIMPLE, 16 * KB, 4, CHUNK));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 1, P(KV_PH_AR, PULL, SM16, SIMPLE, 32 * KB, 4, CHUNK),
        none);
    ADD(0, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, P(KV_PH_RS, PUSH, SM16, SIMPLE, 4 * KB, 4, CHUNK),
        none);
    ADD(1, KV_SC_ALLGATHER, 256, 2, FUSED, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 64 * KB, 4, CHUNK),
        P(KV_PH_AG, PUSH, SM8, SIMPLE, 8 * KB, 4, CHUNK));
    ADD(0, KV_SC_ALLTOALL, 256, 2, FUSED, 1, P(KV_PH_A2A, PUSH, SM16, LL, 16 * KB, 4, CHUNK), none);
    ADD(1, KV_SC_BROADCAST, 256, 2, FUSED, 2,
        P(KV_PH_SCATTER, PUSH, SM16, SIMPLE, 16 * KB, 4, CHUNK),
        P(KV_PH_AG, PULL, SM16, SIMPLE, 16 * KB, 4, CHUNK));
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 1, P(KV_PH_BC, PULL, TMA, SIMPLE, 16 * KB, 4, CHUNK),
        none);
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 2,
        P(KV_PH_QUANT, PULL, SM16, SIMPLE, 8 * KB, 1, CHUNK),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 8 * KB, 4, CHUNK));
    /* proto=ll128: the phases ll supports (copies, sums, bc with acknowledgements) */
    ADD(1, KV_SC_ALLREDUCE, 512, 2, FUSED, 1, P(KV_PH_AR, PUSH, SM16, LL128, 0, 4, CTA), none);
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PUSH, SM8, LL128, 0, 4, CTA),
        P(KV_PH_AG, PUSH, SM8, LL128, 0, 4, GRID));
    ADD(0, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, P(KV_PH_RS, PUSH, SM4, LL128, 8 * KB, 2, CHUNK),
        none);
    ADD(1, KV_SC_ALLGATHER, 512, 2, FUSED, 1, P(KV_PH_AG, PUSH, SM16, LL128, 0, 4, CTA), none);
    ADD(0, KV_SC_ALLTOALL, 256, 2, SPLIT, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, GRID),
        P(KV_PH_A2A, PUSH, SM16, LL128, 0, 4, GRID));
    ADD(1, KV_SC_BROADCAST, 256, 2, FUSED, 1, P(KV_PH_BC, PUSH, SM16, LL128, 0, 4, CTA), none);
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 2,
        P(KV_PH_SCATTER, PULL, SM16, SIMPLE, 16 * KB, 4, CHUNK),
        P(KV_PH_AG, PUSH, SM16, LL128, 16 * KB, 4, CTA));
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, GRID),
        P(KV_PH_AG, PUSH, SM8, LL128, 0, 4, GRID));
    /* algo=ring (rs, ag, bc) and tree (bc): pull and push, sm and tma, chunked and not, every
     * collective and phase sequence that has them, orders ring and rev (xor runs ring) */
#define RING(p) with_algo(p, KV_ALGO_RING)
#define TREE(p) with_algo(p, KV_ALGO_TREE)
    ADD(1, KV_SC_ALLGATHER, 256, 2, FUSED, 1, RING(P(KV_PH_AG, PULL, SM16, SIMPLE, 0, 4, GRID)),
        none);
    ADD(0, KV_SC_ALLGATHER, 512, 2, FUSED, 1,
        with_order(RING(P(KV_PH_AG, PUSH, SM8, SIMPLE, 16 * KB, 4, CTA)), KV_ORDER_REV), none);
    ADD(1, KV_SC_ALLGATHER, 256, 1, FUSED, 1,
        RING(P(KV_PH_AG, PUSH, TMA, SIMPLE, 16 * KB, 2, GRID)), none);
    ADD(0, KV_SC_ALLGATHER, 256, 2, SPLIT, 2, P(KV_PH_LOCAL, PULL, SM16, SIMPLE, 0, 4, CTA),
        with_order(RING(P(KV_PH_AG, PULL, SM4, SIMPLE, 0, 8, GRID)), KV_ORDER_XOR));
    ADD(1, KV_SC_REDUCESCATTER, 256, 2, FUSED, 1, RING(P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 4, GRID)),
        none);
    ADD(0, KV_SC_REDUCESCATTER, 512, 2, FUSED, 1,
        with_order(RING(P(KV_PH_RS, PUSH, SM8, SIMPLE, 8 * KB, 4, CHUNK)), KV_ORDER_REV), none);
    ADD(1, KV_SC_REDUCESCATTER, 256, 1, FUSED, 1,
        RING(P(KV_PH_RS, PUSH, TMA, SIMPLE, 16 * KB, 2, CTA)), none);
    ADD(0, KV_SC_REDUCESCATTER, 256, 1, FUSED, 1,
        RING(P(KV_PH_RS, PULL, TMA, SIMPLE, 8 * KB, 4, GRID)), none);
    ADD(1, KV_SC_ALLREDUCE, 512, 2, FUSED, 2, RING(P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 4, GRID)),
        RING(P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID)));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, SPLIT, 2,
        RING(P(KV_PH_RS, PUSH, SM16, SIMPLE, 32 * KB, 4, GRID)),
        RING(P(KV_PH_AG, PULL, SM8, SIMPLE, 32 * KB, 4, CTA)));
    ADD(0, KV_SC_ALLREDUCE, 256, 1, FUSED, 2,
        RING(P(KV_PH_RS, PUSH, TMA, SIMPLE, 16 * KB, 2, GRID)),
        P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID));
    ADD(0, KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PULL, SM16, SIMPLE, 0, 4, GRID),
        RING(P(KV_PH_AG, PULL, TMA, SIMPLE, 16 * KB, 2, GRID)));
    ADD(1, KV_SC_BROADCAST, 256, 2, FUSED, 1, RING(P(KV_PH_BC, PULL, SM16, SIMPLE, 0, 4, GRID)),
        none);
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 1,
        with_order(RING(P(KV_PH_BC, PUSH, SM8, SIMPLE, 64 * KB, 4, CTA)), KV_ORDER_REV), none);
    ADD(0, KV_SC_BROADCAST, 256, 1, FUSED, 1,
        RING(P(KV_PH_BC, PUSH, TMA, SIMPLE, 16 * KB, 2, GRID)), none);
    ADD(1, KV_SC_BROADCAST, 256, 2, FUSED, 1, TREE(P(KV_PH_BC, PUSH, SM16, SIMPLE, 0, 4, CTA)),
        none);
    ADD(0, KV_SC_BROADCAST, 512, 2, FUSED, 1,
        TREE(P(KV_PH_BC, PULL, SM16, SIMPLE, 16 * KB, 8, CHUNK)), none);
    ADD(1, KV_SC_BROADCAST, 256, 1, FUSED, 1,
        with_order(TREE(P(KV_PH_BC, PULL, TMA, SIMPLE, 32 * KB, 2, GRID)), KV_ORDER_REV), none);
    ADD(0, KV_SC_BROADCAST, 256, 2, FUSED, 2, P(KV_PH_SCATTER, PULL, SM16, SIMPLE, 0, 4, GRID),
        RING(P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID)));
    ADD(1, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 1,
        with_fuse(RING(P(KV_PH_AG, PULL, SM16, SIMPLE, 0, 1, GRID))), none);
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 2, FUSED, 1,
        with_fuse(RING(P(KV_PH_AG, PUSH, SM8, SIMPLE, 8 * KB, 1, CTA))), none);
    ADD(0, KV_SC_FP8_ALLGATHER, 256, 1, FUSED, 2, P(KV_PH_QUANT, PULL, SM16, SIMPLE, 0, 1, GRID),
        RING(P(KV_PH_AG, PULL, TMA, SIMPLE, 8 * KB, 2, GRID)));
#undef RING
#undef TREE
#undef ADD
    return n;
}

/* ---- checks -------------------------------------------------------------------------------- */

typedef struct {
    char text[KV_SCHED_TEXT_MAX];
    char *src;
    size_t len;
    char cell[32]; /* "transport/fusion" of the kevo:pattern line */
    uint64_t ticket;
    int submitted;
} gcase;

static void pattern_cell(const char *src, char *out, size_t cap)
{
    out[0] = 0;
    const char *p = strstr(src, "// kevo:pattern ");
    if (!p)
        return;
    char t[16] = "", f[16] = "";
    const char *tp = strstr(p, "transport="), *fp = strstr(p, "fusion=");
    if (tp && fp && sscanf(tp, "transport=%15[a-z]", t) == 1 &&
        sscanf(fp, "fusion=%15[a-z]", f) == 1)
        snprintf(out, cap, "%s/%s", t, f);
}

static void check_generated(const tcase *tc, gcase *g)
{
    kv_err err = {{0}};
    KV_REQUIRE(kv_sched_format(&tc->s, g->text, sizeof g->text) == 0);
    int rc = kv_sched_generate(&tc->s, &g->src, &g->len, &err);
    KV_CHECKF(rc == 0, "%s: %s", g->text, err.msg);
    if (rc != 0)
        return;
    KV_CHECK(strlen(g->src) == g->len);
    /* deterministic */
    char *again = NULL;
    size_t n2 = 0;
    KV_REQUIRE(kv_sched_generate(&tc->s, &again, &n2, &err) == 0);
    KV_CHECKF(n2 == g->len && memcmp(again, g->src, n2) == 0, "%s: two generations differ",
              g->text);
    free(again);
    /* the header names the schedule, and it parses back */
    kv_schedule back;
    rc = kv_sched_from_source(g->src, g->len, &back, &err);
    KV_CHECKF(rc == 1, "%s: kevo:schedule line: rc %d %s", g->text, rc, err.msg);
    KV_CHECKF(rc != 1 || kv_sched_equal(&back, &tc->s), "%s: the header's schedule differs",
              g->text);
    KV_CHECK(strstr(g->src, "generated by kevo from a schedule") != NULL);
    KV_CHECK(strstr(g->src, "//  phase 1 (") != NULL);
    int nvls = 0;
    for (int i = 0; i < tc->s.n_phases; i++)
        nvls |= tc->s.phase[i].xport == KV_XP_NVLS;
    KV_CHECKF(nvls || (strstr(g->src, "multimem") == NULL && strstr(g->src, "cuMulticast") == NULL),
              "%s: multicast in a schedule without nvls", g->text);
    KV_CHECKF(!nvls || strstr(g->src, "ncclGetLsaMultimemPointer") != NULL,
              "%s: nvls without a multicast pointer", g->text);
    KV_CHECKF(strstr(g->src, "call_index") == NULL, "%s: reads call_index", g->text);
    pattern_cell(g->src, g->cell, sizeof g->cell);
    KV_CHECKF(g->cell[0] != 0, "%s: no kevo:pattern line", g->text);
}

static void check_compiled(const gcase *g, const kv_compile_result *r)
{
    KV_CHECKF(r->status == KV_COMPILE_OK, "%s does not compile:\n%s\n--- source ---\n%s", g->text,
              kv_test_str(r->errors), g->src);
    if (r->status != KV_COMPILE_OK)
        return;
    KV_CHECKF(strstr(kv_test_str(r->report), "warning") == NULL, "%s: warnings:\n%s", g->text,
              r->report);
    kv_evidence ev = {0};
    ev.sass = r->sass;
    ev.ptx = r->ptx;
    ev.imports = r->imports;
    ev.source = g->src;
    kv_class c;
    kv_err err = {{0}};
    KV_REQUIRE(kv_classify(&ev, &c, &err) == 0);
    char got[KV_CELL_NAME_MAX];
    kv_cell_name(kv_cell_index(c.transport, c.fusion), got);
    if (strncmp(g->cell, "ce/", 3) == 0 || strstr(g->src, "cudaMemcpyAsync(d + lo")) {
        /* copies to peers show in the captured graph; statically, they must be there */
        KV_CHECKF(c.uses_copy_engine, "%s aims at %s but imports no cudaMemcpy*", g->text, g->cell);
        KV_CHECKF(strstr(g->cell, "/unfused") != NULL, "%s: ce phases are unfused", g->text);
    } else {
        KV_CHECKF(strcmp(g->cell, got) == 0, "%s aims at %s, its compiled evidence says %s: %s",
                  g->text, g->cell, got, c.evidence_json);
    }
    KV_CHECKF(c.uses_nvls == (strncmp(g->cell, "nvls/", 5) == 0), "%s: uses_nvls %d, aims at %s",
              g->text, c.uses_nvls, g->cell);
    char line[96];
    snprintf(line, sizeof line, "%.95s", g->text);
    for (char *c2 = line; *c2; c2++)
        if (*c2 == '\n')
            *c2 = ' ';
    printf("%-10s %-12s %5.1f s  %s\n", got, g->cell, r->seconds, line);
    kv_class_free(&c);
}

static void test_unsupported(void)
{
    kv_err err = {{0}};
    char *src = NULL;
    size_t n = 0;
    /* nvls is generated now (compile-only) */
    kv_schedule s[3];
    s[0] = S(KV_SC_ALLREDUCE, 256, 2, FUSED, 1, P(KV_PH_AR, PULL, KV_XP_NVLS, SIMPLE, 0, 4, GRID),
             none);
    s[1] = S(KV_SC_ALLREDUCE, 256, 2, FUSED, 2, P(KV_PH_RS, PULL, KV_XP_NVLS, SIMPLE, 0, 4, GRID),
             P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID));
    s[2] = S(KV_SC_ALLGATHER, 256, 2, FUSED, 1, P(KV_PH_AG, PUSH, KV_XP_NVLS, SIMPLE, 0, 4, GRID),
             none);
    for (int i = 0; i < 3; i++) {
        KV_CHECKF(kv_sched_check(&s[i], &err) == 0, "case %d: %s", i, err.msg);
        KV_CHECKF(kv_sched_generatable(&s[i], &err) == 0, "case %d: %s", i, err.msg);
        KV_CHECKF(kv_sched_generate(&s[i], &src, &n, &err) == 0 && src != NULL, "case %d: %s", i,
                  err.msg);
        KV_CHECK(src == NULL || strstr(src, "ncclGetLsaMultimemPointer") != NULL);
        free(src);
        src = NULL;
    }
    /* ring and tree are generated now */
    kv_schedule ok[2];
    ok[0] = S(KV_SC_ALLGATHER, 256, 2, FUSED, 1,
              with_algo(P(KV_PH_AG, PUSH, SM16, SIMPLE, 0, 4, GRID), KV_ALGO_RING), none);
    ok[1] = S(KV_SC_BROADCAST, 256, 2, FUSED, 1,
              with_algo(P(KV_PH_BC, PUSH, SM16, SIMPLE, 0, 4, GRID), KV_ALGO_TREE), none);
    for (int i = 0; i < 2; i++) {
        KV_CHECKF(kv_sched_generatable(&ok[i], &err) == 0, "%s", err.msg);
        KV_CHECKF(kv_sched_generate(&ok[i], &src, &n, &err) == 0 && src != NULL, "%s", err.msg);
        free(src);
        src = NULL;
    }
    /* an invalid schedule is refused by the check */
    kv_schedule bad =
        S(KV_SC_ALLREDUCE, 256, 2, SPLIT, 1, P(KV_PH_AR, PULL, SM16, SIMPLE, 0, 4, GRID), none);
    KV_CHECK(kv_sched_generate(&bad, &src, &n, &err) == -1 && src == NULL);
}

/* 60 random schedules per collective (nvls off, a fixed seed): every one is generatable and
 * generates (no compile: fast). */
static void test_random(void)
{
    kv_rng rng;
    kv_rng_seed(&rng, 20261128);
    int rings = 0;
    for (int c = 0; c < KV_SC_COUNT; c++)
        for (int k = 0; k < 60; k++) {
            kv_schedule s;
            kv_sched_random((kv_sched_coll)c, 0, &rng, &s);
            char text[KV_SCHED_TEXT_MAX];
            KV_REQUIRE(kv_sched_format(&s, text, sizeof text) == 0);
            kv_err err = {{0}};
            KV_CHECKF(kv_sched_generatable(&s, &err) == 0, "%s: %s", text, err.msg);
            char *src = NULL;
            size_t n = 0;
            KV_CHECKF(kv_sched_generate(&s, &src, &n, &err) == 0 && src && n > 0, "%s: %s", text,
                      err.msg);
            free(src);
            for (int i = 0; i < s.n_phases; i++)
                rings += s.phase[i].algo != KV_ALGO_DIRECT;
        }
    printf("random: %d ring or tree phases among %d schedules\n", rings, 60 * KV_SC_COUNT);
    KV_CHECK(rings > 0);
}

static void test_cases(const char *root)
{
    static tcase cases[160];
    static gcase gen[160];
    const int n = build_cases(cases);
    printf("%d schedules\n", n);
    KV_CHECK(n >= 40);
    const char *dump = getenv("KEVO_SCHED_GEN_DUMP"); /* a folder: the sources, for reading */
    for (int i = 0; i < n; i++) {
        check_generated(&cases[i], &gen[i]);
        if (dump && *dump && gen[i].src) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%02d_%s.cu", dump, i,
                     kv_sched_coll_name(cases[i].s.coll));
            FILE *f = fopen(path, "w");
            if (f) {
                fwrite(gen[i].src, 1, gen[i].len, f);
                fclose(f);
            }
        }
    }

    kv_compile_opts o;
    kv_compile_defaults(&o, root);
    if (!o.nvcc[0] || access(o.nvcc, X_OK) != 0) {
        printf("skipped: the compiles (no nvcc)\n");
    } else {
        const char *quick = getenv("KEVO_SCHED_GEN_QUICK");
        const int every = !(quick && *quick && strcmp(quick, "0") != 0);
        kv_test_fresh_dir(o.cache_dir, sizeof o.cache_dir, "sched-gen-cache");
        o.jobs = 0; /* every core */
        o.timeout_s = 600;
        kv_err err = {{0}};
        kv_compile_pool *pool;
        KV_REQUIRE(kv_compile_pool_new(&o, &pool, &err) == 0);
        int submitted = 0;
        for (int i = 0; i < n; i++)
            if (gen[i].src && (every || cases[i].ci)) {
                KV_REQUIRE(kv_compile_submit(pool, gen[i].src, gen[i].len, &gen[i].ticket, &err) ==
                           0);
                gen[i].submitted = 1;
                submitted++;
            }
        printf("compiling %d of them (KEVO_SCHED_GEN_QUICK=1: the ci ones)\n", submitted);
        KV_CHECKF(kv_compile_wait_all(pool, &err) == 0, "%s", err.msg);
        uint64_t t;
        kv_compile_result r;
        while (kv_compile_take(pool, &t, &r) == 0) {
            for (int i = 0; i < n; i++)
                if (gen[i].submitted && gen[i].ticket == t)
                    check_compiled(&gen[i], &r);
            kv_compile_result_free(&r);
        }
        kv_compile_pool_free(pool);
    }
    for (int i = 0; i < n; i++)
        free(gen[i].src);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const char *src = getenv("KEVO_SOURCE_DIR");
    kv_test_current = "unsupported";
    test_unsupported();
    kv_test_current = "random";
    test_random();
    kv_test_current = "cases";
    test_cases(src ? src : ".");
    return kv_test_summary();
}
