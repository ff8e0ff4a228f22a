/* test_sched_mutator.c — the mutators on programs generated from schedules
 * (docs/mutation.md, "Schedule moves", "The reply format"):
 *
 *   - the template mutator gives a generated parent structural children:
 *     each a valid schedule other than the parent's, the source generated
 *     from it (its kevo:schedule line reads back as the child's schedule),
 *     op "sched-<move>" and model "schedule"; every local move shows up;
 *     a fruitless streak jumps; a second parent gives a crossover;
 *   - the aim at a target cell is measurable: over 500 draws, children on
 *     the target's transport are far more frequent than without an aim;
 *   - seeds generated from schedules: a library per collective with the
 *     default and the cells named, each parsing without parameters, deterministic;
 *     seeds=both adds them to the hand-written ones; a non-collective has none;
 *   - a search with the fake evaluator on seeds=schedules fills several cells
 *     and stores sched-* children;
 *   - the prompt shows the grammar and the parent's schedule only when the
 *     parent has one; a ```schedule reply becomes the generated candidate, a
 *     bad one a refusal naming the parser's error. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_evalq.h"
#include "archive/archive.h"
#include "common/cell.h"
#include "mutate/library.h"
#include "mutate/prompt.h"
#include "mutate/reply.h"
#include "mutate/schedule.h"
#include "mutate/schedule_prompt.h"
#include "mutate/template.h"
#include "problem/problem.h"
#include "search/search.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static char *gen(const kv_schedule *s, size_t *len)
{
    char *src = NULL;
    kv_err err = {{0}};
    KV_CHECKF(kv_sched_generate(s, &src, len, &err) == 0, "%s", err.msg);
    return src;
}

static char *gen_text(const char *text, size_t *len, kv_schedule *out)
{
    kv_err err = {{0}};
    if (kv_sched_parse(text, out, &err) != 0) {
        KV_CHECKF(0, "%s: %s", text, err.msg);
        return NULL;
    }
    return gen(out, len);
}

/* A child is structural: valid, other than the parent, its source the
 * generator's for its schedule, op sched-*, model schedule. */
static int check_child(const kv_schedule *parent, const kv_proposal *p, kv_schedule *child)
{
    kv_err err = {{0}};
    int rc = kv_sched_from_source(p->src, p->len, child, &err);
    KV_CHECKF(rc == 1, "the child has no schedule line (%d: %s)", rc, err.msg);
    if (rc != 1)
        return -1;
    KV_CHECK(kv_sched_check(child, NULL) == 0);
    KV_CHECKF(!kv_sched_equal(child, parent), "op %s gave the parent back", p->op);
    size_t len = 0;
    char *again = gen(child, &len);
    KV_CHECK(again && len == p->len && memcmp(again, p->src, len) == 0);
    free(again);
    KV_CHECKF(strncmp(p->op, "sched-", 6) == 0, "op %s", p->op);
    KV_CHECK(strcmp(p->model, "schedule") == 0);
    KV_CHECK(p->note[0] != 0);
    return 0;
}

