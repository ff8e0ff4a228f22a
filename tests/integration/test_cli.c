/* test_cli.c — the kevo command line, run as a real process: top-level
 * dispatch and `kevo archive` (list, show, best, lineage, attempts, stats,
 * export) on fixture archives built through the archive API, their usage
 * errors (exit 2) and runtime errors (exit 1), and a reader running while a
 * writer holds an open write transaction.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/base64.h"
#include "common/cell.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "problem/problem.h"
#include "test.h"
#include "test_util.h"

static const char *bin;
static char scratch[256]; /* captured output files */
static char run_dir[256]; /* the main fixture */

/* ---- running kevo ------------------------------------------------------------- */

typedef struct {
    int status; /* exit code; 128 + signal when killed */
    char *out;
    char *err;
} result;

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* Runs kevo with the NULL-terminated arguments; KEVO_RUN is set to env_run
 * (or unset when NULL). */
static void kevo_env(result *r, const char *env_run, const char *first, ...)
{
    const char *argv[48];
    int argc = 0;
    argv[argc++] = bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 47; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/stdout", scratch);
    snprintf(err_path, sizeof err_path, "%s/stderr", scratch);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        close(o);
        close(e);
        if (env_run)
            setenv("KEVO_RUN", env_run, 1);
        else
            unsetenv("KEVO_RUN");
        unsetenv("LC_ALL"); /* plain ASCII grids, whatever the caller's locale */
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    r->status = -1;
    if (pid > 0 && waitpid(pid, &status, 0) == pid)
        r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r->out = kv_test_slurp(out_path, NULL);
    r->err = kv_test_slurp(err_path, NULL);
    /* sanitizer reports (leaks on error paths too: their exit code can equal ours) */
    KV_CHECKF(strstr(r->err, "Sanitizer") == NULL && strstr(r->err, "runtime error:") == NULL,
              "kevo %s: %s", argc > 2 ? argv[2] : "", r->err);
}

#define kevo(r, ...) kevo_env((r), NULL, __VA_ARGS__, (const char *)NULL)

#define CHECK_STATUS(r, want)                                                              \
    KV_CHECKF((r).status == (want), "exit %d, want %d\nstdout: %s\nstderr: %s", (r).status, \
              (want), (r).out, (r).err)

/* A pointer, so that KV_CHECK_STR_CONTAINS does not test an array's address. */
static const char *str(const char *s)
{
    return s;
}

/* No byte a terminal acts on in kevo's stdout or stderr: control
 * characters but LF, DEL, and 0x9B (CSI; it is no UTF-8 alone). */
static void check_inert(const result *r, const char *what)
{
    const char *texts[2] = {str(r->out), str(r->err)};
    for (int k = 0; k < 2; k++) {
        for (const unsigned char *p = (const unsigned char *)texts[k]; *p; p++)
            KV_CHECKF((*p >= 0x20 && *p != 0x7f) || *p == '\n',
                      "a raw byte 0x%02x in kevo %s's %s", *p, what, k ? "stderr" : "stdout");
        KV_CHECK(strchr(texts[k], 0x9b) == NULL);
    }
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The line of text that starts with prefix, found after the first occurrence
 * of section (or anywhere when section is NULL); copied into out. */
static int find_line(const char *text, const char *section, const char *prefix, char *out,
                     size_t cap)
{
    const char *p = text;
    if (section && !(p = strstr(text, section)))
        return -1;
    size_t pl = strlen(prefix);
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len >= pl && strncmp(p, prefix, pl) == 0) {
            snprintf(out, cap, "%.*s", (int)len, p);
            return 0;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return -1;
}

/* ---- the fixture ------------------------------------------------------------------ */

typedef struct {
    const char *problem;
    int island;
    const char *op;
    const char *model;
    uint64_t parents[2];
    kv_verdict verdict;
    double speedup;
    const char *cell; /* also the elite cell when ok and elite is set */
    int elite;
} fx_program;

/* Ids are assigned in order from 1. */
static const fx_program fx[] = {
    /* 1 */ {"allreduce", 0, "seed", "allreduce_sm", {0}, KV_VERDICT_OK, 1.20, "sm/fused", 1},
    /* 2 */ {"allreduce", 0, "template", "allreduce_sm", {1}, KV_VERDICT_OK, 0.80, "ce/unfused", 1},
    /* 3 */ {"allreduce", 1, "llm", "gpt-4o, \"mini\"", {1}, KV_VERDICT_OK, 1.50, "sm/fused", 1},
    /* 4 */ {"allreduce", 1, "llm", "gpt-4o", {2, 3}, KV_VERDICT_OK, 2.31, "tma/fused", 1},
    /* 5 */ {"allreduce", 2, "llm", "gpt-4o", {4}, KV_VERDICT_OK, 1.90, "tma/fused", 1},
    /* 6 */ {"allreduce", 2, "llm", "gpt-4o", {4}, KV_VERDICT_MISMATCH, 0, "", 0},
    /* 7 */ {"allreduce", 2, "template", "allreduce_nvls", {5}, KV_VERDICT_OK, 3.05, "nvls/unfused", 1},
    /* 8 */ {"allgather", 0, "seed", "allgather_ce", {0}, KV_VERDICT_OK, 1.10, "ce/fused", 1},
    /* 9 */ {"allgather", 0, "template", "allgather_ce", {8}, KV_VERDICT_COMPILE_ERROR, 0, "", 0},
    /* 10 */ {"moe_dispatch", 0, "seed", "moe_sm", {0}, KV_VERDICT_HANG, 0, "", 0},
};
#define N_FX ((int)(sizeof fx / sizeof fx[0]))

/* Extra attempts, so that every verdict appears at least once. */
typedef struct {
    const char *problem;
    kv_stage stage;
    kv_verdict verdict;
    const char *detail;
} fx_attempt;

static const fx_attempt fx_extra[] = {
    {"allreduce", KV_STAGE_PROPOSAL, KV_VERDICT_NONE, NULL},
    {"allreduce", KV_STAGE_SCREEN, KV_VERDICT_RUNTIME_ERROR, "cudaErrorIllegalAddress\nat rank 3"},
    {"allgather", KV_STAGE_FULL, KV_VERDICT_CRASH, "worker 1 died, signal 11 (\"SIGSEGV\")"},
    {"allreduce", KV_STAGE_SCREEN, KV_VERDICT_NVLS_REFUSED, "multicast not allowed"},
    {"allgather", KV_STAGE_PROPOSAL, KV_VERDICT_DUPLICATE, "same source as #8"},
    {"moe_dispatch", KV_STAGE_PROPOSAL, KV_VERDICT_PROPOSAL_ERROR, "no code block in the reply"},
    {"moe_dispatch", KV_STAGE_SCREEN, KV_VERDICT_REFUSED, "imports dlsym"},
    {"allreduce", KV_STAGE_FULL, KV_VERDICT_IMPLAUSIBLE,
     "size 16MiB: 15.70 us is below the floor of 39.13 us (the cost model at the machine's "
     "ceilings less a 10% margin for noise): a kernel cannot move these bytes this fast; "
     "timing was gamed or the problem's cost model is wrong"},
};
#define N_EXTRA ((int)(sizeof fx_extra / sizeof fx_extra[0]))
#define N_ATTEMPTS (N_FX + N_EXTRA)

static const int64_t T0 = 1767225600000000000LL; /* 2026-01-01T00:00:00Z */

static void fx_source(int id, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "// kernel %d\n#include \"kevo/kernel.h\"\n__global__ void k%d(float *x) {\n"
             "    x[threadIdx.x] *= %d.0f; /* \"quoted\", comma */\n}\n",
             id, id, id);
}

static int fx_detail_of(int i, char *buf, size_t cap)
{
    if (fx[i].verdict == KV_VERDICT_MISMATCH) {
        snprintf(buf, cap, "mismatch at index 7, expected \"1.0\" got \"1.5\"");
        return 1;
    }
    if (fx[i].verdict == KV_VERDICT_COMPILE_ERROR) {
        snprintf(buf, cap, "error: expected ';'\n  x = 1\n      ^");
        return 1;
    }
    return 0;
}

static void fx_program_result(int i, uint64_t id, kv_program *p)
{
    memset(p, 0, sizeof *p);
    p->id = id;
    p->verdict = fx[i].verdict;
    p->speedup = fx[i].speedup;
    snprintf(p->cell, sizeof p->cell, "%s", fx[i].cell);
    if (fx[i].verdict == KV_VERDICT_OK) {
        p->n_sizes = 2;
        snprintf(p->sizes[0].name, sizeof p->sizes[0].name, "small");
        p->sizes[0].ref_us = 10;
        p->sizes[0].cand_us = 10 / fx[i].speedup;
        p->sizes[0].ok = 1;
        snprintf(p->sizes[1].name, sizeof p->sizes[1].name, "large");
        p->sizes[1].ref_us = 1000;
        p->sizes[1].cand_us = 1000 / fx[i].speedup;
        p->sizes[1].ok = 1;
        p->roofline = 0.5;
        p->evidence = "{\"sass\":[\"LDG\",\"STG\"],\"kernels\":1}";
    }
    p->evaluated_ns = T0 + (int64_t)id * 60000000000LL;
}

