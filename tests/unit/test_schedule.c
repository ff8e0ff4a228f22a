/* test_schedule.c — the schedule language (mutate/schedule.h,
 * docs/schedules.md): the text form and its errors, the invariants, the
 * defaults, the space (its size against counts made another way, and the
 * random draw's coverage), the cells, the moves and kv_sched_from_source. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cell.h"
#include "common/fsutil.h"
#include "mutate/schedule.h"
#include "test.h"

static const char *const coll_name[KV_SC_COUNT] = {"allreduce", "allgather", "reducescatter",
                                                   "alltoall",  "broadcast", "fp8_allgather"};

static int fmt(const kv_schedule *s, char *buf)
{
    return kv_sched_format(s, buf, KV_SCHED_TEXT_MAX);
}

/* format(parse(format(s))) == format(s), and the parse equals s. */
static void check_round_trip(const kv_schedule *s)
{
    char a[KV_SCHED_TEXT_MAX], b[KV_SCHED_TEXT_MAX];
    KV_REQUIRE(fmt(s, a) == 0);
    kv_schedule t;
    kv_err err = {{0}};
    KV_CHECKF(kv_sched_parse(a, &t, &err) == 0, "%s: %s", a, err.msg);
    KV_REQUIRE(fmt(&t, b) == 0);
    KV_CHECKF(strcmp(a, b) == 0, "%s\n  !=\n%s", a, b);
    KV_CHECK(kv_sched_equal(s, &t));
    KV_CHECK(memcmp(s, &t, sizeof t) == 0 || kv_sched_equal(s, &t));
}

static void test_names(void)
{
    for (int c = 0; c < KV_SC_COUNT; c++) {
        KV_CHECK(strcmp(kv_sched_coll_name((kv_sched_coll)c), coll_name[c]) == 0);
        KV_CHECK(kv_sched_coll_parse(coll_name[c]) == c);
    }
    KV_CHECK(kv_sched_coll_parse("gemm_allreduce") == -1);
    KV_CHECK(kv_sched_coll_parse(NULL) == -1);
    KV_CHECK(strcmp(kv_sched_kind_name(KV_PH_SCATTER), "scatter") == 0);
    KV_CHECK(strcmp(kv_sched_move_name(KV_SMOVE_XPORT), "xport") == 0);
    KV_CHECK(strcmp(kv_sched_move_name(KV_SMOVE_JUMP), "jump") == 0);
    char t[24];
    kv_sched_field_text(KV_SF_LL_MAX, 8, t, sizeof t);
    KV_CHECK(strcmp(t, "4M") == 0);
    kv_sched_field_text(KV_SF_CHUNK, 0, t, sizeof t);
    KV_CHECK(strcmp(t, "0") == 0);
    kv_sched_field_text(KV_SF_CHUNK, 9, t, sizeof t);
    KV_CHECK(strcmp(t, "1M") == 0);
    kv_sched_field_text(KV_SF_CHUNK, 7, t, sizeof t);
    KV_CHECK(strcmp(t, "256K") == 0);
}

static void test_defaults(void)
{
    static const char *const want[KV_SC_COUNT] = {
        "allreduce threads=512 ctas=2 launch=fused ll_max=256K; "
        "rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none; "
        "ag algo=direct dir=push xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none",
        "allgather threads=512 ctas=2 launch=fused ll_max=256K; "
        "ag algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none",
        "reducescatter threads=512 ctas=2 launch=fused ll_max=256K; "
        "rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none",
        "alltoall threads=512 ctas=2 launch=fused ll_max=256K; "
        "a2a algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none",
        "broadcast threads=512 ctas=2 launch=fused ll_max=256K; "
        "bc algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=none",
        "fp8_allgather threads=512 ctas=2 launch=fused ll_max=256K; "
        "ag algo=direct dir=push xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring "
        "fuse=quant",
    };
    for (int c = 0; c < KV_SC_COUNT; c++) {
        kv_schedule s;
        char buf[KV_SCHED_TEXT_MAX];
        kv_sched_default((kv_sched_coll)c, &s);
        KV_CHECK(kv_sched_check(&s, NULL) == 0);
        KV_REQUIRE(fmt(&s, buf) == 0);
        KV_CHECKF(strcmp(buf, want[c]) == 0, "%s", buf);
        check_round_trip(&s);
        KV_CHECK(kv_sched_cell(&s) == kv_cell_index(KV_TRANSPORT_SM, KV_FUSION_FUSED));
    }
    /* the doc's example, on three lines, is the default */
    kv_schedule s, d;
    kv_err err = {{0}};
    KV_CHECKF(kv_sched_parse("allreduce threads=512 ctas=2 launch=fused ll_max=256K;\n"
                             "rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 "
                             "sync=cta order=ring fuse=none;\n"
                             "ag algo=direct dir=push xport=sm16 proto=simple chunk=0 inflight=4 "
                             "sync=cta order=ring fuse=none\n",
                             &s, &err) == 0,
              "%s", err.msg);
    kv_sched_default(KV_SC_ALLREDUCE, &d);
    KV_CHECK(kv_sched_equal(&s, &d));
}

/* The default rule for fields left out: the plain values, or what an
 * invariant pins given the fields written. */
static void expect_parse(const char *text, const char *want_part)
{
    kv_schedule s;
    kv_err err = {{0}};
    char buf[KV_SCHED_TEXT_MAX] = "";
    int rc = kv_sched_parse(text, &s, &err);
    KV_CHECKF(rc == 0, "%s: %s", text, err.msg);
    if (rc == 0)
        fmt(&s, buf);
    KV_CHECKF(strstr(buf, want_part) != NULL, "'%s' gives '%s', without '%s'", text, buf,
              want_part);
}

