/* search_check.c — what must hold in a search's archive whatever happened
 * to the process: no program evaluated twice at a stage, no duplicate
 * template proposal stored, none left without
 * a result once the run ended, every evaluation and every LLM token and
 * dollar of the attempt log counted in the run state, every elite a correct
 * program of its cell. */
#include "search_check.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"

typedef struct {
    uint8_t (*seen)[KV_STAGE_COUNT];
    uint64_t n;
    uint64_t evaluations;
    uint64_t tokens_in, tokens_out;
    double cost_usd;
    kv_search_facts *f;
    char *why;
    size_t cap;
} check_ctx;

static int on_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    check_ctx *c = arg;
    c->tokens_in += a->tokens_in;
    c->tokens_out += a->tokens_out;
    c->cost_usd += a->cost_usd;
    if (a->stage == KV_STAGE_PROPOSAL) {
        c->f->proposals++;
        c->f->refusals += a->verdict == KV_VERDICT_PROPOSAL_ERROR;
        /* a template duplicate is dropped and counted; an LLM one is paid for */
        if (a->verdict == KV_VERDICT_DUPLICATE && strcmp(a->op, "llm") != 0) {
            snprintf(c->why, c->cap, "attempt %llu records a duplicate %s proposal",
                     (unsigned long long)a->seq, a->op);
            return 1;
        }
        if ((a->verdict == KV_VERDICT_PROPOSAL_ERROR) != (a->program_id == 0)) {
            snprintf(c->why, c->cap, "proposal attempt %llu is %s with program %llu",
                     (unsigned long long)a->seq, kv_verdict_name(a->verdict),
                     (unsigned long long)a->program_id);
            return 1;
        }
        return 0;
    }
    c->evaluations++;
    c->f->by_stage[a->stage]++;
    if (a->program_id >= c->n || a->program_id == 0) {
        snprintf(c->why, c->cap, "attempt %llu names program %llu, which does not exist",
                 (unsigned long long)a->seq, (unsigned long long)a->program_id);
        return 1;
    }
    if (c->seen[a->program_id][a->stage]++) {
        snprintf(c->why, c->cap, "program %llu was evaluated twice at stage %s (attempt %llu)",
                 (unsigned long long)a->program_id, kv_stage_name(a->stage),
                 (unsigned long long)a->seq);
        return 1;
    }
    return 0;
}

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    check_ctx *c = arg;
    c->f->programs++;
    if (p->verdict == KV_VERDICT_NONE)
        c->f->unevaluated++;
    if (p->verdict == KV_VERDICT_OK && p->speedup > c->f->best)
        c->f->best = p->speedup;
    return 0;
}

typedef struct {
    kv_txn *t;
    check_ctx *c;
} elite_ctx;

static int on_elite(const kv_elite *e, void *arg, kv_err *err)
{
    elite_ctx *ec = arg;
    kv_program p;
    if (kv_get_program(ec->t, e->program_id, &p, err) != 0) {
        snprintf(ec->c->why, ec->c->cap, "elite of %s island %d cell %s: program %llu missing",
                 e->problem, e->island, e->cell, (unsigned long long)e->program_id);
        return 1;
    }
    int bad = p.verdict != KV_VERDICT_OK || strcmp(p.cell, e->cell) != 0;
    if (bad)
        snprintf(ec->c->why, ec->c->cap, "elite %llu of %s island %d is %s in cell %s, filed in %s",
                 (unsigned long long)e->program_id, e->problem, e->island,
                 kv_verdict_name(p.verdict), p.cell, e->cell);
    ec->c->f->elites++;
    if (e->island + 1 > ec->c->f->islands_used)
        ec->c->f->islands_used = e->island + 1;
    kv_program_clear(&p);
    return bad;
}

int kv_search_check(const char *run_dir, const char *const *problems, int n_problems,
                    kv_search_facts *f, char *why, size_t cap)
{
    memset(f, 0, sizeof *f);
    why[0] = 0;
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    if (kv_archive_open(run_dir, &ao, &a, &err) != 0 || kv_read_begin(a, &t, &err) != 0) {
        snprintf(why, cap, "%s", err.msg);
        kv_archive_close(a);
        return -1;
    }
    kv_counters cnt;
    kv_run_state st;
    memset(&st, 0, sizeof st);
    check_ctx c = {.f = f, .why = why, .cap = cap};
    int rc = kv_get_counters(t, &cnt, &err) == 0 && kv_get_state(t, &st, &err) == 0 ? 0 : -1;
    if (rc == 0) {
        c.n = cnt.next_program_id + 1;
        c.seen = calloc((size_t)c.n, sizeof *c.seen);
        rc = c.seen ? kv_each_attempt(t, 1, on_attempt, &c, &err) : -1;
    }
    if (rc == 0 && !why[0])
        rc = kv_each_program(t, on_program, &c, &err);
    for (int i = 0; rc == 0 && !why[0] && i < n_problems; i++) {
        elite_ctx ec = {t, &c};
        rc = kv_each_elite(t, problems[i], -1, on_elite, &ec, &err);
    }
    if (rc == 0 && !why[0] && c.evaluations != st.evaluations)
        snprintf(why, cap, "the run state counts %llu evaluations, the attempt log has %llu",
                 (unsigned long long)st.evaluations, (unsigned long long)c.evaluations);
    double cost_gap = c.cost_usd - st.cost_usd;
    if (rc == 0 && !why[0] &&
        (c.tokens_in != st.tokens_in || c.tokens_out != st.tokens_out ||
         cost_gap > 1e-9 * (1 + st.cost_usd) || cost_gap < -1e-9 * (1 + st.cost_usd)))
        snprintf(why, cap,
                 "the run state counts %llu + %llu tokens and $%.9f, the attempt log "
                 "%llu + %llu and $%.9f",
                 (unsigned long long)st.tokens_in, (unsigned long long)st.tokens_out, st.cost_usd,
                 (unsigned long long)c.tokens_in, (unsigned long long)c.tokens_out, c.cost_usd);
    if (rc != 0 && !why[0])
        snprintf(why, cap, "%s", err.msg[0] ? err.msg : "reading the archive failed");
    f->evaluations = st.evaluations;
    f->wall_s = st.wall_s;
    f->tokens_in = st.tokens_in;
    f->tokens_out = st.tokens_out;
    f->cost_usd = st.cost_usd;
    free(c.seen);
    kv_txn_abort(t);
    kv_archive_close(a);
    return why[0] ? -1 : 0;
}

pid_t kv_search_spawn_driver(const char *driver, const char *dir, const char *evals,
                             const char *snapshot_min)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        if (snapshot_min)
            execl(driver, driver, dir, "11", evals, "8", "2", "3", snapshot_min, (char *)NULL);
        else
            execl(driver, driver, dir, "11", evals, "8", "2", (char *)NULL);
        _exit(127);
    }
    return pid;
}

int kv_search_progress_text(FILE *f, char *out, size_t cap)
{
    fflush(f);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    rewind(f);
    return ftruncate(fileno(f), 0) == 0 ? 0 : -1;
}

int kv_search_count_text(const char *dir, const char *needle)
{
    char path[4200], *text = NULL;
    size_t len = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/events.jsonl", dir) >= sizeof path ||
        kv_read_file_max(path, (size_t)1 << 30, &text, &len, NULL) !=
            0) /* a log, not a text input */
        return -1;
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    free(text);
    return n;
}
