/* test_search_seedless.c — problems without seeds (docs/search.md,
 * "Problems without seeds"), with the fake evaluator: a run on a problem that
 * has no folder in patterns/ (the fixture tests/fixtures/seedless) starts
 * from the problem's reference, its first program, offered to every island
 * and the first parent the mutator sees on each; a run killed at any of its
 * first commits and resumed stores and evaluates the reference once; with
 * the template mutator, which only varies seeds, a run whose problems all
 * lack seeds is refused with what to add, and one where some have seeds
 * skips the others, saying so at every start. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cell.h"
#include "common/fsutil.h"
#include "archive/archive.h"
#include "fake_evalq.h"
#include "fake_mutator.h"
#include "search/search.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static const char *const kSeedless[] = {"seedless_max"};

#define ISLANDS 3

typedef struct {
    const char *problems_root; /* NULL: tests/fixtures/seedless */
    const char *patterns_root; /* NULL: patterns/ of the source */
    const char *const *problems;
    int n_problems;
    const kv_fake_mutator_opts *fm; /* NULL: the configured (template) mutator */
    int64_t evaluations;
    uint64_t crash_after; /* > 0: the run, in a child, dies right after this commit */
    FILE *progress;
} run_opts;

static void source_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", getenv("KEVO_SOURCE_DIR"), rel);
}

/* One run (a crashed child: 0 when it died as asked); the fake mutator's
 * counts into *c when there is one. */
static int run(const char *dir, const run_opts *o, kv_fake_mutator_counts *c, kv_err *err)
{
    kv_search_test t;
    kv_search_test_init(&t, dir, o->problems, o->n_problems);
    t.cfg.world = 2;
    t.cfg.islands = ISLANDS;
    t.cfg.migration_interval = 4;
    t.cfg.reseed_interval = 12;
    t.cfg.seed = 5;
    t.cfg.budget.evaluations = o->evaluations;
    char problems[4096];
    source_path(problems, sizeof problems, "tests/fixtures/seedless");
    t.env.problems_root = o->problems_root ? o->problems_root : problems;
    if (o->patterns_root)
        t.env.patterns_root = o->patterns_root;
    t.env.progress = o->progress;
    t.env.progress_every_s = 1000;
    t.fm = o->fm;
    t.crash_after = o->crash_after;
    int rc = kv_search_test_run(&t, err);
    if (c)
        *c = t.counts;
    return rc;
}

/* What the archive holds of the references and of the problems. */
typedef struct {
    const char *problem; /* programs of this problem are counted in `of_problem` */
    uint64_t references, reference_id, of_problem, children_of_reference;
    uint64_t reference_proposals, reference_seed_evals, first_eval_program;
    kv_program ref; /* the first reference (evidence not kept) */
} facts;

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    facts *f = arg;
    if (f->problem && strcmp(p->problem, f->problem) == 0)
        f->of_problem++;
    if (strcmp(p->op, KV_OP_REFERENCE) == 0 && f->references++ == 0) {
        f->ref = *p;
        f->ref.evidence = NULL;
        f->reference_id = p->id;
    }
    for (uint32_t i = 0; i < p->n_parents; i++)
        f->children_of_reference += f->reference_id && p->parents[i] == f->reference_id;
    return 0;
}

static int on_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    facts *f = arg;
    int ref = strcmp(a->op, KV_OP_REFERENCE) == 0;
    if (a->stage == KV_STAGE_PROPOSAL) {
        f->reference_proposals += ref;
        return 0;
    }
    if (!f->first_eval_program)
        f->first_eval_program = a->program_id;
    f->reference_seed_evals += ref && a->stage == KV_STAGE_SEED;
    return 0;
}

static void read_facts(const char *dir, const char *problem, facts *f)
{
    memset(f, 0, sizeof *f);
    f->problem = problem;
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    int rc = kv_archive_open(dir, &ao, &a, &err);
    if (rc == 0)
        rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_program, f, &err);
    if (rc == 0)
        rc = kv_each_attempt(t, 1, on_attempt, f, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
}

static char *reference_text(size_t *len)
{
    char path[4096];
    char *text = NULL;
    kv_err err = {{0}};
    source_path(path, sizeof path, "tests/fixtures/seedless/seedless_max/reference.cu");
    KV_CHECKF(kv_read_file(path, &text, len, &err) == 0, "%s", err.msg);
    return text;
}

/* The reference is the first program, stored as it is in reference.cu,
 * marked as the reference, evaluated at the seed stage (ok, in the cell NCCL's
 * own code gets) before anything else, and the first parent of every
 * island; its children are evaluated, aimed at other cells too. */