static void test_pinned_defaults(void)
{
    expect_parse("allgather; ag xport=tma", "xport=tma proto=simple chunk=16K inflight=4 sync=cta");
    expect_parse("allgather; ag xport=tma inflight=16", "chunk=8K inflight=16");
    expect_parse("allgather; ag xport=ce",
                 "dir=pull xport=ce proto=simple chunk=0 inflight=4 sync=grid");
    expect_parse("allreduce; ar xport=ce", "ar algo=direct dir=push xport=ce");
    expect_parse("allreduce; rs xport=ce; ag",
                 "rs algo=direct dir=push xport=ce proto=simple chunk=0 inflight=4 sync=grid");
    expect_parse("alltoall; a2a proto=ll", "dir=push xport=sm16 proto=ll");
    expect_parse("fp8_allgather; ag", "fuse=quant");
    expect_parse("fp8_allgather; quant; ag", "ag algo=direct dir=pull xport=sm16 proto=simple "
                                             "chunk=0 inflight=4 sync=cta order=ring fuse=none");
    expect_parse("allgather; local; ag", "local algo=direct dir=pull");
    /* sync: cta unless invariant 8 rules it out between the phases */
    expect_parse("allreduce; rs; ag xport=sm8",
                 "rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=grid");
    expect_parse("allreduce; rs xport=tma; ag xport=tma", "chunk=16K inflight=4 sync=cta");
    expect_parse("allreduce; rs algo=ring; ag",
                 "rs algo=ring dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=grid");
    /* sizes in bytes, K and M; the canonical form writes the shortest */
    expect_parse("allgather ll_max=4194304; ag chunk=16384", "ll_max=4M");
    expect_parse("allgather ll_max=4194304; ag chunk=16384", "chunk=16K");
    expect_parse("allgather ll_max=16K; ag chunk=1M", "chunk=1M");
    /* separators: ';', newline, ';' + newline, a trailing one; spaces */
    expect_parse("  allreduce  threads=128 ;  rs\t;ag  ", "threads=128");
    expect_parse("allreduce\nrs\nag\n", "; ag ");
    expect_parse("allreduce;\r\nrs;\r\nag;\r\n", "; ag ");
    expect_parse("allgather; ag;", "allgather");
}

/* text fails to parse, and the message holds every needle. */
static void expect_error(const char *text, const char *n1, const char *n2)
{
    kv_schedule s;
    kv_err err = {{0}};
    KV_CHECKF(kv_sched_parse(text, &s, &err) == -1, "'%.80s' parsed", text);
    KV_CHECK_STR_CONTAINS(err.msg, n1);
    if (n2)
        KV_CHECK_STR_CONTAINS(err.msg, n2);
}