static int build_fixture(const char *dir)
{
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    kv_txn *t = NULL;
    if (kv_archive_open(dir, &o, &a, &err) != 0 || kv_write_begin(a, &t, &err) != 0) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        kv_archive_close(a);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < N_FX && rc == 0; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", fx[i].problem);
        snprintf(p.op, sizeof p.op, "%s", fx[i].op);
        snprintf(p.model, sizeof p.model, "%s", fx[i].model);
        p.island = fx[i].island;
        p.created_ns = T0 + (int64_t)i * 1000000000LL;
        for (int k = 0; k < 2; k++)
            if (fx[i].parents[k])
                p.parents[p.n_parents++] = fx[i].parents[k];
        char src[512];
        fx_source(i + 1, src, sizeof src);
        uint64_t id;
        rc = kv_add_program(t, &p, src, strlen(src), &id, NULL, &err);
        if (rc == 0 && id != (uint64_t)i + 1)
            rc = kv_err_set(&err, "program %d got id %llu", i + 1, (unsigned long long)id);
        kv_program r;
        fx_program_result(i, id, &r);
        if (rc == 0)
            rc = kv_set_result(t, &r, &err);
        if (rc == 0 && fx[i].elite) {
            kv_elite e = {.island = fx[i].island, .program_id = id, .fitness = fx[i].speedup,
                          .since_ns = r.evaluated_ns};
            snprintf(e.problem, sizeof e.problem, "%s", fx[i].problem);
            snprintf(e.cell, sizeof e.cell, "%s", fx[i].cell);
            rc = kv_offer_elite(t, &e, NULL, NULL, &err);
        }
        char detail[256];
        kv_attempt at = {.time_ns = r.evaluated_ns, .island = fx[i].island,
                         .stage = fx[i].parents[0] ? KV_STAGE_FULL : KV_STAGE_SEED,
                         .verdict = fx[i].verdict, .program_id = id,
                         .parent_id = fx[i].parents[0], .speedup = fx[i].speedup,
                         .wall_s = 12.5, .gpu_s = 3.0, .tokens_in = 1000, .tokens_out = 200,
                         .cost_usd = 0.0125};
        snprintf(at.problem, sizeof at.problem, "%s", fx[i].problem);
        snprintf(at.op, sizeof at.op, "%s", fx[i].op);
        snprintf(at.model, sizeof at.model, "%s", fx[i].model);
        at.detail = fx_detail_of(i, detail, sizeof detail) ? detail : NULL;
        if (rc == 0)
            rc = kv_add_attempt(t, &at, NULL, &err);
    }
    for (int i = 0; i < N_EXTRA && rc == 0; i++) {
        kv_attempt at = {.time_ns = T0 + 3600000000000LL + i, .stage = fx_extra[i].stage,
                         .verdict = fx_extra[i].verdict, .wall_s = 1.0};
        snprintf(at.problem, sizeof at.problem, "%s", fx_extra[i].problem);
        snprintf(at.op, sizeof at.op, "llm");
        at.detail = (char *)fx_extra[i].detail;
        rc = kv_add_attempt(t, &at, NULL, &err);
    }
    if (rc == 0)
        rc = kv_txn_commit(t, &err);
    else
        kv_txn_abort(t);
    if (rc != 0)
        fprintf(stderr, "fixture: %s\n", err.msg);
    kv_archive_close(a);
    return rc;
}

/* Whether fixture program i holds its cell: offered, and no other offer to
 * the same problem, island and cell has a greater fitness (or an equal one
 * and was offered first). */
static int fx_is_elite(int i)
{
    if (!fx[i].elite)
        return 0;
    for (int j = 0; j < N_FX; j++)
        if (j != i && fx[j].elite && strcmp(fx[j].problem, fx[i].problem) == 0 &&
            fx[j].island == fx[i].island && strcmp(fx[j].cell, fx[i].cell) == 0 &&
            (fx[j].speedup > fx[i].speedup || (fx[j].speedup == fx[i].speedup && j < i)))
            return 0;
    return 1;
}

/* Expected values, computed from the fixture tables (not by kevo's code). */
typedef struct {
    int programs, attempts, ok;
    int best_id;
    double best;
    int coverage;
    double qd;
    int cell_id[KV_CELL_COUNT];
    double cell_fit[KV_CELL_COUNT];
} expect;

static int cell_index_of(const char *name)
{
    static const char *const names[] = {"ce/fused",  "ce/unfused",  "sm/fused",   "sm/unfused",
                                        "tma/fused", "tma/unfused", "nvls/fused", "nvls/unfused"};
    for (int i = 0; i < 8; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

static void expected(const char *problem, int island, expect *e)
{
    memset(e, 0, sizeof *e);
    for (int i = 0; i < N_FX; i++) {
        if (strcmp(fx[i].problem, problem) != 0)
            continue;
        e->programs++;
        e->attempts++;
        if (fx[i].verdict == KV_VERDICT_OK) {
            e->ok++;
            if (fx[i].speedup > e->best) {
                e->best = fx[i].speedup;
                e->best_id = i + 1;
            }
        }
        if (!fx[i].elite || (island >= 0 && fx[i].island != island))
            continue;
        int c = cell_index_of(fx[i].cell);
        if (!e->cell_id[c] || fx[i].speedup > e->cell_fit[c]) {
            e->cell_id[c] = i + 1;
            e->cell_fit[c] = fx[i].speedup;
        }
    }
    for (int i = 0; i < N_EXTRA; i++)
        if (strcmp(fx_extra[i].problem, problem) == 0)
            e->attempts++;
    for (int c = 0; c < KV_CELL_COUNT; c++) {
        if (e->cell_id[c]) {
            e->coverage++;
            e->qd += e->cell_fit[c];
        }
    }
}

/* ---- CSV --------------------------------------------------------------------------- */

typedef struct {
    char *field[32];
    int n;
} csv_row;

/* A strict RFC 4180 reader; returns the number of rows (at most max), -1 on
 * malformed input. */
static int csv_parse(const char *s, csv_row *rows, int max)
{
    int nrows = 0;
    while (*s && nrows < max) {
        csv_row *r = &rows[nrows++];
        r->n = 0;
        for (;;) {
            char *buf = malloc(strlen(s) + 1);
            size_t len = 0;
            if (*s == '"') {
                s++;
                for (;;) {
                    if (!*s) {
                        free(buf);
                        return -1;
                    }
                    if (*s == '"' && s[1] == '"') {
                        buf[len++] = '"';
                        s += 2;
                    } else if (*s == '"') {
                        s++;
                        break;
                    } else {
                        buf[len++] = *s++;
                    }
                }
            } else {
                while (*s && *s != ',' && *s != '\n') {
                    if (*s == '"') {
                        free(buf);
                        return -1;
                    }
                    buf[len++] = *s++;
                }
            }
            buf[len] = 0;
            if (r->n < 32)
                r->field[r->n++] = buf;
            else
                free(buf);
            if (*s == ',') {
                s++;
                continue;
            }
            if (*s == '\n')
                s++;
            else if (*s)
                return -1;
            break;
        }
    }
    return nrows;
}

static void csv_free(csv_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rows[i].n; k++)
            free(rows[i].field[k]);
}

/* ---- tests --------------------------------------------------------------------------- */

static void test_top_level(void)
{
    result r;
    kevo_env(&r, NULL, NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo");
    result_free(&r);

    kevo(&r, "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "archive");
    KV_CHECK_STR_CONTAINS(r.out, "config");
    result_free(&r);

    kevo(&r, "foo");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown command 'foo'");
    KV_CHECK(strstr(r.err, "did you mean") == NULL);
    result_free(&r);

    kevo(&r, "archiv");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'archive'");
    result_free(&r);
}

static void test_help_and_usage(void)
{
    static const char *const names[] = {"list", "show", "best", "lineage", "attempts", "stats",
                                        "export"};
    result r;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kevo(&r, "archive", names[i], "--help");
        CHECK_STATUS(r, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: kevo archive %s", names[i]);
        KV_CHECK_STR_CONTAINS(r.out, want);
        result_free(&r);
    }
    kevo(&r, "archive", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "lineage");
    result_free(&r);

    kevo(&r, "archive");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing view");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown view 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo archive");
    result_free(&r);

    kevo(&r, "archive", "lst");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'list'");
    result_free(&r);

    kevo(&r, "archive", "--bogus", "list");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
    result_free(&r);

    kevo(&r, "archive", "list", "--run", run_dir, "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo archive list");
    result_free(&r);

    kevo(&r, "archive", "list", "-x");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '-x'");
    result_free(&r);

    kevo(&r, "archive", "list", "--island", "1"); /* an option of another view */
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "list", "extra");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unexpected argument 'extra'");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing PROBLEM");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "allgather");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unexpected extra argument 'allgather'");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "needs a value");
    result_free(&r);

    /* restore and upgrade take one run directory, as DIR or --run DIR */
    static const char *const one_dir[] = {"restore", "upgrade"};
    for (int k = 0; k < 2; k++) {
        kevo(&r, "archive", one_dir[k], "--run");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "option '--run' needs a value");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "--run", run_dir, "--run", run_dir);
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "the run directory is given twice (at '--run')");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], run_dir, "other");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "unexpected argument 'other' (one run directory)");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "the run directory is empty");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "--bogus");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
        result_free(&r);
        kevo(&r, "archive", one_dir[k]);
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "missing the run directory DIR");
        result_free(&r);
    }

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island", "x");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "abc");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "not a program id");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown verdict 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "compile_error");
    KV_CHECK_STR_CONTAINS(r.err, "proposal_error");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--stage", "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown stage 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "remeasure");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "0");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "tma/sideways");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown cell 'tma/sideways'");
    KV_CHECK_STR_CONTAINS(r.err, "nvls/unfused");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--format", "xml");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "json, csv");
    result_free(&r);

    kevo(&r, "archive", "--run");
    CHECK_STATUS(r, 2);
    result_free(&r);
}

static void test_runtime_errors(void)
{
    result r;
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no-such-run", scratch);
    kevo(&r, "archive", "--run", missing, "list");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "kevo: ");
    KV_CHECK_STR_CONTAINS(r.err, missing);
    KV_CHECK(r.out[0] == 0);
    result_free(&r);

    char empty[256];
    kv_test_fresh_dir(empty, sizeof empty, "cli-empty");
    kevo(&r, "archive", "stats", "--run", empty);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, empty);
    KV_CHECK_STR_CONTAINS(r.err, "no archive");
    result_free(&r);

    char bad[256], file[320];
    kv_test_fresh_dir(bad, sizeof bad, "cli-bad");
    snprintf(file, sizeof file, "%s/" KV_ARCHIVE_FILE, bad);
    char junk[8192];
    memset(junk, 'x', sizeof junk);
    kv_err err;
    KV_REQUIRE(kv_write_file_atomic(file, junk, sizeof junk, &err) == 0);
    kevo(&r, "archive", "--run", bad, "show", "allreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, file);
    KV_CHECK_STR_CONTAINS(r.err, "not an LMDB archive");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduse");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "unknown problem 'allreduse'");
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'allreduce'");
    KV_CHECK_STR_CONTAINS(r.err, "allgather, allreduce, moe_dispatch");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "moe_dispatch");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "no ok program");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "ce/fused");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "no elite in cell ce/fused");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "999");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "program #999 not found");
    result_free(&r);

    char nodir[320];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir/out.cu", scratch);
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--out", nodir);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, nodir);
    result_free(&r);
    kevo(&r, "archive", "--run", run_dir, "export", "--out", nodir);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, nodir);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--problem", "nope");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "unknown problem 'nope'");
    result_free(&r);
}