static void test_moves(void)
{
    kv_library lib = {0};
    kv_schedule parent;
    kv_sched_default(KV_SC_ALLREDUCE, &parent);
    size_t len = 0;
    char *src = gen(&parent, &len);
    KV_REQUIRE(src);
    kv_rng rng;
    kv_rng_seed(&rng, 11);
    static const char *const moves[] = {"sched-algo",  "sched-dir",   "sched-xport", "sched-proto",
                                        "sched-shape", "sched-chunk", "sched-launch"};
    int seen[7] = {0};
    for (int i = 0; i < 300; i++) {
        kv_tpl_in in = {.lib = &lib,
                        .pattern = "sched_default",
                        .parent_src = src,
                        .parent_len = len,
                        .parent_id = 5,
                        .target_cell = -1,
                        .op = KV_TPL_ANY};
        kv_proposal p;
        kv_err err = {{0}};
        int rc = kv_template_propose(&in, &rng, &p, &err);
        KV_CHECKF(rc == 0, "%d: %s", rc, err.msg);
        if (rc != 0)
            continue;
        kv_schedule child;
        check_child(&parent, &p, &child);
        KV_CHECK(p.n_parents == 1 && p.parents[0] == 5);
        for (int m = 0; m < 7; m++)
            seen[m] += strcmp(p.op, moves[m]) == 0;
        kv_proposal_free(&p);
    }
    for (int m = 0; m < 7; m++)
        KV_CHECKF(seen[m] > 0, "no %s child in 300", moves[m]);

    /* a fruitless streak asks for a jump */
    kv_tpl_in in = {.lib = &lib,
                    .pattern = "schedule",
                    .parent_src = src,
                    .parent_len = len,
                    .parent_id = 5,
                    .target_cell = -1,
                    .op = KV_TPL_JUMP};
    kv_proposal p;
    kv_err err = {{0}};
    KV_REQUIRE(kv_template_propose(&in, &rng, &p, &err) == 0);
    kv_schedule child;
    check_child(&parent, &p, &child);
    KV_CHECK(strcmp(p.op, "sched-jump") == 0);
    kv_proposal_free(&p);

    /* with a second parent: a crossover naming both */
    kv_schedule other;
    size_t olen = 0;
    char *osrc = gen_text("allreduce threads=256 launch=split; rs xport=sm8; ag xport=sm8 dir=push",
                          &olen, &other);
    KV_REQUIRE(osrc);
    in.op = KV_TPL_RECOMBINE;
    in.other_src = osrc;
    in.other_len = olen;
    in.other_id = 9;
    KV_REQUIRE(kv_template_propose(&in, &rng, &p, &err) == 0);
    check_child(&parent, &p, &child);
    KV_CHECK(strcmp(p.op, "sched-cross") == 0);
    KV_CHECK(p.n_parents == 2 && p.parents[0] == 5 && p.parents[1] == 9);
    KV_CHECK(!kv_sched_equal(&child, &other));
    kv_proposal_free(&p);
    /* ANY with a second parent crosses some of the time */
    int crosses = 0;
    in.op = KV_TPL_ANY;
    for (int i = 0; i < 100; i++) {
        if (kv_template_propose(&in, &rng, &p, &err) == 0) {
            crosses += strcmp(p.op, "sched-cross") == 0;
            kv_proposal_free(&p);
        }
    }
    KV_CHECKF(crosses >= 10 && crosses <= 60, "%d crossovers in 100", crosses);
    /* a second parent of another collective is no partner */
    kv_schedule ag;
    size_t aglen = 0;
    char *agsrc = gen_text("allgather; ag", &aglen, &ag);
    in.op = KV_TPL_RECOMBINE;
    in.other_src = agsrc;
    in.other_len = aglen;
    KV_CHECK(kv_template_propose(&in, &rng, &p, &err) == 1);
    free(agsrc);
    free(osrc);
    free(src);
}

/* The share of 500 children whose schedule is on the target's transport. */
static double on_target(const char *src, size_t len, int target, int aim, uint64_t seed)
{
    kv_library lib = {0};
    kv_rng rng;
    kv_rng_seed(&rng, seed);
    int hits = 0, n = 0;
    for (int i = 0; i < 500; i++) {
        kv_tpl_in in = {.lib = &lib,
                        .pattern = "schedule",
                        .parent_src = src,
                        .parent_len = len,
                        .parent_id = 1,
                        .target_cell = aim ? target : -1,
                        .op = KV_TPL_ANY};
        kv_proposal p;
        kv_err err = {{0}};
        if (kv_template_propose(&in, &rng, &p, &err) != 0)
            continue;
        kv_schedule c;
        if (kv_sched_from_source(p.src, p.len, &c, NULL) == 1) {
            n++;
            hits += kv_sched_cell(&c) / KV_FUSION_COUNT == target / KV_FUSION_COUNT;
        }
        kv_proposal_free(&p);
    }
    KV_CHECK(n >= 490);
    return n ? (double)hits / n : 0;
}

/* Aimed at a cell on another transport, from each collective's default
 * (sm/fused): tma/fused from allreduce's two phases, ce/unfused from
 * allgather's one. */
static void test_aim(void)
{
    static const struct {
        kv_sched_coll coll;
        kv_transport t;
        kv_fusion f;
    } aims[] = {{KV_SC_ALLREDUCE, KV_TRANSPORT_TMA, KV_FUSION_FUSED},
                {KV_SC_ALLGATHER, KV_TRANSPORT_CE, KV_FUSION_UNFUSED},
                {KV_SC_ALLGATHER, KV_TRANSPORT_TMA, KV_FUSION_UNFUSED}};
    for (size_t k = 0; k < sizeof aims / sizeof aims[0]; k++) {
        kv_schedule parent;
        kv_sched_default(aims[k].coll, &parent);
        size_t len = 0;
        char *src = gen(&parent, &len);
        KV_REQUIRE(src);
        int cell = kv_cell_index(aims[k].t, aims[k].f);
        double base = on_target(src, len, cell, 0, 3);
        double aimed = on_target(src, len, cell, 1, 3);
        char name[KV_CELL_NAME_MAX];
        kv_cell_name(cell, name);
        printf("  %s aimed at %s: %.3f of children on its transport, %.3f without the aim\n",
               kv_sched_coll_name(aims[k].coll), name, aimed, base);
        KV_CHECKF(aimed >= base + 0.2 && aimed >= 2 * base, "aim %s: %.3f against %.3f", name,
                  aimed, base);
        free(src);
    }
}