static void test_invariants(void)
{
    expect_error("allreduce; rs", "(invariant 1)",
                 "not a phase sequence of allreduce (ar | rs ag)");
    expect_error("allgather; ag; local", "(invariant 1)", "phases 'ag local'");
    expect_error("allreduce; ar algo=ring", "phase 1 (ar): algo=ring", "(invariant 2)");
    expect_error("allgather; ag algo=tree", "algo=tree only for bc", "(invariant 2)");
    expect_error("allgather; local dir=push; ag", "phase 1 (local): local work needs dir=pull",
                 "(invariant 3)");
    expect_error("fp8_allgather; quant xport=tma; ag", "phase 1 (quant): local work needs xport",
                 "(invariant 3)");
    expect_error("alltoall; local xport=ce; a2a", "local work needs xport", "(invariant 3)");
    expect_error("allgather; local proto=ll; ag", "local work needs dir=pull", "(invariant 3)");
    expect_error("allgather; ag proto=ll dir=pull", "proto=ll needs dir=push", "(invariant 4)");
    expect_error("allgather; ag proto=ll128 xport=tma chunk=16K", "proto=ll128 needs xport sm4",
                 "(invariant 4)");
    expect_error("broadcast; scatter proto=ll; ag", "proto=ll only for ar, rs, ag, a2a and bc",
                 "(invariant 4)");
    expect_error("broadcast; bc proto=ll algo=ring", "proto=ll needs algo=direct", "(invariant 4)");
    expect_error("allreduce; ar xport=ce dir=pull", "xport=ce on ar needs dir=push",
                 "(invariant 5)");
    expect_error("allgather; ag xport=ce sync=cta", "xport=ce needs sync=grid", "(invariant 5)");
    expect_error("allgather; ag xport=ce chunk=16K", "xport=ce needs chunk=0", "(invariant 5)");
    expect_error("allgather; ag xport=ce algo=ring", "xport=ce needs algo=direct", "(invariant 5)");
    expect_error("fp8_allgather; ag xport=ce", "xport=ce needs fuse=none", "(invariant 5)");
    expect_error("allgather; ag xport=tma chunk=0", "needs a chunk (the tile) of 4K..64K",
                 "(invariant 6)");
    expect_error("allgather; ag xport=tma chunk=128K", "4K..64K, not 128K", "(invariant 6)");
    expect_error("allgather; ag xport=tma chunk=64K inflight=4", "inflight x chunk <= 192K",
                 "(invariant 6)");
    expect_error("alltoall; a2a xport=nvls", "xport=nvls only for ar, rs and ag", "(invariant 7)");
    expect_error("allgather; ag xport=nvls algo=ring", "xport=nvls needs algo=direct",
                 "(invariant 7)");
    expect_error("allreduce; rs xport=sm16 sync=cta; ag xport=sm8",
                 "phase 1 (rs): sync=cta before ag needs both phases on the same SM width",
                 "(invariant 8)");
    expect_error("allreduce; rs xport=tma chunk=16K sync=cta; ag xport=tma chunk=8K",
                 "same SM width or the same TMA tile, not tma then tma", "(invariant 8)");
    expect_error("allreduce; rs sync=cta; ag algo=ring", "needs algo=direct in both",
                 "(invariant 8)");
    expect_error("allreduce; rs chunk=16K sync=chunk; ag chunk=8K",
                 "sync=chunk before ag needs the same chunk in both phases, not 16K then 8K",
                 "(invariant 8)");
    expect_error("reducescatter; rs sync=chunk", "sync=chunk needs a chunk", "(invariant 8)");
    expect_error("fp8_allgather; ag fuse=none", "needs fuse=quant", "(invariant 9)");
    expect_error("allgather; ag fuse=quant", "fuse=quant only on the ag of fp8_allgather",
                 "(invariant 9)");
    expect_error("fp8_allgather; quant; ag fuse=quant", "fuse=quant only", "(invariant 9)");
    expect_error("allgather launch=split; ag", "head (allgather): launch=split needs at least two",
                 "(invariant 10)");
    /* local then ag: the ag does not read the local copy, so no link */
    expect_parse("allgather; local xport=sm4 sync=cta; ag xport=sm8", "xport=sm4");

    /* a struct filled by hand: fields out of their lists */
    kv_schedule s;
    kv_err err = {{0}};
    kv_sched_default(KV_SC_ALLGATHER, &s);
    s.threads = 300;
    KV_CHECK(kv_sched_check(&s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "head (allgather): threads 300: expected 128, 256, 512 or 1024");
    kv_sched_default(KV_SC_ALLGATHER, &s);
    s.phase[0].chunk = 3000;
    KV_CHECK(kv_sched_check(&s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "phase 1 (ag): chunk 3000: expected 0, 4K");
    kv_sched_default(KV_SC_ALLGATHER, &s);
    s.phase[0].xport = (kv_sched_xport)9;
    KV_CHECK(kv_sched_check(&s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "xport 9");
    kv_sched_default(KV_SC_ALLGATHER, &s);
    s.n_phases = 0;
    KV_CHECK(kv_sched_check(&s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "0 phases");
}

static void test_malformed(void)
{
    expect_error("allreduc; rs; ag", "head: unknown collective 'allreduc'",
                 "did you mean 'allreduce'");
    expect_error("gemm; ag", "unknown collective 'gemm'", "expected allreduce, allgather");
    expect_error("allreduce; rs xprt=sm8; ag", "phase 1 (rs): unknown key 'xprt'",
                 "did you mean 'xport'");
    expect_error("allreduce; rs; ag bogus=1", "phase 2 (ag): unknown key 'bogus'", NULL);
    expect_error("allreduce xport=sm8; rs; ag", "head (allreduce): 'xport' is a phase field", NULL);
    expect_error("allreduce; rs threads=128; ag", "phase 1 (rs): 'threads' is a head field", NULL);
    expect_error("allreduce; rs xport=sm8 xport=sm8; ag", "phase 1 (rs): 'xport' is given twice",
                 NULL);
    expect_error("allreduce threads=128 threads=128; rs; ag",
                 "head (allreduce): 'threads' is given twice", NULL);
    expect_error("allreduce; rs xport; ag", "phase 1 (rs): 'xport' is not key=value", NULL);
    expect_error("allreduce; rs =sm8; ag", "'=sm8' is not key=value", NULL);
    expect_error("allreduce; rs xport=; ag", "'xport=' has no value", NULL);
    expect_error("allreduce; rs xport=sm32; ag",
                 "phase 1 (rs): xport 'sm32': expected sm4, sm8, sm16, tma, ce or nvls", NULL);
    expect_error("allreduce; rs chunk=16KB; ag", "phase 1 (rs): chunk '16KB'", "optional K or M");
    expect_error("allreduce; rs chunk=16k; ag", "chunk '16k'", "optional K or M");
    expect_error("allreduce; rs chunk=-4K; ag", "chunk '-4K'", NULL);
    expect_error("allreduce; rs chunk=3K; ag",
                 "chunk '3K': expected 0 or a power of 2 from 4K to 1M", NULL);
    expect_error("allreduce ll_max=8K; rs; ag", "ll_max '8K': expected a power of 2 from 16K to 4M",
                 NULL);
    expect_error("allreduce threads=99999999999999999999; rs; ag", "threads '9999", "expected 128");
    expect_error("allreduce ctas=0; rs; ag", "ctas '0': expected 1, 2, 3 or 4", NULL);
    expect_error("allreduce; rs inflight=3; ag", "inflight '3': expected 1, 2, 4, 8 or 16", NULL);
    expect_error("allreduce; rs;; ag", "phase 2: empty", NULL);
    expect_error("allreduce; ; ag", "phase 1: empty", NULL);
    expect_error("allreduce; rs; ag;;", "phase 3: empty", NULL);
    expect_error("", "head: empty", NULL);
    expect_error("   \n", "head: empty", NULL);
    expect_error("allreduce", "no phase", NULL);
    expect_error("allreduce;", "no phase", NULL);
    expect_error("allgather; local; ag; ag; ag; ag", "more than 4 phases", NULL);
    expect_error("allreduce; rs; agg", "phase 2: unknown phase 'agg'", "did you mean 'ag'");
    expect_error("allreduce; xport=sm8", "phase 1: starts with 'xport=sm8', not a phase name",
                 NULL);
    expect_error("allreduce; rs junk; ag", "phase 1 (rs): 'junk' is not key=value", NULL);
    expect_error("allreduce; rs; ag dir=push trailing", "phase 2 (ag): 'trailing' is not key=value",
                 NULL);
    expect_error("allreduce; rs; ag a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14",
                 "phase 2 (ag): too many fields", NULL);
    expect_error("allreduce; rs xport=s\xc3\xa9; ag", "byte 0xc3 at offset", NULL);
    expect_error("allreduce; rs\x07; ag", "byte 0x07 at offset 13", NULL);

    /* 10 KB of garbage on one line */
    char *big = malloc(10 * 1024 + 1);
    KV_REQUIRE(big != NULL);
    for (int i = 0; i < 10 * 1024; i++)
        big[i] = (char)('a' + i % 26);
    big[10 * 1024] = '\0';
    expect_error(big, "schedule: 10240 bytes; at most 1023", NULL);
    memcpy(big, "allreduce; rs; ag ", 18); /* a valid start does not help */
    expect_error(big, "10240 bytes", NULL);
    free(big);

    /* an embedded NUL, through the length */
    static const char nul[] = "allreduce; rs\0; ag";
    kv_schedule s;
    kv_err err = {{0}};
    KV_CHECK(kv_sched_parse_len(nul, sizeof nul - 1, &s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "a NUL byte at offset 13");
    KV_CHECK(kv_sched_parse_len(nul, 13, &s, &err) == -1); /* "allreduce; rs" */
    KV_CHECK_STR_CONTAINS(err.msg, "(invariant 1)");
    KV_CHECK(kv_sched_parse(NULL, &s, &err) == -1);
}

/* ---- the space ----------------------------------------------------------- */

static void test_random_round_trip(void)
{
    kv_rng rng;
    kv_rng_seed(&rng, 42);
    for (int c = 0; c < KV_SC_COUNT; c++)
        for (int k = 0; k < 1000; k++) {
            kv_schedule s;
            kv_sched_random((kv_sched_coll)c, k % 2, &rng, &s);
            check_round_trip(&s);
        }
}

/* Values no valid schedule of c can hold (nvls aside: drawn only with allow_nvls). */
static int impossible(int c, int f, int v)
{
    if (f == KV_SF_ALGO && v == KV_ALGO_TREE)
        return c != KV_SC_BROADCAST;
    if (f == KV_SF_ALGO && v == KV_ALGO_RING)
        return c == KV_SC_ALLTOALL;
    if (f == KV_SF_FUSE && v == KV_FUSE_QUANT)
        return c != KV_SC_FP8_ALLGATHER;
    if (f == KV_SF_LAUNCH && v == KV_LAUNCH_SPLIT)
        return c == KV_SC_REDUCESCATTER;
    if (f == KV_SF_XPORT && v == KV_XP_NVLS) /* broadcast: its scatter ag's ag */
        return c == KV_SC_ALLTOALL;
    return 0;
}

static void test_random_coverage(void)
{
    kv_rng rng;
    kv_rng_seed(&rng, 7);
    for (int c = 0; c < KV_SC_COUNT; c++) {
        int seen[KV_SF_COUNT][16], seqs[4] = {0}, invalid = 0;
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < 5000; k++) {
            kv_schedule s;
            int nvls = k >= 4000; /* the last 1000 draws may use nvls */
            kv_sched_random((kv_sched_coll)c, nvls, &rng, &s);
            kv_err err = {{0}};
            if (kv_sched_check(&s, &err) != 0) {
                invalid++;
                KV_CHECKF(0, "%s", err.msg);
            }
            for (int i = 0; i < s.n_phases; i++)
                KV_CHECK(nvls || s.phase[i].xport != KV_XP_NVLS);
            for (int j = 0; j < kv_sched_n_sequences((kv_sched_coll)c); j++) {
                kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
                int n = kv_sched_sequence((kv_sched_coll)c, j, kinds);
                int same = n == s.n_phases;
                for (int i = 0; same && i < n; i++)
                    same = kinds[i] == s.phase[i].kind;
                seqs[j] += same;
            }
            for (int f = 0; f < KV_SF_FIRST_PHASE; f++)
                seen[f][kv_sched_head_get(&s, (kv_sched_field)f)]++;
            for (int i = 0; i < s.n_phases; i++)
                for (int f = KV_SF_FIRST_PHASE; f < KV_SF_COUNT; f++)
                    seen[f][kv_sched_phase_get(&s.phase[i], (kv_sched_field)f)]++;
        }
        KV_CHECK(invalid == 0);
        int nseq = kv_sched_n_sequences((kv_sched_coll)c);
        for (int j = 0; j < nseq; j++) /* uniform: 5000 / nseq each, +-6 sd */
            KV_CHECKF(abs(seqs[j] - 5000 / nseq) < 6 * 36, "%s: sequence %d drawn %d times of 5000",
                      coll_name[c], j, seqs[j]);
        for (int f = 0; f < KV_SF_COUNT; f++)
            for (int v = 0; v < kv_sched_field_n_values((kv_sched_field)f); v++) {
                char t[24];
                kv_sched_field_text((kv_sched_field)f, v, t, sizeof t);
                if (impossible(c, f, v))
                    KV_CHECKF(seen[f][v] == 0, "%s: %s=%s drawn", coll_name[c],
                              kv_sched_field_name((kv_sched_field)f), t);
                else
                    KV_CHECKF(seen[f][v] > 0, "%s: %s=%s never drawn in 5000", coll_name[c],
                              kv_sched_field_name((kv_sched_field)f), t);
            }
    }
}

/* Phase i of s over every setting of its fields, each checked with the
 * whole kv_sched_check: how many are valid. */
static uint64_t brute_phase(kv_schedule s, int i)
{
    const int nf = KV_SF_COUNT - KV_SF_FIRST_PHASE;
    int v[KV_SF_COUNT] = {0};
    uint64_t n = 0;
    for (;;) {
        for (int f = 0; f < nf; f++)
            kv_sched_phase_set(&s.phase[i], (kv_sched_field)(KV_SF_FIRST_PHASE + f), v[f]);
        n += s.phase[i].xport != KV_XP_NVLS && kv_sched_check(&s, NULL) == 0;
        int f = 0;
        while (f < nf && ++v[f] == kv_sched_field_n_values((kv_sched_field)(KV_SF_FIRST_PHASE + f)))
            v[f++] = 0;
        if (f == nf)
            return n;
    }
}

static uint64_t brute_heads(kv_schedule s)
{
    uint64_t n = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int l = 0; l < 2; l++)
                for (int m = 0; m < 9; m++) {
                    kv_sched_head_set(&s, KV_SF_THREADS, a);
                    kv_sched_head_set(&s, KV_SF_CTAS, b);
                    kv_sched_head_set(&s, KV_SF_LAUNCH, l);
                    kv_sched_head_set(&s, KV_SF_LL_MAX, m);
                    n += kv_sched_check(&s, NULL) == 0;
                }
    return n;
}

/* The documented sizes: the table "Space size per collective" of
 * docs/schedules.md, each row "| name | N | M |". */
static void check_doc_table(const uint64_t *size, const uint64_t *with_nvls)
{
    const char *root = getenv("KEVO_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/schedules.md", root ? root : ".");
    char *doc = NULL;
    size_t len = 0;
    kv_err err;
    KV_REQUIRE(kv_read_file(path, &doc, &len, &err) == 0);
    const char *table = strstr(doc, "## Space size per collective");
    KV_CHECK(table != NULL);
    for (int c = 0; table && c < KV_SC_COUNT; c++) {
        char row[160];
        snprintf(row, sizeof row, "| `%s` | %llu | %llu |", coll_name[c],
                 (unsigned long long)size[c], (unsigned long long)with_nvls[c]);
        KV_CHECKF(strstr(table, row) != NULL, "docs/schedules.md lacks the row %s", row);
    }
    free(doc);
}

static void test_space_size(void)
{
    uint64_t size[KV_SC_COUNT], nvls[KV_SC_COUNT];
    for (int c = 0; c < KV_SC_COUNT; c++) {
        clock_t t0 = clock();
        size[c] = kv_sched_space_size((kv_sched_coll)c, 0);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        nvls[c] = kv_sched_space_size((kv_sched_coll)c, 1);
        printf("space %-14s %llu (with nvls %llu), %.2f s\n", coll_name[c],
               (unsigned long long)size[c], (unsigned long long)nvls[c], secs);
        KV_CHECKF(secs < 1.0, "%s: %.2f s", coll_name[c], secs);
        KV_CHECK(size[c] > 0 && nvls[c] >= size[c]);
    }
    KV_CHECK(nvls[KV_SC_ALLTOALL] == size[KV_SC_ALLTOALL]);
    KV_CHECK(nvls[KV_SC_ALLREDUCE] > size[KV_SC_ALLREDUCE]);

    /* alltoall counted another way: every setting of one phase at a time
     * through the whole kv_sched_check (no phase of it reads another's,
     * so the sequences' counts are products), the heads likewise */
    kv_schedule a2a, la2a;
    KV_REQUIRE(kv_sched_parse("alltoall; a2a", &a2a, NULL) == 0);
    KV_REQUIRE(kv_sched_parse("alltoall; local; a2a", &la2a, NULL) == 0);
    uint64_t one = brute_heads(a2a) * brute_phase(a2a, 0);
    uint64_t two = brute_heads(la2a) * brute_phase(la2a, 0) * brute_phase(la2a, 1);
    KV_CHECK(brute_heads(a2a) == 144 && brute_heads(la2a) == 288);
    KV_CHECKF(size[KV_SC_ALLTOALL] == one + two, "%llu != %llu + %llu",
              (unsigned long long)size[KV_SC_ALLTOALL], (unsigned long long)one,
              (unsigned long long)two);
    /* reducescatter likewise (one phase) */
    kv_schedule rs;
    KV_REQUIRE(kv_sched_parse("reducescatter; rs", &rs, NULL) == 0);
    KV_CHECK(size[KV_SC_REDUCESCATTER] == brute_heads(rs) * brute_phase(rs, 0));

    /* allreduce's `rs ag`, where invariant 8 ties the phases: the share of
     * valid schedules among uniformly drawn settings (nvls aside) against
     * the count, within 5 standard deviations */
    kv_schedule ar;
    KV_REQUIRE(kv_sched_parse("allreduce; ar", &ar, NULL) == 0);
    uint64_t rsag = size[KV_SC_ALLREDUCE] - brute_heads(ar) * brute_phase(ar, 0);
    double raw = 288.0 * 81000.0 * 81000.0;
    double p = (double)rsag / raw;
    kv_schedule s;
    KV_REQUIRE(kv_sched_parse("allreduce; rs; ag", &s, NULL) == 0);
    kv_rng rng;
    kv_rng_seed(&rng, 3);
    const int draws = 1000000;
    int hits = 0;
    for (int k = 0; k < draws; k++) {
        for (int f = 0; f < KV_SF_FIRST_PHASE; f++)
            kv_sched_head_set(
                &s, (kv_sched_field)f,
                (int)kv_rng_below(&rng, (uint64_t)kv_sched_field_n_values((kv_sched_field)f)));
        for (int i = 0; i < 2; i++)
            for (int f = KV_SF_FIRST_PHASE; f < KV_SF_COUNT; f++) {
                int n = kv_sched_field_n_values((kv_sched_field)f) - (f == KV_SF_XPORT);
                kv_sched_phase_set(&s.phase[i], (kv_sched_field)f,
                                   (int)kv_rng_below(&rng, (uint64_t)n));
            }
        hits += kv_sched_check(&s, NULL) == 0;
    }
    double want = p * draws, sd = sqrt(want);
    KV_CHECKF(hits > want - 5 * sd && hits < want + 5 * sd, "%d valid of %d draws, %.0f expected",
              hits, draws, want);
    check_doc_table(size, nvls);
}

/* ---- cells ------------------------------------------------------------------ */

static void expect_cell(const char *text, const char *cell)
{
    kv_schedule s;
    kv_err err = {{0}};
    KV_REQUIRE(kv_sched_parse(text, &s, &err) == 0);
    char name[KV_CELL_NAME_MAX];
    kv_cell_name(kv_sched_cell(&s), name);
    KV_CHECKF(strcmp(name, cell) == 0, "%s: %s, want %s", text, name, cell);
}

static void test_cells(void)
{
    expect_cell("allgather; ag", "sm/fused");
    expect_cell("allgather launch=split; local; ag", "sm/unfused");
    expect_cell("allgather; local; ag", "sm/fused");
    expect_cell("allgather; ag xport=tma", "tma/fused");
    expect_cell("allreduce launch=split; rs xport=tma; ag", "tma/unfused");
    expect_cell("allreduce; rs xport=tma; ag xport=ce", "tma/unfused");
    expect_cell("allgather; ag xport=ce", "ce/unfused");
    expect_cell("alltoall; local; a2a xport=ce", "ce/unfused"); /* local is no data phase */
    expect_cell("fp8_allgather; quant; ag xport=ce", "ce/unfused");
    expect_cell("allreduce; rs xport=ce; ag", "sm/unfused"); /* ce beside SM work */
    expect_cell("allreduce; ar xport=nvls", "nvls/fused");
    expect_cell("allreduce; rs xport=nvls; ag xport=ce", "nvls/unfused");
}

/* ---- moves ------------------------------------------------------------------ */

/* What a move's note must name. */
static int note_names(kv_sched_move m, const char *note)
{
    switch (m) {
    case KV_SMOVE_CHUNK:
        return strstr(note, "chunk ") || strstr(note, "inflight ") || strstr(note, "sync ");
    case KV_SMOVE_LAUNCH:
        return strstr(note, "head: threads ") == note || strstr(note, "head: ctas ") == note ||
               strstr(note, "head: launch ") == note || strstr(note, "head: ll_max ") == note;
    case KV_SMOVE_SHAPE: return strstr(note, "phases ") == note && strstr(note, "->") != NULL;
    case KV_SMOVE_CROSS: return strstr(note, "cross: ") == note;
    case KV_SMOVE_JUMP: return strcmp(note, "jump") == 0;
    case KV_SMOVE_ANY: return note[0] != '\0';
    default: { /* "<kind>: <field> a->b" first */
        const char *colon = strstr(note, ": ");
        char want[32];
        snprintf(want, sizeof want, ": %s ", kv_sched_move_name(m));
        return colon && strncmp(colon, want, strlen(want)) == 0;
    }
    }
}

static void test_moves(void)
{
    kv_rng rng;
    kv_rng_seed(&rng, 11);
    for (int m = 0; m < KV_SMOVE_COUNT; m++)
        for (int c = 0; c < KV_SC_COUNT; c++) {
            /* what cannot move: alltoall's phases are all direct;
             * reducescatter has one phase sequence */
            int none = (m == KV_SMOVE_ALGO && c == KV_SC_ALLTOALL) ||
                       (m == KV_SMOVE_SHAPE && c == KV_SC_REDUCESCATTER);
            int bad = 0, nomove = 0, expect_none = 0;
            for (int k = 0; k < 500; k++) {
                kv_schedule parent, other, child;
                char note[192];
                int nvls = k % 5 == 0;
                kv_sched_random((kv_sched_coll)c, nvls, &rng, &parent);
                kv_sched_random((kv_sched_coll)c, nvls, &rng, &other);
                /* algo: only rs, ag and bc have another (allreduce's ar has none) */
                int algo_none = m == KV_SMOVE_ALGO;
                for (int i = 0; i < parent.n_phases; i++)
                    algo_none &= parent.phase[i].kind != KV_PH_RS &&
                                 parent.phase[i].kind != KV_PH_AG &&
                                 parent.phase[i].kind != KV_PH_BC;
                /* proto: fp8_allgather's lone quantising ag has none (invariant 9) */
                int proto_none = m == KV_SMOVE_PROTO && parent.n_phases == 1 &&
                                 parent.phase[0].fuse == KV_FUSE_QUANT;
                expect_none += none || algo_none || proto_none;
                int rc = kv_sched_mutate(&parent, m == KV_SMOVE_CROSS ? &other : NULL,
                                         (kv_sched_move)m, nvls, &rng, &child, note, sizeof note);
                if (rc == 1) {
                    nomove++;
                    KV_CHECK(kv_sched_equal(&child, &parent));
                    continue;
                }
                kv_err err = {{0}};
                int ok = rc == 0 && kv_sched_check(&child, &err) == 0 &&
                         !kv_sched_equal(&child, &parent) && note_names((kv_sched_move)m, note) &&
                         child.coll == parent.coll;
                for (int i = 0; ok && !nvls && i < child.n_phases; i++)
                    ok = child.phase[i].xport != KV_XP_NVLS;
                if (!ok && bad++ < 3) {
                    char a[KV_SCHED_TEXT_MAX], b[KV_SCHED_TEXT_MAX];
                    fmt(&parent, a);
                    fmt(&child, b);
                    KV_CHECKF(0, "%s %s: rc %d note '%s' (%s)\n  %s\n  %s",
                              kv_sched_move_name((kv_sched_move)m), coll_name[c], rc, note, err.msg,
                              a, b);
                }
            }
            KV_CHECKF(bad == 0, "%s %s: %d bad children", kv_sched_move_name((kv_sched_move)m),
                      coll_name[c], bad);
            KV_CHECKF(nomove == expect_none, "%s %s: %d of 500 parents without a move, %d expected",
                      kv_sched_move_name((kv_sched_move)m), coll_name[c], nomove, expect_none);
        }
}

/* Draws move m from parent text until the note starts with want. */
static int find_move(const char *text, kv_sched_move m, const char *want, kv_schedule *child,
                     char *note)
{
    kv_schedule parent;
    if (kv_sched_parse(text, &parent, NULL) != 0)
        return -1;
    kv_rng rng;
    kv_rng_seed(&rng, 5);
    for (int k = 0; k < 2000; k++)
        if (kv_sched_mutate(&parent, NULL, m, 0, &rng, child, note, 192) == 0 &&
            strncmp(note, want, strlen(want)) == 0)
            return 0;
    return -1;
}

/* The launch move takes ll_max up or down by x2 or x4 (the sizes measured
 * are 16x apart: a x2 step alone often changes nothing), never further. */
static void test_launch_ll_max_steps(void)
{
    kv_schedule parent;
    kv_err err = {{0}};
    KV_REQUIRE(kv_sched_parse("allgather ll_max=256K; ag proto=ll", &parent, &err) == 0);
    kv_rng rng;
    kv_rng_seed(&rng, 5);
    int seen_1m = 0, seen_64k = 0, beyond = 0;
    for (int k = 0; k < 2000; k++) {
        kv_schedule child;
        char note[192];
        if (kv_sched_mutate(&parent, NULL, KV_SMOVE_LAUNCH, 0, &rng, &child, note, sizeof note) !=
            0)
            continue;
        seen_1m |= child.ll_max == 1u << 20;
        seen_64k |= child.ll_max == 1u << 16;
        beyond |= child.ll_max > 1u << 20 || child.ll_max < 1u << 16;
    }
    KV_CHECK(seen_1m && seen_64k);
    KV_CHECK(!beyond);
}

static void test_move_repairs(void)
{
    kv_schedule c;
    char note[192];
    /* xport to ce: sync grid, dir push (a reduction), the link before the ag */
    KV_REQUIRE(find_move("allreduce; rs; ag dir=push", KV_SMOVE_XPORT, "rs: xport sm16->ce", &c,
                         note) == 0);
    KV_CHECK_STR_CONTAINS(note, "rs: dir pull->push");
    KV_CHECK_STR_CONTAINS(note, "rs: sync cta->grid");
    KV_CHECK(c.phase[0].xport == KV_XP_CE && c.phase[0].sync == KV_SYNC_GRID &&
             c.phase[0].dir == KV_DIR_PUSH && c.phase[1].xport == KV_XP_SM16);
    /* xport to tma: a tile; the phase before an sm16 ag ends with grid */
    KV_REQUIRE(find_move("allreduce; rs; ag", KV_SMOVE_XPORT, "rs: xport sm16->tma", &c, note) ==
               0);
    KV_CHECK(c.phase[0].chunk == 16384 && c.phase[0].sync == KV_SYNC_GRID);
    /* an ll phase turned pull loses ll */
    KV_REQUIRE(find_move("alltoall; a2a proto=ll", KV_SMOVE_DIR, "a2a: dir push->pull", &c, note) ==
               0);
    KV_CHECK(c.phase[0].proto == KV_PROTO_SIMPLE);
    KV_CHECK_STR_CONTAINS(note, "proto ll->simple");
    /* ll on a ring broadcast: direct */
    KV_REQUIRE(find_move("broadcast; bc algo=ring", KV_SMOVE_PROTO, "bc: proto simple->ll", &c,
                         note) == 0);
    KV_CHECK(c.phase[0].algo == KV_ALGO_DIRECT && c.phase[0].dir == KV_DIR_PUSH);
    /* shapes */
    KV_REQUIRE(find_move("allreduce; ar xport=sm8", KV_SMOVE_SHAPE, "phases ar->rs ag", &c, note) ==
               0);
    KV_CHECK(c.n_phases == 2 && c.phase[0].xport == KV_XP_SM8 && c.phase[1].xport == KV_XP_SM8);
    KV_REQUIRE(find_move("allreduce launch=split; rs; ag", KV_SMOVE_SHAPE, "phases rs ag->ar", &c,
                         note) == 0);
    KV_CHECK(c.n_phases == 1 && c.launch == KV_LAUNCH_FUSED);
    KV_REQUIRE(find_move("fp8_allgather; quant; ag xport=ce", KV_SMOVE_SHAPE, "phases quant ag->ag",
                         &c, note) == 0);
    KV_CHECK(c.phase[0].fuse == KV_FUSE_QUANT && c.phase[0].xport == KV_XP_SM16);
    KV_REQUIRE(find_move("fp8_allgather; ag dir=push xport=sm8", KV_SMOVE_SHAPE,
                         "phases ag->quant ag", &c, note) == 0);
    KV_CHECK(c.phase[0].kind == KV_PH_QUANT && c.phase[0].dir == KV_DIR_PULL &&
             c.phase[1].fuse == KV_FUSE_NONE && c.phase[1].xport == KV_XP_SM8);
    KV_REQUIRE(find_move("broadcast; bc algo=tree", KV_SMOVE_SHAPE, "phases bc->scatter ag", &c,
                         note) == 0);
    KV_CHECK(c.phase[0].algo == KV_ALGO_DIRECT && c.phase[1].algo == KV_ALGO_DIRECT);
    KV_REQUIRE(find_move("alltoall; local; a2a xport=sm4", KV_SMOVE_SHAPE, "phases local a2a->a2a",
                         &c, note) == 0);
    KV_CHECK(c.n_phases == 1 && c.phase[0].xport == KV_XP_SM4);
    /* nothing to change */
    kv_schedule p;
    kv_rng rng;
    kv_rng_seed(&rng, 1);
    kv_sched_default(KV_SC_REDUCESCATTER, &p);
    KV_CHECK(kv_sched_mutate(&p, NULL, KV_SMOVE_SHAPE, 0, &rng, &c, note, sizeof note) == 1);
    KV_CHECK(kv_sched_equal(&p, &c));
    KV_CHECK(kv_sched_mutate(&p, NULL, KV_SMOVE_CROSS, 0, &rng, &c, note, sizeof note) == 1);
    KV_CHECK(kv_sched_mutate(&p, &p, KV_SMOVE_CROSS, 0, &rng, &c, note, sizeof note) == 1);
    KV_CHECK(kv_sched_mutate(&p, NULL, KV_SMOVE_COUNT, 0, &rng, &c, note, sizeof note) == 1);
    /* the note fits what it is given */
    KV_CHECK(kv_sched_mutate(&p, NULL, KV_SMOVE_XPORT, 0, &rng, &c, note, 8) == 0);
    KV_CHECK(strlen(note) < 8);
}

/* The child's head is parent a's: launch aside where the child has one
 * phase (launch=split needs two: fused). */
static int same_head(const kv_schedule *child, const kv_schedule *a)
{
    return child->threads == a->threads && child->ctas == a->ctas && child->ll_max == a->ll_max &&
           (child->launch == a->launch ||
            (child->n_phases == 1 && child->launch == KV_LAUNCH_FUSED));
}

static void test_cross(void)
{
    kv_rng rng;
    kv_rng_seed(&rng, 99);
    int mixed = 0;
    for (int k = 0; k < 2000; k++) {
        int c = k % KV_SC_COUNT;
        kv_schedule a, b, child;
        char note[192];
        kv_sched_random((kv_sched_coll)c, 0, &rng, &a);
        kv_sched_random((kv_sched_coll)c, 0, &rng, &b);
        if (kv_sched_equal(&a, &b))
            continue;
        int rc = kv_sched_mutate(&a, &b, KV_SMOVE_CROSS, 0, &rng, &child, note, sizeof note);
        KV_REQUIRE(rc == 0);
        KV_CHECK(kv_sched_check(&child, NULL) == 0 && !kv_sched_equal(&child, &a));
        KV_CHECK(same_head(&child, &a) || same_head(&child, &b));
        int same_seq = a.n_phases == b.n_phases;
        for (int i = 0; same_seq && i < a.n_phases; i++)
            same_seq = a.phase[i].kind == b.phase[i].kind;
        int from_a = 0, from_b = 0;
        for (int i = 0; i < child.n_phases; i++) {
            int in_a =
                i < a.n_phases && memcmp(&child.phase[i], &a.phase[i], sizeof a.phase[i]) == 0;
            int in_b =
                i < b.n_phases && memcmp(&child.phase[i], &b.phase[i], sizeof b.phase[i]) == 0;
            KV_CHECKF(in_a || in_b, "cross phase %d from neither parent (%s)", i, note);
            from_a += in_a && !in_b;
            from_b += in_b && !in_a;
        }
        if (!same_seq) /* the phases all of one parent */
            KV_CHECK(child.n_phases == (from_a ? a.n_phases : b.n_phases) && !(from_a && from_b));
        mixed += from_a && from_b;
    }
    KV_CHECK(mixed > 100); /* phases really mix */
}

/* ---- sources ---------------------------------------------------------------- */

static void test_from_source(void)
{
    static const char src[] = "// a generated program\n"
                              "// kevo:schedule allreduce threads=256 ctas=2 launch=fused "
                              "ll_max=256K; rs xport=sm8; ag xport=sm8\n"
                              "// kevo:schedule allgather; ag\n"
                              "#include <kevo/kernel.h>\n";
    kv_schedule s, want;
    kv_err err = {{0}};
    KV_CHECKF(kv_sched_from_source(src, sizeof src - 1, &s, &err) == 1, "%s", err.msg);
    KV_REQUIRE(kv_sched_parse("allreduce threads=256; rs xport=sm8; ag xport=sm8", &want, NULL) ==
               0);
    KV_CHECK(kv_sched_equal(&s, &want));
    /* the last line, without a newline */
    static const char last[] = "int x;\n// kevo:schedule broadcast; bc";
    KV_CHECK(kv_sched_from_source(last, sizeof last - 1, &s, &err) == 1 &&
             s.coll == KV_SC_BROADCAST);
    /* none: no line, not at a line's start, no space after the tag, empty */
    static const char none[] =
        "int x; // kevo:schedule allgather; ag\n//kevo:schedule allgather; ag\n"
        "// kevo:schedules allgather; ag\n";
    KV_CHECK(kv_sched_from_source(none, sizeof none - 1, &s, &err) == 0);
    KV_CHECK(kv_sched_from_source("", 0, &s, &err) == 0);
    /* a bad line */
    static const char bad[] = "// kevo:schedule allgather; ag xport=sm32\nint x;\n";
    KV_CHECK(kv_sched_from_source(bad, sizeof bad - 1, &s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "the kevo:schedule line: phase 1 (ag): xport 'sm32'");
    static const char nul[] = "// kevo:schedule allgather;\0 ag\n";
    KV_CHECK(kv_sched_from_source(nul, sizeof nul - 1, &s, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "NUL byte");
    /* the length bounds the search */
    KV_CHECK(kv_sched_from_source(src, 20, &s, &err) == 0);
    /* a generated header's line, from kv_sched_format */
    char line[KV_SCHED_TEXT_MAX + 32], text[KV_SCHED_TEXT_MAX];
    kv_rng rng;
    kv_rng_seed(&rng, 4);
    kv_sched_random(KV_SC_FP8_ALLGATHER, 0, &rng, &want);
    KV_REQUIRE(fmt(&want, text) == 0);
    snprintf(line, sizeof line, "// kevo:schedule %s\n", text);
    KV_CHECK(kv_sched_from_source(line, strlen(line), &s, &err) == 1 && kv_sched_equal(&s, &want));
}

int main(void)
{
    KV_RUN(test_names);
    KV_RUN(test_defaults);
    KV_RUN(test_pinned_defaults);
    KV_RUN(test_invariants);
    KV_RUN(test_malformed);
    KV_RUN(test_random_round_trip);
    KV_RUN(test_random_coverage);
    KV_RUN(test_space_size);
    KV_RUN(test_cells);
    KV_RUN(test_moves);
    KV_RUN(test_launch_ll_max_steps);
    KV_RUN(test_move_repairs);
    KV_RUN(test_cross);
    KV_RUN(test_from_source);
    return kv_test_summary();
}
