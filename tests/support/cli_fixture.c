/* cli_fixture.c — what the tests of the kevo command line share (cli_fixture.h). */
#include "cli_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "test_util.h"

const char *bin;
char scratch[256]; /* captured output files */
char run_dir[256]; /* the main fixture */

/* ---- running kevo ------------------------------------------------------------- */

void result_free(result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

void kevo_spawn(result *r, const char *env_run, const char *const *argv)
{
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
}

/* A pointer, so that KV_CHECK_STR_CONTAINS does not test an array's address. */
const char *str(const char *s)
{
    return s;
}

int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The line of text that starts with prefix, found after the first occurrence
 * of section (or anywhere when section is NULL); copied into out. */
int find_line(const char *text, const char *section, const char *prefix, char *out, size_t cap)
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

const fx_program fx[N_FX] = {
    /* 1 */ {"allreduce", 0, "seed", "allreduce_sm", {0}, KV_VERDICT_OK, 1.20, "sm/fused", 1},
    /* 2 */ {"allreduce", 0, "template", "allreduce_sm", {1}, KV_VERDICT_OK, 0.80, "ce/unfused", 1},
    /* 3 */ {"allreduce", 1, "llm", "gpt-4o, \"mini\"", {1}, KV_VERDICT_OK, 1.50, "sm/fused", 1},
    /* 4 */ {"allreduce", 1, "llm", "gpt-4o", {2, 3}, KV_VERDICT_OK, 2.31, "tma/fused", 1},
    /* 5 */ {"allreduce", 2, "llm", "gpt-4o", {4}, KV_VERDICT_OK, 1.90, "tma/fused", 1},
    /* 6 */ {"allreduce", 2, "llm", "gpt-4o", {4}, KV_VERDICT_MISMATCH, 0, "", 0},
    /* 7 */
    {"allreduce", 2, "template", "allreduce_nvls", {5}, KV_VERDICT_OK, 3.05, "nvls/unfused", 1},
    /* 8 */ {"allgather", 0, "seed", "allgather_ce", {0}, KV_VERDICT_OK, 1.10, "ce/fused", 1},
    /* 9 */ {"allgather", 0, "template", "allgather_ce", {8}, KV_VERDICT_COMPILE_ERROR, 0, "", 0},
    /* 10 */ {"moe_dispatch", 0, "seed", "moe_sm", {0}, KV_VERDICT_HANG, 0, "", 0},
};

const fx_attempt fx_extra[N_EXTRA] = {
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

const int64_t T0 = 1767225600000000000LL;

void fx_source(int id, char *buf, size_t cap)
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

int build_fixture(const char *dir)
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
            kv_elite e = {.island = fx[i].island,
                          .program_id = id,
                          .fitness = fx[i].speedup,
                          .since_ns = r.evaluated_ns};
            snprintf(e.problem, sizeof e.problem, "%s", fx[i].problem);
            snprintf(e.cell, sizeof e.cell, "%s", fx[i].cell);
            rc = kv_offer_elite(t, &e, NULL, NULL, &err);
        }
        char detail[256];
        kv_attempt at = {.time_ns = r.evaluated_ns,
                         .island = fx[i].island,
                         .stage = fx[i].parents[0] ? KV_STAGE_FULL : KV_STAGE_SEED,
                         .verdict = fx[i].verdict,
                         .program_id = id,
                         .parent_id = fx[i].parents[0],
                         .speedup = fx[i].speedup,
                         .wall_s = 12.5,
                         .gpu_s = 3.0,
                         .tokens_in = 1000,
                         .tokens_out = 200,
                         .cost_usd = 0.0125};
        snprintf(at.problem, sizeof at.problem, "%s", fx[i].problem);
        snprintf(at.op, sizeof at.op, "%s", fx[i].op);
        snprintf(at.model, sizeof at.model, "%s", fx[i].model);
        at.detail = fx_detail_of(i, detail, sizeof detail) ? detail : NULL;
        if (rc == 0)
            rc = kv_add_attempt(t, &at, NULL, &err);
    }
    for (int i = 0; i < N_EXTRA && rc == 0; i++) {
        kv_attempt at = {.time_ns = T0 + 3600000000000LL + i,
                         .stage = fx_extra[i].stage,
                         .verdict = fx_extra[i].verdict,
                         .wall_s = 1.0};
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
int fx_is_elite(int i)
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

int cell_index_of(const char *name)
{
    static const char *const names[] = {"ce/fused",  "ce/unfused",  "sm/fused",   "sm/unfused",
                                        "tma/fused", "tma/unfused", "nvls/fused", "nvls/unfused"};
    for (int i = 0; i < 8; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

void expected(const char *problem, int island, expect *e)
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

/* A strict RFC 4180 reader; returns the number of rows (at most max), -1 on
 * malformed input. */
int csv_parse(const char *s, csv_row *rows, int max)
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

void csv_free(csv_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rows[i].n; k++)
            free(rows[i].field[k]);
}

int cli_test_start(const char *tag)
{
    bin = getenv("KEVO_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "%s: KEVO_BIN is not set (ctest sets it); skipping\n", tag);
        return 77;
    }
    kv_test_fresh_dir(scratch, sizeof scratch, "cli-out");
    kv_test_fresh_dir(run_dir, sizeof run_dir, "cli-run");
    return build_fixture(run_dir) != 0;
}