static void test_library(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/patterns", src);
    static const char *const cells[] = {"sm_fused", "sm_unfused", "tma_fused", "tma_unfused",
                                        "ce_unfused"};
    for (int c = 0; c < KV_SC_COUNT; c++) {
        const char *coll = kv_sched_coll_name((kv_sched_coll)c);
        kv_library lib, again;
        kv_err err = {{0}};
        KV_REQUIRE(kv_library_load_from(root, coll, KV_SEEDS_SCHEDULES, &lib, NULL, NULL, &err) ==
                   0);
        int want = c == KV_SC_REDUCESCATTER ? 5 : 7;
        KV_CHECKF(lib.n == want, "%s: %d generated seeds", coll, lib.n);
        KV_CHECK(kv_library_find(&lib, "sched_default") != NULL);
        unsigned reached = 0;
        for (int k = 0; k < 5; k++) {
            char name[64];
            snprintf(name, sizeof name, "sched_%s", cells[k]);
            const kv_seed *s = kv_library_find(&lib, name);
            if (c == KV_SC_REDUCESCATTER && strstr(cells[k], "unfused") && k != 4) {
                KV_CHECK(s == NULL);
                continue;
            }
            KV_CHECKF(s != NULL, "%s: no %s", coll, name);
            if (!s)
                continue;
            char cell[KV_CELL_NAME_MAX], want_cell[32];
            kv_cell_name(s->meta.cell, cell);
            snprintf(want_cell, sizeof want_cell, "%s", cells[k]);
            *strchr(want_cell, '_') = '/';
            KV_CHECKF(strcmp(cell, want_cell) == 0, "%s %s aims at %s", coll, name, cell);
            reached |= 1u << s->meta.cell;
        }
        /* the latency seed: its last phase on the LL protocol */
        const kv_seed *ll = kv_library_find(&lib, "sched_sm_ll");
        kv_schedule lls;
        KV_CHECKF(ll && kv_sched_from_source(ll->src, ll->len, &lls, NULL) == 1 &&
                      lls.phase[lls.n_phases - 1].proto == KV_PROTO_LL,
                  "%s: no sched_sm_ll seed on LL", coll);
        for (int i = 0; i < lib.n; i++) {
            const kv_seed *s = &lib.seeds[i];
            kv_schedule sc;
            KV_CHECK(s->meta.n_params == 0 && strcmp(s->meta.problem, coll) == 0);
            KV_CHECK(kv_sched_from_source(s->src, s->len, &sc, NULL) == 1 && (int)sc.coll == c);
            KV_CHECK(i == 0 || strcmp(lib.seeds[i - 1].name, s->name) < 0);
            /* the template mutator varies such a seed by schedule moves */
            kv_rng rng;
            kv_rng_seed(&rng, 2);
            kv_tpl_in in = {.lib = &lib,
                            .pattern = s->name,
                            .parent_src = s->src,
                            .parent_len = s->len,
                            .parent_id = 0,
                            .target_cell = -1,
                            .op = KV_TPL_ANY};
            kv_proposal p;
            KV_CHECKF(kv_template_propose(&in, &rng, &p, &err) == 0, "%s %s: %s", coll, s->name,
                      err.msg);
            KV_CHECK(strncmp(p.op, "sched-", 6) == 0);
            kv_proposal_free(&p);
        }
        /* deterministic */
        KV_REQUIRE(kv_library_load_from(root, coll, KV_SEEDS_SCHEDULES, &again, NULL, NULL, &err) ==
                   0);
        KV_CHECK(again.n == lib.n);
        for (int i = 0; i < lib.n && i < again.n; i++)
            KV_CHECK(again.seeds[i].len == lib.seeds[i].len &&
                     memcmp(again.seeds[i].src, lib.seeds[i].src, lib.seeds[i].len) == 0);
        kv_library_free(&again);
        /* both: the hand-written ones too */
        kv_library pat;
        KV_REQUIRE(kv_library_load_from(root, coll, KV_SEEDS_PATTERNS, &pat, NULL, NULL, &err) ==
                   0);
        KV_REQUIRE(kv_library_load_from(root, coll, KV_SEEDS_BOTH, &again, NULL, NULL, &err) == 0);
        KV_CHECKF(again.n == pat.n + lib.n, "%s: both %d = %d + %d", coll, again.n, pat.n, lib.n);
        kv_library_free(&again);
        kv_library_free(&pat);
        kv_library_free(&lib);
    }
    kv_library lib;
    kv_err err = {{0}};
    KV_REQUIRE(kv_library_load_from(root, "gemm_allreduce", KV_SEEDS_SCHEDULES, &lib, NULL, NULL,
                                    &err) == 0);
    KV_CHECK(lib.n == 0);
    kv_library_free(&lib);
}