static void check_list_line(const char *out, const char *problem)
{
    expect e;
    expected(problem, -1, &e);
    char line[512], want[256];
    KV_REQUIRE(find_line(out, NULL, problem, line, sizeof line) == 0);
    char prob[64], best[64], cov[32];
    long programs = -1, attempts = -1, ok = -1;
    int n = sscanf(line, "%63s %ld %ld %ld", prob, &programs, &attempts, &ok);
    KV_CHECKF(n == 4 && programs == e.programs && attempts == e.attempts && ok == e.ok,
              "%s: %s", problem, line);
    if (e.best_id)
        snprintf(best, sizeof best, "%.2fx #%d", e.best, e.best_id);
    else
        snprintf(best, sizeof best, " - ");
    snprintf(cov, sizeof cov, "%d/8", e.coverage);
    KV_CHECK_STR_CONTAINS(str(line), best);
    snprintf(want, sizeof want, " %s", cov);
    KV_CHECK_STR_CONTAINS(str(line), want);
}

static void test_list(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "list");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "coverage");
    check_list_line(r.out, "allreduce");
    check_list_line(r.out, "allgather");
    check_list_line(r.out, "moe_dispatch");
    KV_CHECK(count_lines(r.out) == 4);
    result_free(&r);

    /* the default run directory ($KEVO_RUN), and --run=DIR after the view */
    kevo_env(&r, run_dir, "archive", "list", (const char *)NULL);
    CHECK_STATUS(r, 0);
    check_list_line(r.out, "allreduce");
    result_free(&r);
    char opt[300];
    snprintf(opt, sizeof opt, "--run=%s", run_dir);
    kevo(&r, "archive", "list", opt, "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECK(j != NULL);
    cJSON *probs = cJSON_GetObjectItem(j, "problems");
    KV_CHECK(cJSON_GetArraySize(probs) == 3);
    for (int i = 0; i < cJSON_GetArraySize(probs); i++) {
        cJSON *p = cJSON_GetArrayItem(probs, i);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(p, "problem"));
        KV_REQUIRE(name);
        expect e;
        expected(name, -1, &e);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "programs")) == e.programs);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "attempts")) == e.attempts);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "ok")) == e.ok);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "coverage")) == e.coverage);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "cells")) == 8);
        cJSON *best = cJSON_GetObjectItem(p, "best");
        if (e.best_id) {
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(best, "program")) == e.best_id);
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(best, "speedup")) == e.best);
        } else {
            KV_CHECK(cJSON_IsNull(best));
        }
    }
    cJSON_Delete(j);
    result_free(&r);
}

/* Checks one grid row of the text output against the expectation. */
static void check_grid_row(const char *out, const char *section, const expect *e, int t)
{
    static const char *const rows[] = {"  ce ", "  sm ", "  tma ", "  nvls "};
    char line[512];
    KV_REQUIRE(find_line(out, section, rows[t], line, sizeof line) == 0);
    /* the two cells, in column order */
    const char *p = line + strlen(rows[t]);
    for (int f = 0; f < 2; f++) {
        int c = t * 2 + f;
        while (*p == ' ')
            p++;
        char want[64];
        if (e->cell_id[c])
            snprintf(want, sizeof want, "%.2fx #%d", e->cell_fit[c], e->cell_id[c]);
        else
            snprintf(want, sizeof want, "-");
        KV_CHECKF(strncmp(p, want, strlen(want)) == 0, "%s row %s: want '%s' in '%s'", section,
                  rows[t], want, line);
        p += strlen(want);
    }
}

static void test_show(void)
{
    result r;
    kevo(&r, "archive", "show", "allreduce", "--run", run_dir);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "fused");
    KV_CHECK_STR_CONTAINS(r.out, "unfused");
    for (int island = 0; island < 3; island++) {
        char section[64];
        snprintf(section, sizeof section, "\nisland %d:", island);
        KV_CHECK_STR_CONTAINS(r.out, section);
        expect e;
        expected("allreduce", island, &e);
        for (int t = 0; t < 4; t++)
            check_grid_row(r.out, section, &e, t);
    }
    expect m;
    expected("allreduce", -1, &m);
    KV_CHECK(m.coverage == 4 && m.cell_id[cell_index_of("tma/fused")] == 4);
    for (int t = 0; t < 4; t++)
        check_grid_row(r.out, "\nmerged", &m, t);
    char want[128];
    snprintf(want, sizeof want, "coverage %d/8, QD score %.4f", m.coverage, m.qd);
    KV_CHECK_STR_CONTAINS(r.out, want);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island", "2");
    CHECK_STATUS(r, 0);
    expect e2;
    expected("allreduce", 2, &e2);
    for (int t = 0; t < 4; t++)
        check_grid_row(r.out, "island 2", &e2, t);
    KV_CHECK(strstr(r.out, "merged") == NULL && strstr(r.out, "island 1") == NULL);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "problem")), "allreduce") == 0);
    KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "cells")) == 8);
    cJSON *islands = cJSON_GetObjectItem(j, "islands");
    KV_CHECK(cJSON_GetArraySize(islands) == 3);
    for (int i = 0; i < cJSON_GetArraySize(islands); i++) {
        cJSON *is = cJSON_GetArrayItem(islands, i);
        int island = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(is, "island"));
        KV_CHECK(island == i);
        expect e;
        expected("allreduce", island, &e);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(is, "coverage")) == e.coverage);
        KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(is, "qd_score")) - e.qd) < 1e-9);
        cJSON *grid = cJSON_GetObjectItem(is, "grid");
        KV_CHECK(cJSON_GetArraySize(grid) == 8);
        for (int c = 0; c < 8; c++) {
            cJSON *cell = cJSON_GetArrayItem(grid, c);
            KV_CHECK(cell_index_of(cell->string) == c);
            if (!e.cell_id[c]) {
                KV_CHECK(cJSON_IsNull(cell));
                continue;
            }
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cell, "program")) == e.cell_id[c]);
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cell, "speedup")) == e.cell_fit[c]);
        }
    }
    cJSON *merged = cJSON_GetObjectItem(j, "merged");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(merged, "coverage")) == m.coverage);
    KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(merged, "qd_score")) - m.qd) < 1e-9);
    cJSON *mg = cJSON_GetObjectItem(merged, "grid");
    cJSON *nvls = cJSON_GetObjectItem(mg, "nvls/unfused");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(nvls, "program")) == 7);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(nvls, "island")) == 2);
    cJSON *tma = cJSON_GetObjectItem(mg, "tma/fused");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(tma, "program")) == 4);
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(mg, "ce/fused")));
    cJSON_Delete(j);
    result_free(&r);

    /* a problem with programs but no elites: empty grids */
    kevo(&r, "archive", "--run", run_dir, "show", "moe_dispatch");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "coverage 0/8");
    result_free(&r);
}

static void test_best(void)
{
    char src[512];
    fx_source(7, src, sizeof src);
    result r;
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce");
    CHECK_STATUS(r, 0);
    size_t ol = strlen(r.out), sl = strlen(src);
    KV_CHECK(ol > sl && strcmp(r.out + ol - sl, src) == 0); /* the exact source, last */
    const char *head = "// kevo program #7 of problem allreduce\n";
    KV_CHECK(strncmp(r.out, head, strlen(head)) == 0);
    KV_CHECK_STR_CONTAINS(r.out, "// problem:    allreduce\n");
    KV_CHECK_STR_CONTAINS(r.out, "3.05x (geometric mean over 2 sizes");
    KV_CHECK_STR_CONTAINS(r.out, "small");
    KV_CHECK_STR_CONTAINS(r.out, "10.000 us");
    KV_CHECK_STR_CONTAINS(r.out, "large");
    KV_CHECK_STR_CONTAINS(r.out, "1000.000 us");
    KV_CHECK_STR_CONTAINS(r.out, "nvls/unfused");
    KV_CHECK_STR_CONTAINS(r.out, "{\"sass\":[\"LDG\",\"STG\"],\"kernels\":1}");
    KV_CHECK_STR_CONTAINS(r.out, "// operator:   template\n");
    KV_CHECK_STR_CONTAINS(r.out, "// model:      allreduce_nvls\n");
    KV_CHECK_STR_CONTAINS(r.out, "// parents:    #5\n");
    char when[64], want[128];
    kv_format_utc(T0 + 7 * 60000000000LL, when, sizeof when);
    snprintf(want, sizeof want, "// evaluated:  %s\n", when);
    KV_CHECK_STR_CONTAINS(r.out, want);
    KV_CHECK_STR_CONTAINS(r.out, "// exported by kevo ");
    /* every header line is a comment */
    for (const char *p = r.out; p < r.out + ol - sl; p = strchr(p, '\n') + 1)
        KV_CHECKF(strncmp(p, "//", 2) == 0, "header line: %.40s", p);
    char *first = strdup(r.out);
    result_free(&r);

    /* the best of one cell over islands */
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "tma/fused");
    CHECK_STATUS(r, 0);
    fx_source(4, src, sizeof src);
    ol = strlen(r.out);
    sl = strlen(src);
    KV_CHECK(ol > sl && strcmp(r.out + ol - sl, src) == 0);
    KV_CHECK_STR_CONTAINS(r.out, "// parents:    #2, #3\n");
    result_free(&r);

    /* --out writes the same text to a file */
    char out[320];
    snprintf(out, sizeof out, "%s/best.cu", scratch);
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--out", out);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, out);
    char *file = kv_test_slurp(out, NULL);
    /* identical up to the export date (the last header line) */
    const char *a = strstr(first, "// exported by"), *b = strstr(file, "// exported by");
    KV_CHECK(a && b && a - first == b - file && strncmp(first, file, (size_t)(a - first)) == 0);
    KV_CHECK(a && b && strcmp(strchr(a, '\n'), strchr(b, '\n')) == 0);
    free(file);
    free(first);
    result_free(&r);
}