static void test_reference_first(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "seedless");
    kv_fake_mutator_opts fm = {.concurrency = 2, .delay_ms = 1, .script = "ccn"};
    run_opts o = {.problems = kSeedless, .n_problems = 1, .fm = &fm, .evaluations = 30};
    kv_fake_mutator_counts c;
    kv_err err = {{0}};
    KV_CHECKF(run(dir, &o, &c, &err) == 0, "%s", err.msg);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kSeedless, 1, &sf, why, sizeof why) == 0, "%s", why);
    facts f;
    read_facts(dir, NULL, &f);
    size_t len = 0;
    char *ref = reference_text(&len);
    KV_CHECKF(f.references == 1 && f.reference_id == 1, "%llu references, the first #%llu",
              (unsigned long long)f.references, (unsigned long long)f.reference_id);
    KV_CHECK(strcmp(f.ref.model, "reference") == 0 && f.ref.island == -1 && f.ref.n_parents == 0);
    char cell[KV_CELL_NAME_MAX];
    kv_cell_name(kv_cell_index(KV_TRANSPORT_SM, KV_FUSION_UNFUSED), cell);
    KV_CHECKF(f.ref.verdict == KV_VERDICT_OK && strcmp(f.ref.cell, cell) == 0, "%s in %s",
              kv_verdict_name(f.ref.verdict), f.ref.cell);
    KV_CHECK(f.ref.source_len == len);
    KV_CHECK(f.reference_proposals == 1 && f.reference_seed_evals == 1);
    KV_CHECK(f.first_eval_program == f.reference_id);
    for (int i = 0; i < ISLANDS; i++)
        KV_CHECKF(c.first_parent[i] == f.reference_id && c.first_parent_len[i] == len,
                  "island %d: first parent #%llu of %zu bytes", i,
                  (unsigned long long)c.first_parent[i], c.first_parent_len[i]);
    KV_CHECKF(c.answered['c'] >= 10 && f.children_of_reference >= 1 && sf.evaluations >= 20,
              "%llu candidates, %llu children of the reference, %llu evaluations",
              (unsigned long long)c.answered['c'], (unsigned long long)f.children_of_reference,
              (unsigned long long)sf.evaluations);
    /* without seeds, no cell is known to be out of reach: aimed elsewhere too */
    int proposals = kv_search_count_text(dir, "\"type\":\"proposal\"");
    KV_CHECKF(proposals > kv_search_count_text(dir, "\"target\":\"sm/unfused\""), "%d proposals",
              proposals);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"skipped\"") == 0);
    free(ref);
}

/* Killed right after each of its first commits (the reference's proposal,
 * the configuration, the reference's result, ...) and resumed: one
 * reference, stored and evaluated at the seed stage once, and the first
 * parent of every island of the resumed process. */
static void test_resume_once(void)
{
    for (uint64_t k = 1; k <= 5; k++) {
        char dir[4096], why[512];
        kv_test_fresh_dir(dir, sizeof dir, "seedless-resume");
        kv_fake_mutator_opts fm = {.concurrency = 1, .delay_ms = 1, .script = "c"};
        run_opts o = {
            .problems = kSeedless, .n_problems = 1, .fm = &fm, .evaluations = 12, .crash_after = k};
        kv_fake_mutator_counts c;
        kv_err err = {{0}};
        KV_CHECKF(run(dir, &o, &c, &err) == 0, "commit %llu: %s", (unsigned long long)k, err.msg);
        o.crash_after = 0;
        KV_CHECKF(run(dir, &o, &c, &err) == 0, "commit %llu: %s", (unsigned long long)k, err.msg);
        kv_search_facts sf;
        KV_CHECKF(kv_search_check(dir, kSeedless, 1, &sf, why, sizeof why) == 0, "commit %llu: %s",
                  (unsigned long long)k, why);
        facts f;
        read_facts(dir, NULL, &f);
        KV_CHECKF(f.references == 1 && f.reference_proposals == 1 && f.reference_seed_evals == 1 &&
                      f.first_eval_program == f.reference_id,
                  "killed after commit %llu: %llu references, %llu proposed, %llu evaluated at "
                  "the seed stage, the first evaluation of #%llu",
                  (unsigned long long)k, (unsigned long long)f.references,
                  (unsigned long long)f.reference_proposals,
                  (unsigned long long)f.reference_seed_evals,
                  (unsigned long long)f.first_eval_program);
        KV_CHECKF(
            c.first_parent[0] == f.reference_id && sf.unevaluated == 0 && sf.evaluations == 12,
            "killed after commit %llu: first parent #%llu, %llu evaluations", (unsigned long long)k,
            (unsigned long long)c.first_parent[0], (unsigned long long)sf.evaluations);
    }
}

/* The template mutator on problems none of which has a seed: refused before
 * anything is evaluated, naming the problem and what to add; kevo run's own
 * check (kv_search_check_seeds) says the same. */