/* ---- a search on generated seeds ---------------------------------------------- */

typedef struct {
    int sched_children, sched_seeds;
} run_facts;

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    run_facts *f = arg;
    f->sched_children += strncmp(p->op, "sched-", 6) == 0 && strcmp(p->model, "schedule") == 0 &&
                         p->verdict != KV_VERDICT_NONE;
    f->sched_seeds += strcmp(p->op, KV_OP_SEED) == 0 && strncmp(p->model, "sched_", 6) == 0;
    return 0;
}

typedef struct {
    unsigned cells;
} elite_facts;

static int on_elite(const kv_elite *e, void *arg, kv_err *err)
{
    (void)err;
    elite_facts *f = arg;
    int c = kv_cell_parse(e->cell);
    if (c >= 0)
        f->cells |= 1u << c;
    return 0;
}

static void test_search(void)
{
    char dir[4096];
    kv_test_fresh_dir(dir, sizeof dir, "sched-search");
    static const char *const problems[] = {"allgather"};
    kv_search_test run;
    kv_search_test_init(&run, dir, problems, 1);
    run.cfg.islands = 2;
    run.cfg.seed = 3;
    run.cfg.seeds = KV_SEEDS_SCHEDULES;
    run.cfg.budget.evaluations = 60;
    kv_err err = {{0}};
    int rc = kv_search_test_run(&run, &err);
    KV_REQUIRE(rc == 0 || (printf("%s\n", err.msg), 0));

    run_facts f = {0};
    elite_facts e = {0};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    rc = kv_archive_open(dir, &ao, &a, &err);
    if (rc == 0)
        rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_program, &f, &err);
    if (rc == 0)
        rc = kv_each_elite(t, "allgather", -1, on_elite, &e, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
    int filled = 0;
    for (int c = 0; c < KV_CELL_COUNT; c++)
        filled += e.cells >> c & 1;
    printf("  seeds=schedules: %d generated seeds, %d sched-* children, %d cells filled\n",
           f.sched_seeds, f.sched_children, filled);
    KV_CHECK(f.sched_seeds == 7);
    KV_CHECK(f.sched_children >= 20);
    KV_CHECKF(filled >= 4, "%d cells filled", filled);
}

/* ---- the prompt and the reply -------------------------------------------------- */

static void test_prompt(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/problems/allreduce", src);
    kv_problem prob;
    kv_err err = {{0}};
    KV_REQUIRE(kv_problem_load(dir, &prob, &err) == 0);
    kv_schedule s;
    size_t len = 0;
    char *gsrc = gen_text("allreduce; rs xport=tma; ag xport=tma dir=push", &len, &s);
    KV_REQUIRE(gsrc);
    char canon[KV_SCHED_TEXT_MAX];
    KV_REQUIRE(kv_sched_format(&s, canon, sizeof canon) == 0);
    const char *plain = "// kevo:pattern problem=allreduce transport=sm fusion=fused\nint x;\n";
    for (int k = 0; k < 2; k++) {
        kv_prompt_in in = {.problem = &prob,
                           .world = 2,
                           .abi = "the abi",
                           .parent_src = k ? gsrc : plain,
                           .target_cell = "tma/fused",
                           .budget_chars = 200000};
        char *sys = NULL, *user = NULL;
        KV_REQUIRE(kv_prompt_build(&in, &sys, &user, &err) == 0);
        int has = strstr(user, kv_sched_prompt_grammar()) != NULL;
        KV_CHECKF(has == k, "grammar shown: %d, parent with a schedule: %d", has, k);
        KV_CHECK((strstr(user, canon) != NULL) == k);
        KV_CHECK((strstr(user, "## The parent's schedule") != NULL) == k);
        KV_CHECK((strstr(sys, "```schedule") != NULL) == k);
        KV_CHECK(strstr(sys, k ? "three forms" : "two forms") != NULL);
        free(sys);
        free(user);
    }
    free(gsrc);
    kv_problem_free(&prob);
}