static void test_lineage(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "lineage", "4");
    CHECK_STATUS(r, 0);
    const char *anc = strstr(r.out, "ancestors"), *desc = strstr(r.out, "descendants");
    KV_REQUIRE(anc && desc && anc < desc);
    KV_CHECK(strncmp(r.out, "#4  llm  ok  2.31x  tma/fused", 29) == 0);
    /* parents 2 and 3 at the first level, 1 under each (the second time as "shown above") */
    KV_CHECK_STR_CONTAINS(anc, "\n  #2  template  ok  0.80x  ce/unfused\n    #1  seed  ok  1.20x");
    KV_CHECK_STR_CONTAINS(anc, "\n  #3  llm  ok  1.50x  sm/fused\n    #1  ");
    KV_CHECK_STR_CONTAINS(anc, "(shown above)");
    /* children 5 and 6, grandchild 7 under 5 */
    KV_CHECK_STR_CONTAINS(desc, "\n  #5  llm  ok  1.90x  tma/fused\n    #7  template  ok  3.05x");
    KV_CHECK_STR_CONTAINS(desc, "\n  #6  llm  mismatch  -  -\n");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "#4", "--depth", "1");
    CHECK_STATUS(r, 0);
    KV_CHECK(strstr(r.out, "#1 ") == NULL && strstr(r.out, "#7 ") == NULL);
    KV_CHECK_STR_CONTAINS(r.out, "#5 ");
    KV_CHECK_STR_CONTAINS(r.out, "#3 ");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "1");
    CHECK_STATUS(r, 0);
    anc = strstr(r.out, "ancestors");
    KV_CHECK(anc && strstr(anc, "(none)") && strstr(anc, "(none)") < strstr(anc, "descendants"));
    KV_CHECK_STR_CONTAINS(r.out, "        #7  "); /* 1 -> 2 -> 4 -> 5 -> 7: level 4 */
    result_free(&r);
}

static int attempt_lines(const char *out)
{
    return count_lines(out) - 1; /* the header */
}

static void test_attempts(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "attempts");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == N_ATTEMPTS);
    KV_CHECK_STR_CONTAINS(r.out, "2026-01-01T00:01:00Z"); /* program 1's evaluation */
    KV_CHECK_STR_CONTAINS(r.out, "cudaErrorIllegalAddress\n"); /* first line of the detail only */
    KV_CHECK(strstr(r.out, "at rank 3") == NULL);
    KV_CHECK_STR_CONTAINS(r.out, "mismatch at index 7, expected \"1.0\" got \"1.5\"");
    char line[512];
    KV_REQUIRE(find_line(r.out, NULL, "      1 ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), "allreduce");
    KV_CHECK_STR_CONTAINS(str(line), "seed");
    KV_CHECK_STR_CONTAINS(str(line), "#1");
    KV_CHECK_STR_CONTAINS(str(line), "1.20x");
    KV_CHECK_STR_CONTAINS(str(line), "12.5");
    KV_CHECK_STR_CONTAINS(str(line), "1200");
    KV_CHECK_STR_CONTAINS(str(line), "0.0125");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--problem", "allgather");
    CHECK_STATUS(r, 0);
    expect e;
    expected("allgather", -1, &e);
    KV_CHECK(attempt_lines(r.out) == e.attempts);
    KV_CHECK(strstr(r.out, "allreduce") == NULL);
    result_free(&r);

    for (int v = 0; v < KV_VERDICT_COUNT; v++) {
        int want = 0;
        for (int i = 0; i < N_FX; i++)
            want += fx[i].verdict == (kv_verdict)v;
        for (int i = 0; i < N_EXTRA; i++)
            want += fx_extra[i].verdict == (kv_verdict)v;
        KV_CHECK(want > 0); /* the fixture has every verdict */
        kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", kv_verdict_name(v));
        CHECK_STATUS(r, 0);
        KV_CHECKF(attempt_lines(r.out) == want, "verdict %s: %d lines", kv_verdict_name(v),
                  attempt_lines(r.out));
        result_free(&r);
    }

    kevo(&r, "archive", "--run", run_dir, "attempts", "--stage", "proposal", "--problem",
         "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 1);
    result_free(&r);

    /* --limit alone: the last N; with --from: N from there */
    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "3");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 3);
    KV_CHECK(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0);
    KV_CHECK(find_line(r.out, NULL, "     16 ", line, sizeof line) == 0);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "2", "--problem", "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 2);
    KV_CHECK(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0); /* implausible */
    KV_CHECK(find_line(r.out, NULL, "     14 ", line, sizeof line) == 0); /* nvls_refused */
    result_free(&r);

    /* a time below the floor is listed with its numbers */
    kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", "implausible");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 1);
    KV_REQUIRE(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), "implausible");
    KV_CHECK_STR_CONTAINS(str(line), "size 16MiB: 15.70 us is below the floor of 39.13 us");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--from", "5", "--limit", "2");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 2);
    KV_CHECK(find_line(r.out, NULL, "      5 ", line, sizeof line) == 0);
    KV_CHECK(find_line(r.out, NULL, "      6 ", line, sizeof line) == 0);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--json", "--from", "10");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == N_ATTEMPTS - 9);
    cJSON *a12 = cJSON_GetArrayItem(j, 2);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(a12, "seq")) == 12);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "verdict")), "runtime_error") == 0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "detail")),
                    "cudaErrorIllegalAddress\nat rank 3") == 0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "stage")), "screen") == 0);
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(a12, "program")));
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--json", "--verdict", "crash", "--problem",
         "allreduce");
    CHECK_STATUS(r, 0);
    j = cJSON_Parse(r.out);
    KV_CHECK(j && cJSON_IsArray(j) && cJSON_GetArraySize(j) == 0);
    cJSON_Delete(j);
    result_free(&r);
}

static void test_stats(void)
{
    static const char *const problems[] = {"allgather", "allreduce", "moe_dispatch"};
    double total = 0;
    expect e[3];
    for (int i = 0; i < 3; i++) {
        expected(problems[i], -1, &e[i]);
        total += e[i].qd;
    }
    KV_CHECK(fabs(e[1].qd - (0.80 + 1.50 + 2.31 + 3.05)) < 1e-9);

    result r;
    kevo(&r, "archive", "--run", run_dir, "stats", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "programs")) == N_FX);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "attempts")) == N_ATTEMPTS);
    int elites = 0;
    for (int i = 0; i < N_FX; i++)
        elites += fx[i].elite;
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "elites")) == elites);
    cJSON *by = cJSON_GetObjectItem(j, "attempts_by_verdict");
    KV_CHECK(cJSON_GetArraySize(by) == KV_VERDICT_COUNT);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "ok")) == 7);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "hang")) == 1);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "proposal_error")) == 1);
    KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "qd_score")) - total) < 1e-9);
    cJSON *probs = cJSON_GetObjectItem(j, "problems");
    KV_CHECK(cJSON_GetArraySize(probs) == 3);
    for (int i = 0; i < 3 && i < cJSON_GetArraySize(probs); i++) {
        cJSON *p = cJSON_GetArrayItem(probs, i);
        KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "problem")), problems[i]) == 0);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "coverage")) == e[i].coverage);
        KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "qd_score")) - e[i].qd) < 1e-9);
    }
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "state")));
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "stats");
    CHECK_STATUS(r, 0);
    char want[128], line[512];
    KV_REQUIRE(find_line(r.out, NULL, "allreduce ", line, sizeof line) == 0);
    snprintf(want, sizeof want, "%.4f", e[1].qd);
    KV_CHECK_STR_CONTAINS(str(line), want);
    KV_CHECK_STR_CONTAINS(str(line), "4/8");
    KV_CHECK_STR_CONTAINS(str(line), "3.05x #7");
    KV_REQUIRE(find_line(r.out, NULL, "total ", line, sizeof line) == 0);
    snprintf(want, sizeof want, "%.4f", total);
    KV_CHECK_STR_CONTAINS(str(line), want);
    KV_REQUIRE(find_line(r.out, NULL, "  compile_error ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), " 1");
    result_free(&r);
}

static void test_export(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == N_FX);
    cJSON *p4 = cJSON_GetArrayItem(j, 3);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p4, "id")) == 4);
    cJSON *parents = cJSON_GetObjectItem(p4, "parents");
    KV_CHECK(cJSON_GetArraySize(parents) == 2 &&
             cJSON_GetNumberValue(cJSON_GetArrayItem(parents, 1)) == 3);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p4, "cell")), "tma/fused") == 0);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p4, "speedup")) == 2.31);
    KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p4, "sizes")) == 2);
    KV_CHECK(cJSON_GetObjectItem(p4, "source") == NULL);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p4, "created")),
                    "2026-01-01T00:00:03Z") == 0);
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--problem", "allreduce", "--with-source");
    CHECK_STATUS(r, 0);
    j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == 7);
    char src[512];
    fx_source(6, src, sizeof src);
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 5), "source"));
    KV_CHECK(got && strcmp(got, src) == 0);
    cJSON_Delete(j);
    result_free(&r);

    /* csv: one row per program and size; a program without sizes has one */
    int want_rows = 0;
    for (int i = 0; i < N_FX; i++)
        want_rows += fx[i].verdict == KV_VERDICT_OK ? 2 : 1;
    csv_row rows[32];
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "csv");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == want_rows + 1);
    int n = csv_parse(r.out, rows, 32);
    KV_CHECK(n == want_rows + 1);
    for (int i = 0; i < n; i++)
        KV_CHECKF(rows[i].n == 19, "row %d has %d fields", i, rows[i].n);
    if (n == want_rows + 1) {
        KV_CHECK(strcmp(rows[0].field[0], "id") == 0 && strcmp(rows[0].field[2], "size") == 0 &&
                 strcmp(rows[0].field[11], "elite") == 0 &&
                 strcmp(rows[0].field[16], "model") == 0);
        int row = 1;
        for (int i = 0; i < N_FX && row < n; i++) {
            int sizes = fx[i].verdict == KV_VERDICT_OK ? 2 : 1;
            for (int k = 0; k < sizes && row < n; k++, row++) {
                char **f = rows[row].field;
                char id[16];
                snprintf(id, sizeof id, "%d", i + 1);
                KV_CHECKF(strcmp(f[0], id) == 0, "row %d: id %s, want %s", row, f[0], id);
                KV_CHECK(strcmp(f[1], fx[i].problem) == 0);
                KV_CHECK(strcmp(f[10], fx[i].cell) == 0);
                KV_CHECKF(strcmp(f[11], fx_is_elite(i) ? "true" : "false") == 0,
                          "program %d: elite %s", i + 1, f[11]);
                KV_CHECK(strcmp(f[12], kv_verdict_name(fx[i].verdict)) == 0);
                KV_CHECK(strcmp(f[13], fx[i].op) == 0);
                KV_CHECK(atoi(f[14]) == fx[i].island);
                KV_CHECK(strcmp(f[16], fx[i].model) == 0); /* comma and quotes */
                if (fx[i].verdict != KV_VERDICT_OK) {
                    KV_CHECK(f[2][0] == 0 && f[3][0] == 0 && f[8][0] == 0);
                    continue;
                }
                double ref = k == 0 ? 10 : 1000, cand = ref / fx[i].speedup;
                KV_CHECK(strcmp(f[2], k == 0 ? "small" : "large") == 0);
                KV_CHECK(strtod(f[3], NULL) == cand && strtod(f[7], NULL) == ref);
                KV_CHECK(strtod(f[8], NULL) == ref / cand);
                KV_CHECK(f[6][0] == 0);   /* no CV in this evidence */
                KV_CHECK(f[9][0] == 0);   /* small, large: not sizes of the definitions */
                KV_CHECK(strcmp(f[17], "true") == 0);
            }
        }
        KV_CHECK(row == n);
        KV_CHECK(strcmp(rows[8].field[15], "2;3") == 0); /* program 4 */
    }
    KV_CHECK_STR_CONTAINS(r.out, ",\"gpt-4o, \"\"mini\"\"\",");
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);

    char out[320];
    snprintf(out, sizeof out, "%s/export.csv", scratch);
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "csv", "--with-source", "--out",
         out);
    CHECK_STATUS(r, 0);
    KV_CHECK(r.out[0] == 0);
    char *file = kv_test_slurp(out, NULL);
    n = csv_parse(file, rows, 32);
    KV_CHECK(n == want_rows + 1);
    fx_source(9, src, sizeof src); /* program 9: no sizes, the last row but one */
    KV_CHECK(n == want_rows + 1 && rows[n - 2].n == 21 && strcmp(rows[n - 2].field[0], "9") == 0 &&
             strcmp(rows[n - 2].field[19], "text") == 0 && strcmp(rows[n - 2].field[20], src) == 0);
    fx_source(1, src, sizeof src); /* on each of a program's rows */
    KV_CHECK(n > 2 && rows[1].n == 21 && strcmp(rows[1].field[20], src) == 0 &&
             strcmp(rows[2].field[20], src) == 0);
    KV_CHECK(n > 0 && strcmp(rows[0].field[19], "source_encoding") == 0 &&
             strcmp(rows[0].field[20], "source") == 0);
    csv_free(rows, n > 0 ? n : 0);
    free(file);
    result_free(&r);
}