static void test_template_refused(void)
{
    char dir[4096], patterns[4096];
    kv_test_fresh_dir(dir, sizeof dir, "seedless-template");
    source_path(patterns, sizeof patterns, "patterns");
    run_opts o = {.problems = kSeedless, .n_problems = 1, .evaluations = 30};
    kv_err err = {{0}};
    KV_CHECK(run(dir, &o, NULL, &err) != 0);
    static const char *const says[] = {
        "nothing to vary: problem seedless_max has no seed in ", "/patterns/seedless_max/",
        "the template mutator (mutator.kind \"template\") only varies the kevo:param",
        "kevo:pattern and kevo:param annotations: docs/patterns.md",
        "or use the LLM mutator (mutator.kind \"llm\""};
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        KV_CHECK_STR_CONTAINS(err.msg, says[i]);
    facts f;
    read_facts(dir, NULL, &f);
    KV_CHECK(f.references == 0 && f.first_eval_program == 0);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"proposal\"") == 0);

    kv_config cfg;
    kv_config_defaults(&cfg);
    cfg.n_problems = 1;
    snprintf(cfg.problems[0], sizeof cfg.problems[0], "seedless_max");
    kv_err check = {{0}};
    KV_CHECK(kv_search_check_seeds(&cfg, patterns, &check) != 0);
    KV_CHECK(strcmp(check.msg, err.msg) == 0);
    snprintf(cfg.problems[0], sizeof cfg.problems[0], "allreduce");
    KV_CHECKF(kv_search_check_seeds(&cfg, patterns, &check) == 0, "%s", check.msg);
    snprintf(cfg.problems[0], sizeof cfg.problems[0], "seedless_max");
    cfg.mutator = KV_MUTATOR_LLM; /* starts from the reference */
    KV_CHECKF(kv_search_check_seeds(&cfg, patterns, &check) == 0, "%s", check.msg);
}

/* The template mutator on allreduce (its seeds) and allgather (a folder in
 * patterns/ without a seed): allgather is skipped, said on the progress
 * output and in the event log at every start, nothing of it is stored, and
 * allreduce is searched to the end of the budget. */
static void test_template_skips(void)
{
    char dir[4096], patterns[4096], link[4200], target[4096], empty[4200], problems[4096];
    kv_test_fresh_dir(dir, sizeof dir, "seedless-skip");
    kv_test_fresh_dir(patterns, sizeof patterns, "seedless-patterns");
    source_path(target, sizeof target, "patterns/allreduce");
    source_path(problems, sizeof problems, "problems");
    snprintf(link, sizeof link, "%s/allreduce", patterns);
    snprintf(empty, sizeof empty, "%s/allgather", patterns);
    KV_REQUIRE(symlink(target, link) == 0 && mkdir(empty, 0755) == 0);
    static const char *const both[] = {"allreduce", "allgather"};
    FILE *progress = tmpfile();
    KV_REQUIRE(progress != NULL);
    run_opts o = {.problems_root = problems,
                  .patterns_root = patterns,
                  .problems = both,
                  .n_problems = 2,
                  .evaluations = 20,
                  .progress = progress};
    kv_err err = {{0}};
    char out[16384], why[512];
    for (int pass = 0; pass < 2; pass++) { /* a start, then a resume */
        KV_CHECKF(run(dir, &o, NULL, &err) == 0, "%s", err.msg);
        KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
        KV_CHECK_STR_CONTAINS(out, "kevo: problem allgather skipped: it has no seed in ");
        KV_CHECK_STR_CONTAINS(out, "/allgather/, and the template mutator");
        KV_CHECK_STR_CONTAINS(out, "docs/patterns.md");
        KV_CHECK(strstr(out, "allreduce skipped") == NULL);
        KV_CHECK_STR_CONTAINS(out, " | allgather skipped\n"); /* the status line */
        KV_CHECK(kv_search_count_text(dir, "\"type\":\"skipped\"") == pass + 1);
    }
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, both, 2, &sf, why, sizeof why) == 0, "%s", why);
    KV_CHECK(sf.evaluations == 20);
    KV_CHECK(kv_search_count_text(dir, "\"reason\":\"evaluation budget spent\"") == 2);
    facts f;
    read_facts(dir, "allgather", &f);
    KV_CHECK(f.of_problem == 0 && f.references == 0);
    read_facts(dir, "allreduce", &f);
    KV_CHECK(f.of_problem > 0);
    kv_config cfg;
    kv_config_defaults(&cfg);
    cfg.n_problems = 2;
    snprintf(cfg.problems[0], sizeof cfg.problems[0], "allreduce");
    snprintf(cfg.problems[1], sizeof cfg.problems[1], "allgather");
    KV_CHECKF(kv_search_check_seeds(&cfg, patterns, &err) == 0, "%s", err.msg);
    fclose(progress);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    KV_RUN(test_reference_first);
    KV_RUN(test_resume_once);
    KV_RUN(test_template_refused);
    KV_RUN(test_template_skips);
    return kv_test_summary();
}