static void test_reply(void)
{
    kv_schedule parent;
    kv_sched_default(KV_SC_ALLREDUCE, &parent);
    size_t plen = 0;
    char *psrc = gen(&parent, &plen);
    KV_REQUIRE(psrc);
    char *out = NULL, why[512];
    size_t len = 0;
    kv_reply_kind kind;
    /* a schedule: the candidate generated from it */
    int rc = kv_reply_use(psrc, plen,
                          "Try TMA:\n```schedule\nallreduce threads=256;\n\nrs xport=tma\nag "
                          "xport=tma dir=push\n```\n",
                          &out, &len, &kind, why, sizeof why);
    KV_CHECKF(rc == 0 && kind == KV_REPLY_SCHEDULE, "%d: %s", rc, why);
    kv_schedule want, got;
    size_t wlen = 0;
    char *wsrc =
        gen_text("allreduce threads=256; rs xport=tma; ag xport=tma dir=push", &wlen, &want);
    KV_CHECK(out && wsrc && len == wlen && memcmp(out, wsrc, len) == 0);
    KV_CHECK(out && kv_sched_from_source(out, len, &got, NULL) == 1 && kv_sched_equal(&got, &want));
    free(out);
    free(wsrc);
    /* refusals: the parser's error, another collective, two forms, the generator */
    static const struct {
        const char *reply, *why;
    } bad[] = {
        {"```schedule\nallreduce; rs xport=sm32; ag\n```\n",
         "the schedule does not parse: phase 1 (rs): xport 'sm32'"},
        {"```schedule\nallgather; ag\n```\n", "the schedule is for allgather, the problem is "
                                              "allreduce"},
        {"```schedule\nallreduce; ar\n```\n```cuda\nint x;\n```\n", "a schedule block and 1 code "
                                                                    "block"},
        {"```schedule\nallreduce; ar\n```\n```schedule\nallreduce; ar\n```\n", "2 schedule blocks"},
        {"```schedule\n\n```\n", "the schedule block is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = kv_reply_use(psrc, plen, bad[i].reply, &out, &len, &kind, why, sizeof why);
        KV_CHECKF(rc == 1 && out == NULL, "reply %zu: %d", i, rc);
        KV_CHECKF(strstr(why, bad[i].why) != NULL, "reply %zu: \"%s\", want \"%s\"", i, why,
                  bad[i].why);
    }
    /* code and edits as before */
    rc = kv_reply_use(psrc, plen, "```cuda\nint x;\n```\n", &out, &len, &kind, why, sizeof why);
    KV_CHECK(rc == 0 && kind == KV_REPLY_CODE);
    free(out);
    free(psrc);
}

/* The prompt's grammar (schedule_prompt.c, a copy of docs/schedules.md) names
 * every collective, phase kind, field, and every value of the fields that take
 * words: a value the parser learns and the prompt does not teach fails here. */
static void test_grammar_complete(void)
{
    const char *g = kv_sched_prompt_grammar();
    for (int c = 0; c < KV_SC_COUNT; c++)
        KV_CHECKF(strstr(g, kv_sched_coll_name((kv_sched_coll)c)) != NULL, "collective %s",
                  kv_sched_coll_name((kv_sched_coll)c));
    for (int k = 0; k < KV_PH_COUNT; k++)
        KV_CHECKF(strstr(g, kv_sched_kind_name((kv_sched_kind)k)) != NULL, "kind %s",
                  kv_sched_kind_name((kv_sched_kind)k));
    static const kv_sched_field words[] = {KV_SF_LAUNCH, KV_SF_ALGO, KV_SF_DIR,   KV_SF_XPORT,
                                           KV_SF_PROTO,  KV_SF_SYNC, KV_SF_ORDER, KV_SF_FUSE};
    for (int f = 0; f < KV_SF_COUNT; f++)
        KV_CHECKF(strstr(g, kv_sched_field_name((kv_sched_field)f)) != NULL, "field %s",
                  kv_sched_field_name((kv_sched_field)f));
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        for (int v = 0; v < kv_sched_field_n_values(words[i]); v++) {
            char text[32];
            kv_sched_field_text(words[i], v, text, sizeof text);
            KV_CHECKF(strstr(g, text) != NULL, "%s=%s", kv_sched_field_name(words[i]), text);
        }
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set\n");
        return 1;
    }
    KV_RUN(test_moves);
    KV_RUN(test_aim);
    KV_RUN(test_library);
    KV_RUN(test_prompt);
    KV_RUN(test_grammar_complete);
    KV_RUN(test_reply);
    KV_RUN(test_search);
    return kv_test_summary();
}