/* A source and a model name holding escapes: the CSV export writes no byte
 * a terminal acts on, and the exact source comes back from its base64. */
static void test_export_escapes(void)
{
    static const char src[] = "// \x1b]0;pwned\x07\x1b[2J\r\n__global__ void k() {}\n";
    char dir[320];
    snprintf(dir, sizeof dir, "%s/escapes-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "allreduce");
    snprintf(p.op, sizeof p.op, "seed");
    snprintf(p.model, sizeof p.model, "m\x1b[31m");
    KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), NULL, NULL, &err) == 0);
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    result r;
    kevo(&r, "archive", "--run", dir, "export", "--format", "csv", "--with-source");
    CHECK_STATUS(r, 0);
    check_inert(&r, "archive export");
    csv_row rows[4];
    int n = csv_parse(r.out, rows, 4);
    char *b64 = kv_base64(src, strlen(src));
    KV_REQUIRE(b64);
    KV_CHECK(n == 2 && rows[1].n == 21 && strcmp(rows[1].field[16], "m\\e[31m") == 0 &&
             strcmp(rows[1].field[19], "base64") == 0 && strcmp(rows[1].field[20], b64) == 0);
    free(b64);
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);
}

/* The per-size rows of export --format csv|jsonl on an archive of real
 * sizes of allreduce, a stored world of 4 and evaluator evidence: times,
 * spread, CV from the evidence, speedup, GB/s from the problem's cost model
 * (send_bytes = 2 (W-1)/W x 2N, written out here), the elite flag. */
static void test_export_rows(void)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/rows-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    KV_REQUIRE(kv_put_config(t, "{\"problems\": [\"allreduce\"], \"world\": 4}", &err) == 0);
    /* program 1: an elite, two sizes, CV in its evidence for 1MiB only;
     * program 2: not an elite (its cell holds 1), and a size that is not the problem's */
    static const struct {
        const char *size;
        double ref, cand, p10, p90;
    } sz[2][2] = {{{"1MiB", 16, 12.5, 12.25, 13.75}, {"256MiB", 1170, 780, 779, 790.5}},
                  {{"1MiB", 16, 20, 19, 21}, {"bogus", 5, 4, 3.5, 4.5}}};
    for (int i = 0; i < 2; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "allreduce");
        snprintf(p.op, sizeof p.op, i ? "llm" : "seed");
        p.island = 0;
        if (i)
            p.parents[p.n_parents++] = 1;
        char src[64];
        snprintf(src, sizeof src, "__global__ void k%d() {}\n", i + 1);
        uint64_t id;
        KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), &id, NULL, &err) == 0);
        p.id = id;
        p.verdict = KV_VERDICT_OK;
        p.n_sizes = 2;
        for (int k = 0; k < 2; k++) {
            kv_size_result *r = &p.sizes[k];
            snprintf(r->name, sizeof r->name, "%s", sz[i][k].size);
            r->ref_us = sz[i][k].ref;
            r->cand_us = sz[i][k].cand;
            r->cand_p10_us = sz[i][k].p10;
            r->cand_p90_us = sz[i][k].p90;
            r->ok = 1;
            r->timing = KV_SIZE_TIMING_GRAPH;
        }
        p.speedup = 1.3;
        snprintf(p.cell, sizeof p.cell, "sm/fused");
        p.evidence = i ? NULL
                       : "{\"sizes\":[{\"name\":\"1MiB\",\"candidate\":{\"median_us\":12.5,"
                         "\"cv\":0.0325}},{\"name\":\"256MiB\"}]}";
        p.evaluated_ns = T0;
        KV_REQUIRE(kv_set_result(t, &p, &err) == 0);
        kv_elite e = {.island = 0, .program_id = id, .fitness = i ? 0.9 : 1.3};
        snprintf(e.problem, sizeof e.problem, "allreduce");
        snprintf(e.cell, sizeof e.cell, "sm/fused");
        KV_REQUIRE(kv_offer_elite(t, &e, NULL, NULL, &err) == 0);
    }
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    /* N of each size from the problem's file; the cost model written out */
    char pdir[512];
    snprintf(pdir, sizeof pdir, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    kv_problem def;
    KV_REQUIRE(kv_problem_load(pdir, &def, &err) == 0);
    double gbps[2][2];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            int at = kv_problem_find_size(&def, sz[i][k].size);
            double n = at >= 0 ? (double)def.sizes[at].values[0] : NAN;
            gbps[i][k] = 2.0 * (4 - 1) * (2 * n) / 4 / (sz[i][k].cand * 1e-6) / 1e9;
        }
    kv_problem_free(&def);

    result r;
    kevo(&r, "archive", "--run", dir, "export", "--format", "csv");
    CHECK_STATUS(r, 0);
    csv_row rows[8];
    int n = csv_parse(r.out, rows, 8);
    KV_CHECKF(n == 5, "%d rows:\n%s\nstderr: %s", n, r.out, r.err);
    for (int row = 1; row < n && n == 5; row++) {
        int i = (row - 1) / 2, k = (row - 1) % 2;
        char **f = rows[row].field;
        KV_REQUIRE(rows[row].n == 19);
        KV_CHECK(atoi(f[0]) == i + 1 && strcmp(f[2], sz[i][k].size) == 0);
        KV_CHECK(strtod(f[3], NULL) == sz[i][k].cand && strtod(f[4], NULL) == sz[i][k].p10 &&
                 strtod(f[5], NULL) == sz[i][k].p90 && strtod(f[7], NULL) == sz[i][k].ref);
        KV_CHECK(strtod(f[8], NULL) == sz[i][k].ref / sz[i][k].cand);
        if (i == 0 && k == 0)
            KV_CHECKF(strtod(f[6], NULL) == 0.0325, "cv %s", f[6]);
        else
            KV_CHECKF(f[6][0] == 0, "cv %s, want empty", f[6]);
        if (isnan(gbps[i][k]))
            KV_CHECKF(f[9][0] == 0, "gbps %s at %s, want empty", f[9], f[2]);
        else
            KV_CHECKF(fabs(strtod(f[9], NULL) - gbps[i][k]) < 1e-9 * gbps[i][k],
                      "gbps %s at %s, want %.6f", f[9], f[2], gbps[i][k]);
        KV_CHECK(strcmp(f[11], i == 0 ? "true" : "false") == 0);
        KV_CHECK(strcmp(f[15], i == 0 ? "" : "1") == 0);
        KV_CHECK(strcmp(f[18], "graph") == 0);
    }
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);

    /* jsonl: the same rows, one object a line */
    kevo(&r, "archive", "--run", dir, "export", "--format", "jsonl");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == 4);
    char *line = r.out;
    for (int row = 0; row < 4 && line && *line; row++) {
        int i = row / 2, k = row % 2;
        char *eol = strchr(line, '\n');
        if (eol)
            *eol = 0;
        cJSON *j = cJSON_Parse(line);
        KV_REQUIRE(j);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "id")) == i + 1);
        KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "size")), sz[i][k].size) == 0);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "cand_p90_us")) == sz[i][k].p90);
        KV_CHECK(cJSON_IsBool(cJSON_GetObjectItem(j, "elite")) &&
                 cJSON_IsTrue(cJSON_GetObjectItem(j, "elite")) == (i == 0));
        cJSON *g = cJSON_GetObjectItem(j, "gbps");
        if (isnan(gbps[i][k]))
            KV_CHECK(cJSON_IsNull(g));
        else
            KV_CHECK(fabs(cJSON_GetNumberValue(g) - gbps[i][k]) < 1e-9 * gbps[i][k]);
        KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "cand_cv")) == !(i == 0 && k == 0));
        KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "parents")) == i);
        cJSON_Delete(j);
        line = eol ? eol + 1 : NULL;
    }
    result_free(&r);
}

/* kevo archive history on an events.jsonl written here: a row each time a
 * problem's best (of a result an island took) or best seed grows, at each
 * size of the results and of the geometric mean; a result no island took
 * moves no best; an event of an older kevo (no sizes) only the geomean; a
 * line cut short at the end is passed over. */
static void test_history(void)
{
    char dir[320], path[400];
    snprintf(dir, sizeof dir, "%s/history-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    static const char *const problems[] = {"allreduce", "allgather"};
    for (int i = 0; i < 2; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", problems[i]);
        char src[64];
        snprintf(src, sizeof src, "__global__ void h%d() {}\n", i);
        KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), NULL, NULL, &err) == 0);
    }
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);
    static const char events[] =
        "{\"t\":1000.5,\"type\":\"start\",\"evaluations\":0,\"groups\":1}\n"
        "{\"t\":1002.5,\"type\":\"result\",\"evaluations\":1,\"problem\":\"allreduce\","
        "\"program\":1,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.2,\"elite\":2,"
        "\"sizes\":{\"1MiB\":1.5,\"256MiB\":0.96}}\n"
        "{\"t\":1003.5,\"type\":\"result\",\"evaluations\":2,\"problem\":\"allreduce\","
        "\"program\":2,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.1,\"elite\":0,"
        "\"sizes\":{\"1MiB\":1.1,\"256MiB\":1.1}}\n"
        "{\"t\":1010.5,\"type\":\"result\",\"evaluations\":3,\"problem\":\"allreduce\","
        "\"program\":3,\"op\":\"llm\",\"verdict\":\"ok\",\"speedup\":1.9,\"elite\":0,"
        "\"sizes\":{\"1MiB\":1.9,\"256MiB\":1.9}}\n"
        "{\"t\":1020.5,\"type\":\"result\",\"evaluations\":4,\"problem\":\"allreduce\","
        "\"program\":3,\"op\":\"llm\",\"verdict\":\"ok\",\"speedup\":1.3,\"elite\":1,"
        "\"sizes\":{\"1MiB\":1.4,\"256MiB\":1.2}}\n"
        "{\"t\":1030.5,\"type\":\"result\",\"evaluations\":5,\"problem\":\"allgather\","
        "\"program\":4,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.05,\"elite\":1}\n"
        "{\"t\":1040.5,\"type\":\"res";
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    KV_REQUIRE(kv_write_file_atomic(path, events, sizeof events - 1, &err) == 0);
    /* what the events above make, by the rules in the comment */
    static const struct {
        double t, evaluations;
        const char *problem, *size;
        double best;
        int program;
        double seed;
    } want[] = {
        {2, 1, "allreduce", "geomean", 1.2, 1, 1.2},
        {2, 1, "allreduce", "1MiB", 1.5, 1, 1.5},
        {2, 1, "allreduce", "256MiB", 0.96, 1, 0.96},
        {3, 2, "allreduce", "256MiB", 0.96, 1, 1.1}, /* a seed no island took: the seed line */
        {20, 4, "allreduce", "geomean", 1.3, 3, 1.2},
        {20, 4, "allreduce", "256MiB", 1.2, 3, 1.1},
        {30, 5, "allgather", "geomean", 1.05, 4, 1.05},
    };
    const int n_want = (int)(sizeof want / sizeof want[0]);

    result r;
    kevo(&r, "archive", "--run", dir, "history", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECKF(cJSON_GetArraySize(j) == n_want, "%d rows:\n%s", cJSON_GetArraySize(j), r.out);
    for (int i = 0; i < n_want && i < cJSON_GetArraySize(j); i++) {
        cJSON *row = cJSON_GetArrayItem(j, i);
        KV_CHECKF(cJSON_GetNumberValue(cJSON_GetObjectItem(row, "time_s")) == want[i].t &&
                      cJSON_GetNumberValue(cJSON_GetObjectItem(row, "evaluations")) ==
                          want[i].evaluations &&
                      strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "problem")),
                             want[i].problem) == 0 &&
                      strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "size")),
                             want[i].size) == 0 &&
                      cJSON_GetNumberValue(cJSON_GetObjectItem(row, "best")) == want[i].best &&
                      cJSON_GetNumberValue(cJSON_GetObjectItem(row, "program")) ==
                          want[i].program &&
                      cJSON_GetNumberValue(cJSON_GetObjectItem(row, "seed")) == want[i].seed,
                  "row %d:\n%s", i, r.out);
    }
    cJSON_Delete(j);
    result_free(&r);

    /* the table, and --problem */
    kevo(&r, "archive", "--run", dir, "history", "--problem", "allgather");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == 2);
    char line[256];
    KV_REQUIRE(find_line(r.out, NULL, "     30.0 ", line, sizeof line) == 0);
    double t_s, evals, best, seed;
    char problem[64], size[64], prog[32];
    KV_CHECK(sscanf(line, "%lf %lf %63s %63s %lfx %31s %lfx", &t_s, &evals, problem, size, &best,
                    prog, &seed) == 7);
    KV_CHECK(t_s == 30 && evals == 5 && strcmp(problem, "allgather") == 0 &&
             strcmp(size, "geomean") == 0 && best == 1.05 && strcmp(prog, "#4") == 0 &&
             seed == 1.05);
    result_free(&r);

    kevo(&r, "archive", "--run", dir, "history", "--problem", "alreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "did you mean 'allreduce'?");
    result_free(&r);
}

/* A reader works while the writer (this process) holds an open write
 * transaction, and sees only the committed snapshot. */
static void test_reader_during_write(void)
{
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(run_dir, &o, &a, &err) == 0);
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "inflight");
    snprintf(p.op, sizeof p.op, "seed");
    KV_CHECK(kv_add_program(t, &p, "int inflight;", 13, NULL, NULL, &err) == 0);

    result r;
    kevo(&r, "archive", "--run", run_dir, "list");
    CHECK_STATUS(r, 0);
    check_list_line(r.out, "allreduce");
    KV_CHECK(strstr(r.out, "inflight") == NULL);
    result_free(&r);
    kevo(&r, "archive", "--run", run_dir, "show", "allreduce");
    CHECK_STATUS(r, 0);
    result_free(&r);

    kv_txn_abort(t);
    kv_archive_close(a);
}

/* An archive with nothing in it yet. */
static void test_empty_archive(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "cli-fresh");
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0);
    kv_archive_close(a);
    result r;
    kevo(&r, "archive", "--run", dir, "list");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "no problems yet");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "stats", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECK(j && cJSON_GetNumberValue(cJSON_GetObjectItem(j, "programs")) == 0);
    cJSON_Delete(j);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "best", "allreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "has no problems yet");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "export");
    CHECK_STATUS(r, 0);
    KV_CHECK(strcmp(r.out, "[\n]\n") == 0);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "attempts", "--json");
    CHECK_STATUS(r, 0);
    KV_CHECK(strcmp(r.out, "[\n]\n") == 0);
    result_free(&r);
}

/* A problem's reference stored as its first program (a problem without
 * seeds, docs/search.md): the views say which program it is. */
static void test_reference_views(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "cli-reference");
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    static const struct {
        const char *op, *cell;
        double speedup;
        int islands;
    } progs[] = {{KV_OP_REFERENCE, "sm/unfused", 1.0, 2}, {"llm", "tma/fused", 1.4, 1}};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "seedless_max");
        snprintf(p.op, sizeof p.op, "%s", progs[i].op);
        snprintf(p.model, sizeof p.model, "%s", i ? "gpt-4o" : "reference");
        p.island = i ? 0 : -1;
        p.n_parents = (uint32_t)i;
        p.parents[0] = 1;
        char src[512];
        fx_source(100 + i, src, sizeof src);
        uint64_t id = 0;
        rc = kv_add_program(t, &p, src, strlen(src), &id, NULL, &err);
        p.id = id;
        p.verdict = KV_VERDICT_OK;
        p.speedup = progs[i].speedup;
        snprintf(p.cell, sizeof p.cell, "%s", progs[i].cell);
        if (rc == 0)
            rc = kv_set_result(t, &p, &err);
        for (int is = 0; is < progs[i].islands && rc == 0; is++) {
            kv_elite e = {.island = is, .program_id = id, .fitness = progs[i].speedup};
            snprintf(e.problem, sizeof e.problem, "seedless_max");
            snprintf(e.cell, sizeof e.cell, "%s", progs[i].cell);
            rc = kv_offer_elite(t, &e, NULL, NULL, &err);
        }
    }
    KV_CHECKF(rc == 0, "%s", err.msg);
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    result r;
    kevo(&r, "archive", "--run", dir, "show", "seedless_max");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "\nisland 1: coverage 1/8");
    KV_CHECK_STR_CONTAINS(strstr(r.out, "\nisland 1:"), "1.00x #1 reference");
    KV_CHECK_STR_CONTAINS(strstr(r.out, "\nmerged"), "1.00x #1 reference");
    KV_CHECK_STR_CONTAINS(r.out, "  tma    1.40x #2  ");
    KV_CHECK(strstr(r.out, "#2 reference") == NULL);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "show", "seedless_max", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    cJSON *grid = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "islands"), 0),
                                      "grid");
    KV_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(grid, "sm/unfused"),
                                              "reference")));
    KV_CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(grid, "tma/fused"), "reference") == NULL);
    cJSON_Delete(j);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "lineage", "2");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "\n  #1  reference  ok  1.00x  sm/unfused\n");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "best", "seedless_max", "--cell", "sm/unfused");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "// operator:   reference\n");
    result_free(&r);
}

/* kevo eval, baseline, problems, doctor: usage errors (exit 2), and on a
 * machine without GPUs a clear runtime error (exit 1) rather than a hang. */
/* kevo run's usage and the errors it gives before any GPU is needed. */
static void test_run_command(void)
{
    result r;
    kevo(&r, "run");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "missing --config FILE");
    result_free(&r);
    kevo(&r, "run", "--config", "a.json", "dir");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "either --config FILE or one run DIR");
    result_free(&r);
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no-such.json", scratch);
    kevo(&r, "run", "--config", missing);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), missing);
    result_free(&r);
    char empty[256];
    kv_test_fresh_dir(empty, sizeof empty, "cli-run-empty");
    kevo(&r, "run", empty);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), empty);
    result_free(&r);
    /* an LLM configuration whose key variable is unset: an error naming the
     * variable, before anything is made */
    char cfg[320], llm_run[320];
    snprintf(cfg, sizeof cfg, "%s/configs/llm-example.json", getenv("KEVO_SOURCE_DIR"));
    snprintf(llm_run, sizeof llm_run, "%s/llm-run", scratch);
    unsetenv("OPENAI_API_KEY");
    kevo(&r, "run", "--config", cfg, "--run", llm_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "the API key variable OPENAI_API_KEY "
                                      "(mutator.llm.api_key_env) is not set");
    KV_CHECK(access(llm_run, F_OK) != 0);
    result_free(&r);
    /* a problem name with a typo: refused at once with the near name, before
     * any GPU work and before the run directory is made (no GPU needed) */
    char typo[320], typo_run[320];
    snprintf(typo, sizeof typo, "%s/typo.json", scratch);
    snprintf(typo_run, sizeof typo_run, "%s/typo-run", scratch);
    static const char typo_json[] = "{\"problems\": [\"allreduce\", \"alreduce\"]}";
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(typo, typo_json, strlen(typo_json), &err) == 0);
    kevo(&r, "run", "--config", typo, "--run", typo_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "typo.json: $.problems[1]: no problem \"alreduce\" in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "; did you mean \"allreduce\"?");
    KV_CHECK(strstr(r.err, "GPU") == NULL && strstr(r.err, "CUDA") == NULL);
    KV_CHECK(access(typo_run, F_OK) != 0);
    result_free(&r);
    /* the template mutator on a problem without seeds (tests/fixtures/seedless):
     * nothing to vary, said with the problem and what to add, before any GPU
     * work and before the run directory is made */
    char seedless[320], seedless_run[320], fixtures[320];
    snprintf(seedless, sizeof seedless, "%s/seedless.json", scratch);
    snprintf(seedless_run, sizeof seedless_run, "%s/seedless-run", scratch);
    snprintf(fixtures, sizeof fixtures, "%s/tests/fixtures/seedless", getenv("KEVO_SOURCE_DIR"));
    static const char seedless_json[] = "{\"problems\": [\"seedless_max\"]}";
    KV_REQUIRE(kv_write_file_atomic(seedless, seedless_json, strlen(seedless_json), &err) == 0);
    setenv("KEVO_PROBLEMS", fixtures, 1);
    kevo(&r, "run", "--config", seedless, "--run", seedless_run);
    unsetenv("KEVO_PROBLEMS");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "seedless.json: nothing to vary: problem seedless_max has "
                                      "no seed in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "/patterns/seedless_max/, and the template mutator");
    KV_CHECK_STR_CONTAINS(str(r.err), "docs/patterns.md");
    KV_CHECK_STR_CONTAINS(str(r.err), "or use the LLM mutator (mutator.kind \"llm\"");
    KV_CHECK(strstr(r.err, "GPU") == NULL && strstr(r.err, "CUDA") == NULL);
    KV_CHECK(access(seedless_run, F_OK) != 0);
    result_free(&r);
}

/* kevo config check on a config of the given text fails, saying each of says. */
static void config_check_fails(const char *text, const char *say1, const char *say2)
{
    char path[320];
    kv_err err = {{0}};
    result r;
    snprintf(path, sizeof path, "%s/check.json", scratch);
    KV_REQUIRE(kv_write_file_atomic(path, text, strlen(text), &err) == 0);
    kevo(&r, "config", "check", path);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), say1);
    if (say2)
        KV_CHECK_STR_CONTAINS(str(r.err), say2);
    result_free(&r);
}

/* kevo config check loads every problem the config names, as kevo run does. */
static void test_config_check_problems(void)
{
    char shipped[320];
    result r;
    snprintf(shipped, sizeof shipped, "%s/configs/quickstart.json", getenv("KEVO_SOURCE_DIR"));
    kevo(&r, "config", "check", shipped);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), ": ok (");
    result_free(&r);
    config_check_fails("{\"problems\": [\"allgather\", \"alltoal\"]}",
                       "check.json: $.problems[1]: no problem \"alltoal\" in ",
                       "; did you mean \"alltoall\"?");
    config_check_fails("{\"problems\": [\"zzzzzzzzzzzz\"]}", "(there are: allgather, ", NULL);
    config_check_fails("{\"problems\": [\"allreduce\"], \"world\": 3}",
                       "$.problems[0]: problem allreduce is not defined for W=3", NULL);
}

/* kevo problems --json prints integers up to 2^53-1 exactly: allreduce with
 * its largest size at 2^53 - 1 elements (cJSON's printer gives
 * 9.00719925474099e+15, which reads back as 2^53 - 2). */
static void test_problems_json_exact(void)
{
    char src[320], root[320], dir[340], path[360];
    kv_err err = {{0}};
    char *text = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/problems/allreduce/problem.json", getenv("KEVO_SOURCE_DIR"));
    KV_REQUIRE(kv_read_file(src, &text, &len, &err) == 0);
    char *at = strstr(text, "\"N\": 134217728");
    KV_REQUIRE(at);
    char edited[16384];
    snprintf(edited, sizeof edited, "%.*s\"N\": 9007199254740991%s", (int)(at - text), text,
             at + strlen("\"N\": 134217728"));
    free(text);
    snprintf(root, sizeof root, "%s/exact-problems", scratch);
    snprintf(dir, sizeof dir, "%s/allreduce", root);
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    snprintf(path, sizeof path, "%s/problem.json", dir);
    KV_REQUIRE(kv_write_file_atomic(path, edited, strlen(edited), &err) == 0);
    snprintf(path, sizeof path, "%s/reference.cu", dir);
    KV_REQUIRE(kv_write_file_atomic(path, "// ref\n", 7, &err) == 0);
    result r;
    kevo(&r, "problems", "--root", root, "--json");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "9007199254740991");
    KV_CHECKF(strstr(r.out, "e+15") == NULL, "%s", r.out);
    result_free(&r);
}

/* Keeps a verdict on the source's allreduce at W=2 in cache: passed
 * (host: the host check's result, KV_PCHECK_NOT_RUN as a run's start
 * keeps it), or failed. Returns the entry's path in path. */
static void keep_verdict(const char *cache, int ok, kv_pcheck_result host,
                         kv_pcheck_result floor, char *path)
{
    char dir[320], key[KV_SHA256_HEX_LEN];
    kv_problem p;
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    KV_REQUIRE(kv_pcheck_key(&p, 2, key, &err) == 0);
    kv_pcheck v;
    memset(&v, 0, sizeof v);
    snprintf(v.problem, sizeof v.problem, "allreduce");
    v.world = 2;
    v.ok = ok;
    v.self = ok ? KV_PCHECK_PASS : KV_PCHECK_FAIL;
    v.host = host;
    v.floor = floor;
    if (!ok)
        snprintf(v.message, sizeof v.message, "the reference does not agree with itself at size "
                                              "%s (kept)", p.sizes[0].name);
    v.n_sizes = p.n_sizes;
    for (int s = 0; s < p.n_sizes; s++) {
        snprintf(v.sizes[s].name, sizeof v.sizes[s].name, "%s", p.sizes[s].name);
        v.sizes[s].validation = p.sizes[s].validation;
        v.sizes[s].self = KV_PCHECK_PASS;
        v.sizes[s].ref_plain = s == 1;
        v.sizes[s].host = host == KV_PCHECK_PASS ? (s == 2 ? KV_PCHECK_SKIPPED : KV_PCHECK_PASS)
                                                 : KV_PCHECK_NOT_RUN;
        v.sizes[s].host_checked = v.sizes[s].host == KV_PCHECK_PASS ? 4096 : 0;
        v.sizes[s].host_worst = 0.25;
    }
    v.sizes[p.n_sizes - 1].host = KV_PCHECK_NOT_RUN;
    v.sizes[p.n_sizes - 1].host_too_large = 1;
    v.checked_at = 1764000000; /* 2025-11-24T16:00:00Z */
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_REQUIRE(kv_pcheck_path(cache, key, path, &err) == 0);
    kv_problem_free(&p);
}

/* kevo problems check: its usage errors (exit 2); a kept pass said with its
 * date and per size, without a GPU; what needs the GPUs (no kept verdict,
 * --no-cache, a kept failure, a damaged entry, a pass of the self-check
 * alone, a pass not timed against the floor) fails with a clear message
 * where there are none, and passes where there are. */
static void test_problems_check(void)
{
    result r;
    kevo(&r, "problems", "check");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "kevo problems check: expected one problem");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "allgather");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unexpected argument 'allgather'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--sizes", "1MiB");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--sizes'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--world", "99");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--world: expected 1 to 8, got '99'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--timeout");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "missing value for '--timeout'");
    result_free(&r);
    kevo(&r, "problems", "check", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "usage: kevo problems check P");
    KV_CHECK_STR_CONTAINS(str(r.out), "256 MiB");
    result_free(&r);
    kevo(&r, "problems", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "kevo problems check P");
    result_free(&r);
    kevo(&r, "problems", "check", "alreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no problem \"alreduce\" in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "did you mean \"allreduce\"?");
    result_free(&r);

    char cache[320], path[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/check-cache", scratch);
    setenv("KEVO_CACHE_DIR", cache, 1);
    /* a kept pass of both checks: said, with its date, per size, no GPU needed */
    keep_verdict(cache, 1, KV_PCHECK_PASS, KV_PCHECK_PASS, path);
    kevo(&r, "problems", "check", "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "problem allreduce at W=2: its NCCL reference against "
                                      "itself and against its host check (check.c)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), "cached: checked on 2025-11-24T16:00:00Z (--no-cache "
                                      "checks again)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " ok          window     ok: 4096 elements, worst "
                                      "error/tolerance 0.250\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " ok          plain      ok: 4096 elements");
    KV_CHECK_STR_CONTAINS(str(r.out), " skipped by check.c\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " not run (its tensors pass 256 MiB)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), "\nfloor: ok: the reference is slower than the floor at "
                                      "every timed size\npassed\n");
    KV_CHECKF(r.err[0] == '\0', "%s", r.err);
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECKF(j != NULL, "%s", r.out);
    KV_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")) &&
             cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "host_check")), "ok") == 0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "floor_check")), "ok") == 0);
    cJSON_Delete(j);
    result_free(&r);

    /* what needs the GPUs: none here gives exit 1 naming them (with GPUs: a pass) */
    for (int k = 0; k < 5; k++) {
        if (k == 1) /* a kept failure is not taken */
            keep_verdict(cache, 0, KV_PCHECK_NOT_RUN, KV_PCHECK_NOT_RUN, path);
        if (k == 2) /* the self-check alone */
            keep_verdict(cache, 1, KV_PCHECK_NOT_RUN, KV_PCHECK_NOT_RUN, path);
        if (k == 3)
            KV_REQUIRE(kv_write_file_atomic(path, "{\"ok\": true", 12, NULL) == 0);
        if (k == 4) /* both checks, the reference not timed against its floor */
            keep_verdict(cache, 1, KV_PCHECK_PASS, KV_PCHECK_NOT_RUN, path);
        if (k == 0)
            kevo(&r, "problems", "check", "allreduce", "--no-cache");
        else
            kevo(&r, "problems", "check", "allreduce");
        KV_CHECKF(r.status == 1 || r.status == 0, "case %d: exit %d: %s", k, r.status, r.err);
        if (r.status == 1)
            KV_CHECKF(strstr(r.err, "GPU") != NULL, "case %d: %s", k, r.err);
        else
            KV_CHECK_STR_CONTAINS(str(r.out), "\npassed\n");
        KV_CHECK(strstr(r.out, "cached: checked on") == NULL);
        if (k == 3) {
            KV_CHECK_STR_CONTAINS(str(r.err), "kevo: warning: ");
            KV_CHECK_STR_CONTAINS(str(r.err), path);
            KV_CHECK_STR_CONTAINS(str(r.err), "not a problem check's verdict");
        }
        result_free(&r);
    }
    unsetenv("KEVO_CACHE_DIR");
}

/* A problem folder whose name would set the terminal's title, ring and
 * rewrite the line: kevo problems names it, escaped, never raw. */
static void test_problems_hostile_name(void)
{
    char root[512], dir[700], file[800];
    snprintf(root, sizeof root, "%s/hostile-problems", scratch);
    snprintf(dir, sizeof dir, "%s/\x1b]0;pwned\x07" "evil\r\x9b" "2J", root);
    snprintf(file, sizeof file, "%s/problem.json", dir);
    KV_REQUIRE((mkdir(root, 0755) == 0 || access(root, F_OK) == 0) &&
               (mkdir(dir, 0755) == 0 || access(dir, F_OK) == 0));
    FILE *f = fopen(file, "w");
    KV_REQUIRE(f != NULL);
    fputs("{\"name\": ", f);
    KV_REQUIRE(fclose(f) == 0);
    result r;
    kevo(&r, "problems", "--root", root);
    CHECK_STATUS(r, 1);
    check_inert(&r, "problems");
    KV_CHECK_STR_CONTAINS(str(r.err), "\\e]0;pwned\\aevil\\r\\x9B2J");
    result_free(&r);
}

/* kevo eval's report (kv_cli_print_report, shared with seed and baseline)
 * escapes what comes from outside: a compiler message holding an OSC title
 * sequence and a colour, a line of an included file holding ESC[2J, and a
 * FILE.cu whose name holds escapes. nvcc runs; no GPU is needed to reach a
 * compile_error. */
static void test_eval_report_escapes(void)
{
    char cache[512], home[512], inc[600], path[1024], cu[3][800];
    snprintf(cache, sizeof cache, "%s/eval-cache", scratch);
    snprintf(home, sizeof home, "%s/eval-home", scratch);
    snprintf(inc, sizeof inc, "%s/include", home);
    kv_err werr;
    KV_REQUIRE(kv_mkdir_p(inc, 0755, &werr) == 0);
    snprintf(path, sizeof path, "%s/patterns", home);
    KV_REQUIRE(kv_mkdir_p(path, 0755, &werr) == 0);
    snprintf(path, sizeof path, "%s/kevo", inc);
    KV_REQUIRE(kv_mkdir_p(path, 0755, &werr) == 0);
    for (int i = 0; i < 2; i++) { /* the reference is compiled too: kevo's own headers */
        static const char *const h[2] = {"kernel.h", "check.h"};
        char from[600], *text = NULL;
        size_t len;
        snprintf(from, sizeof from, "%s/include/kevo/%s", getenv("KEVO_SOURCE_DIR"), h[i]);
        snprintf(path, sizeof path, "%s/kevo/%s", inc, h[i]);
        KV_REQUIRE(kv_read_file(from, &text, &len, &werr) == 0);
        KV_REQUIRE(kv_write_file_atomic(path, text, len, &werr) == 0);
        free(text);
    }
    static const char evil_h[] = "int broken = ; const char *s = \"\x1b[2J\x1b[H cleared\";\n";
    snprintf(path, sizeof path, "%s/evil.h", inc);
    KV_REQUIRE(kv_write_file_atomic(path, evil_h, sizeof evil_h - 1, &werr) == 0);
    static const char *const srcs[3] = {
        "#error \"\x1b]0;pwned\x07\x1b[31mred\"\n",
        "#include \"evil.h\"\n",
        "#error plain\n",
    };
    snprintf(cu[0], sizeof cu[0], "%s/osc.cu", scratch);
    snprintf(cu[1], sizeof cu[1], "%s/include.cu", scratch);
    snprintf(cu[2], sizeof cu[2], "%s/\x1b]0;pwned\x07\x1b[2Jname.cu", scratch);
    static const char *const shown[3] = {"\\e]0;pwned\\a\\e[31mred", "\\e[2J\\e[H cleared",
                                         "\\e]0;pwned\\a\\e[2Jname.cu"};
    char problems[512];
    snprintf(problems, sizeof problems, "%s/problems", getenv("KEVO_SOURCE_DIR"));
    setenv("KEVO_CACHE_DIR", cache, 1);
    setenv("KEVO_HOME", home, 1);
    setenv("KEVO_PROBLEMS", problems, 1);
    for (int k = 0; k < 3; k++) {
        KV_REQUIRE(kv_write_file_atomic(cu[k], srcs[k], strlen(srcs[k]), &werr) == 0);
        result r;
        kevo(&r, "eval", "--problem", "allreduce", cu[k]);
        CHECK_STATUS(r, 4);
        KV_CHECK_STR_CONTAINS(str(r.out), "verdict: compile_error");
        check_inert(&r, "eval");
        KV_CHECK_STR_CONTAINS(str(r.out), shown[k]);
        result_free(&r);
    }
    unsetenv("KEVO_PROBLEMS");
    unsetenv("KEVO_HOME");
    unsetenv("KEVO_CACHE_DIR");
}

static void test_evaluator_commands(void)
{
    result r;
    kevo(&r, "eval");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--problem is required");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce", "--bogus", "x.cu");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce", "--world", "99", "x.cu");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--world");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "expected one FILE.cu");
    result_free(&r);
    kevo(&r, "eval", "--problem", "no_such_problem", "x.cu");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no problem \"no_such_problem\" in ");
    result_free(&r);
    char empty_cu[512];
    snprintf(empty_cu, sizeof empty_cu, "%s/empty.cu", scratch);
    kv_err werr;
    KV_REQUIRE(kv_write_file_atomic(empty_cu, "", 0, &werr) == 0);
    kevo(&r, "eval", "--problem", "allreduce", "--sizes", "huge", empty_cu);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "has no size 'huge'");
    result_free(&r);
    /* a kernel source must be a regular file: /dev/null is refused */
    kevo(&r, "eval", "--problem", "allreduce", "/dev/null");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "/dev/null is a character device, not a regular file");
    result_free(&r);
    kevo(&r, "baseline", "--problem", "allreduce", "extra");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unexpected argument 'extra'");
    result_free(&r);
    kevo(&r, "problems");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "allreduce");
    KV_CHECK_STR_CONTAINS(str(r.out), "561.58"); /* the 256 MiB roofline at W=2 */
    result_free(&r);
    for (int k = 0; k < 3; k++) { /* --timing: the same words in all three commands */
        const char *cmd = k == 0 ? "eval" : k == 1 ? "baseline" : "seed";
        kevo(&r, cmd, "--problem", "allreduce", "--timing", "graphs", "x.cu");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(str(r.err), "--timing: expected graph or call, got 'graphs'");
        result_free(&r);
    }
    kevo(&r, "seed", "--islands", "0");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--islands: expected 1 to 1024, got '0'");
    result_free(&r);
    kevo(&r, "seed", "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    char seed_run[4200];
    snprintf(seed_run, sizeof seed_run, "%s/seed-run", scratch);
    kevo(&r, "seed", "--problem", "no_such_problem", "--run", seed_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no seeds for problem no_such_problem (no folder ");
    result_free(&r);
    kevo(&r, "doctor", "--bogus");
    CHECK_STATUS(r, 2);
    result_free(&r);
    /* without a GPU: doctor reports none usable, its last line says no group
     * can run, and it exits 1; with a group it lists it and exits 0 */
    kevo(&r, "doctor");
    KV_CHECKF(r.status == 0 || r.status == 1, "doctor exit %d", r.status);
    KV_CHECK_STR_CONTAINS(str(r.out), "NVLS");
    if (strstr(str(r.out), "GPUs: none usable") || !strstr(str(r.out), "groups at W=2: {")) {
        CHECK_STATUS(r, 1);
        const char *last = "no evaluation group can run here: kevo run and kevo eval need at "
                           "least 2 GPUs that are NVLink peers\n";
        size_t n = strlen(str(r.out)), k = strlen(last);
        KV_CHECKF(n >= k && strcmp(str(r.out) + n - k, last) == 0, "doctor's last line: %s",
                  str(r.out));
    } else {
        CHECK_STATUS(r, 0);
    }
    result_free(&r);
    kevo(&r, "doctor", "--json");
    KV_CHECKF(r.status == 0 || r.status == 1, "doctor --json exit %d", r.status);
    KV_CHECK_STR_CONTAINS(str(r.out), "\"usable_groups\":");
    if (r.status == 1)
        KV_CHECK_STR_CONTAINS(str(r.err), "no evaluation group can run here");
    result_free(&r);
}

int main(int argc, char **argv)
{
    /* test_cli --fixture DIR: only the fixture archive, for the shell tests
     * (tests/integration/test_cli_pipe.sh) */
    if (argc == 3 && strcmp(argv[1], "--fixture") == 0)
        return build_fixture(argv[2]) != 0;
    bin = getenv("KEVO_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "test_cli: KEVO_BIN is not set (ctest sets it); skipping\n");
        return 77;
    }
    kv_test_fresh_dir(scratch, sizeof scratch, "cli-out");
    kv_test_fresh_dir(run_dir, sizeof run_dir, "cli-run");
    if (build_fixture(run_dir) != 0)
        return 1;
    KV_RUN(test_top_level);
    KV_RUN(test_help_and_usage);
    KV_RUN(test_runtime_errors);
    KV_RUN(test_list);
    KV_RUN(test_show);
    KV_RUN(test_best);
    KV_RUN(test_lineage);
    KV_RUN(test_attempts);
    KV_RUN(test_stats);
    KV_RUN(test_export);
    KV_RUN(test_export_escapes);
    KV_RUN(test_export_rows);
    KV_RUN(test_history);
    KV_RUN(test_reader_during_write);
    KV_RUN(test_empty_archive);
    KV_RUN(test_reference_views);
    KV_RUN(test_evaluator_commands);
    KV_RUN(test_problems_hostile_name);
    KV_RUN(test_eval_report_escapes);
    KV_RUN(test_run_command);
    KV_RUN(test_config_check_problems);
    KV_RUN(test_problems_json_exact);
    KV_RUN(test_problems_check);
    return kv_test_summary();
}
