/* test_search_llm.c — the search loop with the LLM mutator on the CPU: the
 * deterministic fake evaluator (fake_evalq.c) and tests/support/llm_server.py
 * answering from a script (edits of the parent's tunable parameters, a
 * whole file, prose, an edit of text the parent lacks, 429 with
 * Retry-After, 500, 401, a reply echoing the request's headers). Checked:
 * LLM candidates are stored (op "llm", the model, the parent) and
 * evaluated; unusable replies and failed requests are attempts with their
 * reason; tokens and cost in the run state equal the attempts' sums, also
 * across a resume; the token and cost budgets stop the run; the
 * concurrency; a stop request abandons the requests in flight; the key is
 * nowhere in the archive, the event log or stderr; setup errors come
 * before anything is written. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fake_evalq.h"
#include "archive/archive.h"
#include "common/cell.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "search/run_state.h"
#include "search/search.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

#define KEY "sk-kevo-LEAKCHECK-7f3a91c2e5d8"
#define KEY_ENV "KEVO_TEST_SEARCH_KEY"
#define MODEL "m-search"
/* A scripted reply with text reports 20 tokens out and, in, kevo's own
 * estimate of the prompt (tests/support/llm_server.py); with max_tokens 20 each
 * request so costs exactly its maximum, at $2 and $8 per million. Prompts
 * here take 19,000 to 26,000 tokens (REQUEST_TYPICAL: budgets are counted
 * in it); the most one can take (REQUEST_MAX): prompt_budget_chars (200,000)
 * and the system text, / 4, and max_tokens, for each of the two attempts
 * that can be paid for (a broken answer is retried once). */
#define REQUEST_TYPICAL 26000
#define REQUEST_MAX (2 * 51000)

static const char *const kProblems[] = {"allreduce"};
static kv_test_llm_server server;

/* Starts the server on a script (its prompts dumped to <dir>/prompts). */
static int start_server(const char *dir, const char *replies, const char *then)
{
    char path[4200], dump[4200];
    snprintf(dump, sizeof dump, "%s/prompts", dir);
    snprintf(path, sizeof path, "%s/script.json", dir);
    kv_err err;
    if (kv_mkdir_p(dump, 0755, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        return -1;
    }
    cJSON *s = cJSON_CreateObject();
    cJSON_AddItemToObject(s, "replies", cJSON_Parse(replies));
    cJSON_AddStringToObject(s, "then", then);
    cJSON_AddStringToObject(s, "dump", dump);
    char *text = cJSON_Print(s);
    cJSON_Delete(s);
    int rc = text ? kv_write_file_atomic(path, text, strlen(text), &err) : -1;
    free(text);
    KV_CHECK(rc == 0);
    if (rc == 0)
        rc = kv_test_llm_server_start(&server, path);
    KV_CHECK(rc == 0);
    return rc;
}

typedef struct {
    kv_llm_api api;
    int concurrency;
    int64_t llm_tokens;
    double cost_usd;
    uint64_t crash_after_commits; /* > 0: the run, in a child, dies right after this commit */
    const char *abi_path;         /* NULL: docs/abi.md */
    volatile sig_atomic_t *stop;
    FILE *progress;
    const char *problem;       /* NULL: allreduce */
    const char *problems_root; /* NULL: problems/ of the source */
    kv_seeds_from seeds;       /* the configuration's seeds (default: patterns) */
} llm_opts;

static int run_llm(const char *dir, const llm_opts *o, kv_err *err)
{
    const char *problem = o->problem ? o->problem : kProblems[0];
    kv_search_test t;
    kv_search_test_init(&t, dir, &problem, 1);
    kv_config *cfg = &t.cfg;
    cfg->islands = 2;
    cfg->migration_interval = 3;
    cfg->reseed_interval = 9;
    cfg->seed = 5;
    cfg->seeds = o->seeds;
    cfg->budget.llm_tokens = o->llm_tokens;
    cfg->budget.cost_usd = o->cost_usd;
    cfg->mutator = KV_MUTATOR_LLM;
    kv_cfg_llm *l = &cfg->llm;
    l->api = o->api;
    snprintf(l->endpoint, sizeof l->endpoint, "http://127.0.0.1:%d/v1", server.port);
    snprintf(l->api_key_env, sizeof l->api_key_env, "%s", KEY_ENV);
    l->n_models = 1;
    snprintf(l->models[0].name, sizeof l->models[0].name, MODEL);
    l->models[0].weight = 1;
    l->models[0].price_in_per_mtok = 2;
    l->models[0].price_out_per_mtok = 8;
    l->concurrency = o->concurrency;
    l->temperature = 0.5;
    l->max_tokens = 20;
    l->timeout_s = 10;
    l->max_retries = 2;
    l->prompt_budget_chars = 200000;
    if (o->problems_root)
        t.env.problems_root = o->problems_root;
    if (o->abi_path)
        t.env.abi_path = o->abi_path;
    if (o->stop)
        t.env.stop = o->stop;
    t.env.progress = o->progress;
    t.env.progress_every_s = 0.05;
    t.crash_after = o->crash_after_commits; /* the crash kills a child, not the test */
    return kv_search_test_run(&t, err);
}

static char *read_text(const char *dir, const char *name, size_t *len)
{
    char path[4200], *text = NULL;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (kv_read_file(path, &text, &n, NULL) != 0)
        return NULL;
    if (len)
        *len = n;
    return text;
}

static int count_in(const char *dir, const char *name, const char *needle)
{
    char *text = read_text(dir, name, NULL);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
        n++;
    free(text);
    return text ? n : -1;
}

static int has_bytes(const char *path, const char *needle)
{
    char *data = NULL;
    size_t n = 0;
    if (kv_read_file(path, &data, &n, NULL) != 0)
        return -1;
    size_t k = strlen(needle);
    int found = 0;
    for (size_t i = 0; i + k <= n && !found; i++) /* binary: no strstr */
        found = memcmp(data + i, needle, k) == 0;
    free(data);
    return found;
}

/* ---- what the archive holds ------------------------------------------------ */

typedef struct {
    int llm_programs, llm_unevaluated, llm_ok, llm_bad_lineage, llm_screened;
    int key_in_archive, scrubbed_sources;
    int candidates, refusals, bad_model;
    char refusal_text[8192];
    uint64_t first_parent; /* of the first LLM proposal attempt */
    uint64_t llm_ids[512];
    int n_ids;
} facts;

static int on_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    facts *f = arg;
    if (a->detail && strstr(a->detail, KEY))
        f->key_in_archive++;
    if (strcmp(a->op, "llm") != 0)
        return 0;
    if (a->stage != KV_STAGE_PROPOSAL) {
        f->llm_screened += a->stage == KV_STAGE_SCREEN;
        return 0;
    }
    if (!f->first_parent)
        f->first_parent = a->parent_id;
    if (a->program_id && a->verdict != KV_VERDICT_PROPOSAL_ERROR) {
        f->candidates++;
    } else {
        f->refusals++;
        size_t n = strlen(f->refusal_text);
        snprintf(f->refusal_text + n, sizeof f->refusal_text - n, "%s\n",
                 a->detail ? a->detail : "(none)");
    }
    f->bad_model += strcmp(a->model, MODEL) != 0 && a->program_id != 0;
    return 0;
}

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    facts *f = arg;
    if (strcmp(p->op, "llm") != 0)
        return 0;
    f->llm_programs++;
    f->llm_unevaluated += p->verdict == KV_VERDICT_NONE;
    f->llm_ok += p->verdict == KV_VERDICT_OK;
    f->llm_bad_lineage += p->n_parents != 1 || p->parents[0] == 0 || strcmp(p->model, MODEL) != 0;
    if (f->n_ids < 512)
        f->llm_ids[f->n_ids++] = p->id;
    return 0;
}

static int read_facts(const char *dir, facts *f)
{
    memset(f, 0, sizeof *f);
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    if (kv_archive_open(dir, &ao, &a, &err) != 0 || kv_read_begin(a, &t, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        kv_archive_close(a);
        return -1;
    }
    int rc = kv_each_attempt(t, 1, on_attempt, f, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_program, f, &err);
    for (int i = 0; rc == 0 && i < f->n_ids; i++) {
        char *src = NULL;
        size_t len;
        rc = kv_get_source(t, f->llm_ids[i], &src, &len, &err);
        if (src && strstr(src, KEY))
            f->key_in_archive++;
        if (src && strstr(src, "***"))
            f->scrubbed_sources++;
        free(src);
    }
    KV_CHECKF(rc == 0, "%s", err.msg);
    kv_txn_abort(t);
    kv_archive_close(a);
    return rc;
}

/* The source of a program. */
static char *source_of(const char *dir, uint64_t id)
{
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    char *src = NULL;
    size_t len;
    if (kv_archive_open(dir, &ao, &a, &err) == 0 && kv_read_begin(a, &t, &err) == 0) {
        if (kv_get_source(t, id, &src, &len, &err) != 0)
            src = NULL;
        kv_txn_abort(t);
    }
    kv_archive_close(a);
    return src;
}

/* The llm events of the log: how many, and how many retried once (the 429
 * after at least its Retry-After second). */
static void llm_events(const char *dir, int *n, int *retried, int *waited)
{
    char *text = read_text(dir, "events.jsonl", NULL);
    *n = *retried = *waited = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *ev = cJSON_Parse(line);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
        if (cJSON_IsString(type) && strcmp(type->valuestring, "llm") == 0) {
            (*n)++;
            double attempts =
                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "attempts"));
            double wall = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "wall_s"));
            int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "ok"));
            *retried += ok && attempts == 2;
            *waited += ok && attempts == 2 && wall >= 0.95;
        }
        cJSON_Delete(ev);
    }
    free(text);
}

static double server_stat(const char *key)
{
    char *body = kv_test_http_get(server.port, "/stats");
    cJSON *st = body ? cJSON_Parse(body) : NULL;
    double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, key));
    cJSON_Delete(st);
    free(body);
    return v;
}

/* ---- the tests --------------------------------------------------------------- */

/* Every kind of reply, one request at a time (so request k gets script line
 * k), until the next request could overshoot the token budget (room for 13
 * requests at least: each reserves two attempts). */
static void test_replies(void)
{
    char dir[4096], why[512], errpath[4200];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm");
    if (start_server(dir,
                     "[\"edit\", \"whole\", \"nocode\", \"absent\", \"429\", \"edit\", "
                     "\"500\", \"edit\", \"echo\", \"401\"]",
                     "edit") != 0)
        return;
    /* stderr into a file for the run: the key must not be there either */
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    KV_REQUIRE(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI,
                  .concurrency = 1,
                  .llm_tokens = 14 * REQUEST_TYPICAL,
                  .progress = stderr};
    int rc = run_llm(dir, &o, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    KV_CHECKF(rc == 0, "%s", err.msg);
    double requests = server_stat("requests");
    kv_test_llm_server_stop(&server);

    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &sf, why, sizeof why) == 0, "%s", why);
    /* never over the budget, and stopped only when the next request's
     * maximum did not fit */
    uint64_t spent = sf.tokens_in + sf.tokens_out;
    double usd = ((double)sf.tokens_in * 2 + (double)sf.tokens_out * 8) * 1e-6;
    KV_CHECKF(spent <= 14 * REQUEST_TYPICAL && spent + REQUEST_MAX > 14 * REQUEST_TYPICAL &&
                  sf.tokens_out % 20 == 0 && sf.cost_usd > usd - 1e-9 && sf.cost_usd < usd + 1e-9,
              "%llu + %llu tokens, $%g", (unsigned long long)sf.tokens_in,
              (unsigned long long)sf.tokens_out, sf.cost_usd);
    KV_CHECK(sf.unevaluated == 0);
    KV_CHECK(count_in(dir, "events.jsonl", "\"reason\":\"LLM token budget spent\"") == 1);
    int n_llm, retried, waited;
    llm_events(dir, &n_llm, &retried, &waited);
    /* the replies with usage and the 401; the 429 and the 500 were retried */
    KV_CHECKF(n_llm >= 13 && requests == n_llm + 2, "%d llm events, %g requests", n_llm, requests);
    KV_CHECKF(retried == 2 && waited >= 1, "%d retried, %d after Retry-After", retried, waited);

    facts f;
    if (read_facts(dir, &f) != 0)
        return;
    /* candidates: edit, whole, the two retried edits, echo, four edits more
     * (some may be duplicates of earlier ones); refusals: prose, the missing
     * SEARCH text, the 401 */
    KV_CHECKF(f.candidates == n_llm - 3 && f.refusals == 3, "%d candidates, %d refusals",
              f.candidates, f.refusals);
    KV_CHECK_STR_CONTAINS(f.refusal_text, "the reply cannot be used: no code block and no "
                                          "SEARCH/REPLACE edit in the reply");
    KV_CHECK_STR_CONTAINS(f.refusal_text, "the reply cannot be used: edit 1 (reply line 1): its "
                                          "SEARCH text does not occur");
    KV_CHECK_STR_CONTAINS(f.refusal_text, "the request failed: HTTP 401: bad key");
    KV_CHECK(f.bad_model == 0);
    KV_CHECKF(f.llm_programs >= 5 && f.llm_unevaluated == 0 && f.llm_bad_lineage == 0 &&
                  f.llm_ok >= 1 && f.llm_screened == f.llm_programs,
              "%d llm programs, %d unevaluated, %d ok, %d with a wrong parent or model, %d "
              "screened",
              f.llm_programs, f.llm_unevaluated, f.llm_ok, f.llm_bad_lineage, f.llm_screened);

    /* the first prompt holds its parent whole; the last one (every seed was
     * evaluated by then) every part */
    char *prompt = read_text(dir, "prompts/1.txt", NULL);
    char *parent = source_of(dir, f.first_parent);
    KV_CHECK(prompt && parent && strstr(prompt, parent));
    free(prompt);
    prompt = read_text(dir, "prompts/15.txt", NULL);
    KV_CHECK(prompt != NULL);
    static const char *const parts[] = {"## Problem: allreduce",
                                        "## Machine",
                                        "## Aim",
                                        "## Parent",
                                        "### Its evaluation",
                                        "Verdict: ok",
                                        "x the reference",
                                        "## The ABI (docs/abi.md)",
                                        "## Inspiration 1: the elite",
                                        "### kevo_sync.cuh"};
    for (size_t i = 0; prompt && i < sizeof parts / sizeof parts[0]; i++)
        KV_CHECK_STR_CONTAINS(prompt, parts[i]);
    free(prompt);
    free(parent);

    /* the key: echoed by the server, scrubbed everywhere */
    char archive[4200];
    snprintf(archive, sizeof archive, "%s/archive.mdb", dir);
    KV_CHECK(f.scrubbed_sources >= 1 && strstr(f.refusal_text, "***") != NULL);
    KV_CHECK(f.key_in_archive == 0);
    KV_CHECK(has_bytes(archive, KEY) == 0);
    KV_CHECK(count_in(dir, "events.jsonl", KEY) == 0);
    KV_CHECK(count_in(dir, "stderr.txt", KEY) == 0);
    KV_CHECK(count_in(dir, "stderr.txt", "tokens, $") > 0); /* the progress lines went there */
}

/* A run killed mid-way (its process ends right after an archive commit) and
 * resumed: the tokens and cost of the first process are restored, so the
 * budget counts both. */
static void test_resume(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-resume");
    if (start_server(dir, "[]", "edit") != 0)
        return;
    kv_err err = {{0}};
    /* the crash: after the seeds, the configuration and a few proposals and
     * results (13 commits) */
    llm_opts o = {.api = KV_LLM_API_OPENAI,
                  .concurrency = 2,
                  .llm_tokens = 40 * REQUEST_TYPICAL,
                  .crash_after_commits = 13};
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    kv_search_facts a, b;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &a, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(a.tokens_in > 0 && a.tokens_in + a.tokens_out < 40 * REQUEST_TYPICAL,
              "%llu tokens before the crash", (unsigned long long)(a.tokens_in + a.tokens_out));
    o.crash_after_commits = 0;
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    kv_test_llm_server_stop(&server);
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &b, why, sizeof why) == 0, "%s", why);
    uint64_t tokens = b.tokens_in + b.tokens_out;
    /* never over the budget: the run ends when the next request could overshoot it */
    KV_CHECKF(tokens <= 40 * REQUEST_TYPICAL && tokens + REQUEST_MAX > 40 * REQUEST_TYPICAL &&
                  b.tokens_in > a.tokens_in,
              "%llu tokens", (unsigned long long)tokens);
    KV_CHECK(count_in(dir, "events.jsonl", "\"type\":\"resume\"") == 1);
    KV_CHECK(count_in(dir, "events.jsonl", "\"reason\":\"LLM token budget spent\"") == 1);
    KV_CHECK(b.unevaluated == 0);
}

/* budget.cost_usd counts what the requests in flight may still cost and the
 * next request's own maximum (here about $0.078 each: two attempts of about
 * $0.039 can be paid for), so with $0.10 only
 * one is ever in flight, whatever the concurrency, and only one is sent:
 * after it, the next could overshoot the budget. Through the Anthropic API. */
static void test_cost_budget(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-cost");
    if (start_server(dir, "[]", "holdedit") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_ANTHROPIC, .concurrency = 4, .cost_usd = 0.10};
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    double most = server_stat("max_concurrent"), requests = server_stat("requests");
    kv_test_llm_server_stop(&server);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(most == 1 && requests == 1, "%g at once, %g requests", most, requests);
    KV_CHECKF(f.cost_usd > 0.03 && f.cost_usd <= 0.10, "$%g", f.cost_usd);
    KV_CHECK(count_in(dir, "events.jsonl", "\"reason\":\"LLM cost budget spent\"") == 1);
}

/* An endpoint that refuses every request (a revoked key, say): after
 * KV_LLM_DEAD_AFTER failures in a row the run stops with an error naming
 * the last one, the results and the refusals stored; resumed once the
 * endpoint answers again, the run goes on to its budget. */
static void test_dead_endpoint(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-dead");
    if (start_server(dir,
                     "[\"edit\", \"500\", \"edit\", \"401\", \"401\", \"401\", \"401\", "
                     "\"401\", \"401\", \"401\", \"401\"]",
                     "edit") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI, .concurrency = 1, .llm_tokens = 12 * REQUEST_TYPICAL};
    int rc = run_llm(dir, &o, &err);
    KV_CHECK(rc != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "failed 8 requests in a row");
    KV_CHECK_STR_CONTAINS(err.msg, "HTTP 401");
    KV_CHECK(strstr(err.msg, KEY) == NULL);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &sf, why, sizeof why) == 0, "%s", why);
    facts f;
    if (read_facts(dir, &f) != 0) {
        kv_test_llm_server_stop(&server);
        return;
    }
    /* two usable edits (the 500 retried into the second), then eight 401s */
    double requests = server_stat("requests");
    KV_CHECKF(f.candidates == 2 && f.refusals == 8 && requests == 11,
              "%d candidates, %d refusals, %g requests", f.candidates, f.refusals, requests);
    KV_CHECK(f.llm_unevaluated == 0 && sf.unevaluated == 0);
    KV_CHECK(count_in(dir, "events.jsonl", "\"type\":\"error\"") == 1);

    /* the endpoint answers again: the resumed run goes on to its budget */
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    kv_test_llm_server_stop(&server);
    KV_CHECKF(read_facts(dir, &f) == 0 && f.candidates > 2, "%d candidates", f.candidates);
    KV_CHECK(count_in(dir, "events.jsonl", "\"reason\":\"LLM token budget spent\"") == 1);
}

/* Requests of 0.5 s with a concurrency of 3: three at once, never four. */
static void test_concurrency(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-conc");
    if (start_server(dir, "[]", "holdedit") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI, .concurrency = 3, .llm_tokens = 9 * REQUEST_TYPICAL};
    double t0 = (double)kv_monotonic_ns() * 1e-9;
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    double s = (double)kv_monotonic_ns() * 1e-9 - t0;
    double most = server_stat("max_concurrent");
    kv_test_llm_server_stop(&server);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(most == 3, "%g requests at once", most);
    KV_CHECKF(s < 4.5, "9 requests of 0.5 s, 3 at a time, took %.2f s", s);
}

/* Whether the len bytes at s are valid UTF-8 throughout. */
static int valid_utf8(const char *s, size_t len)
{
    for (size_t i = 0, l; s && i < len; i += l)
        if ((l = kv_utf8_seq((const unsigned char *)s + i, len - i, NULL)) == 0)
            return 0;
    return s != NULL;
}

/* Whether s holds what a terminal acts on: a C0 control other than LF and
 * TAB, DEL, a C1 control, or a byte that is not UTF-8 (0x9B is CSI). */
static int has_controls(const char *s, size_t len)
{
    for (size_t i = 0, l; i < len; i += l) {
        uint32_t cp;
        if ((l = kv_utf8_seq((const unsigned char *)s + i, len - i, &cp)) == 0)
            return 1;
        if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp <= 0x9F))
            return 1;
    }
    return 0;
}

/* kevo (KEVO_BIN) with args, its stdout into dir/name: the exit status. */
static int kevo(const char *dir, const char *name, const char *args)
{
    const char *bin = getenv("KEVO_BIN");
    char cmd[9000];
    if (!bin)
        return -1;
    snprintf(cmd, sizeof cmd, "'%s' %s --run '%s' > '%s/%s' 2> '%s/%s.err'", bin, args, dir, dir,
             name, dir, name);
    return system(cmd);
}

/* Every line of dir/name valid UTF-8 and JSON (a whole JSON text when
 * whole): how many lines, or -1. */
static int json_lines(const char *dir, const char *name, int whole)
{
    size_t len = 0;
    char *text = read_text(dir, name, &len);
    int n = 0, ok = valid_utf8(text, len);
    if (ok && whole) {
        cJSON *j = cJSON_ParseWithLength(text, len);
        ok = j != NULL;
        n = cJSON_GetArraySize(j);
        cJSON_Delete(j);
    }
    for (char *line = text, *end; ok && !whole && line && *line; line = end + 1, n++) {
        end = strchr(line, '\n');
        if (!end)
            break;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)(end - line));
        ok = j != NULL;
        cJSON_Delete(j);
    }
    KV_CHECKF(ok, "%s is not valid UTF-8 and JSON", name);
    free(text);
    return ok ? n : -1;
}

/* A hostile endpoint: an edit with bytes that are not UTF-8 (stored in the
 * program's source), then errors whose message would clear the screen, set
 * the terminal's title and rewrite lines, with bytes that are not UTF-8,
 * until the endpoint counts as dead. What reaches a terminal holds no
 * control character; every JSON output (events.jsonl, attempts --json,
 * export) is valid UTF-8, the bytes replaced counted in the event. */
static void test_hostile(void)
{
    char dir[4096];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-hostile");
    if (start_server(dir,
                     "[\"edit8\", \"hostile\", \"hostile\", \"hostile\", \"hostile\", "
                     "\"hostile\", \"hostile\", \"hostile\", \"hostile\"]",
                     "edit") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI, .concurrency = 1, .llm_tokens = 12 * REQUEST_TYPICAL};
    KV_CHECK(run_llm(dir, &o, &err) != 0);
    kv_test_llm_server_stop(&server);
    KV_CHECK_STR_CONTAINS(err.msg, "failed 8 requests in a row");
    KV_CHECK_STR_CONTAINS(err.msg, "HTTP 400");
    /* the final error as kevo prints it (kv_cli_fail) */
    char shown[4096];
    KV_TERM(shown, err.msg);
    KV_CHECKF(!has_controls(shown, strlen(shown)), "%s", shown);
    KV_CHECK_STR_CONTAINS(shown,
                          "\\e[2J\\e]0;title\\a\\rEVIL\\nline two \\x80 \\xC0\\xAF \\xE2\\x82");

    KV_CHECK(json_lines(dir, "events.jsonl", 0) > 0);
    /* the edit came without usage: its tokens estimated, and recorded so */
    KV_CHECK(count_in(dir, "events.jsonl", "\"tokens_estimated\":true") == 1);
    KV_CHECK(count_in(dir, "events.jsonl", "\"invalid_utf8\":") >= 8);
    KV_CHECK(kevo(dir, "attempts.txt", "archive attempts") == 0);
    size_t len = 0;
    char *text = read_text(dir, "attempts.txt", &len);
    KV_CHECKF(text && !has_controls(text, len), "kevo archive attempts printed controls");
    KV_CHECK(text && strstr(text, "\\e[2J\\e]0;title\\a")); /* the first line: up to the CR */
    free(text);
    KV_CHECK(count_in(dir, "attempts.txt", "[tokens estimated: no usable usage in the reply]") ==
             1);
    KV_CHECK(kevo(dir, "attempts.json", "archive attempts --json") == 0);
    KV_CHECK(json_lines(dir, "attempts.json", 1) > 8);
    KV_CHECK(count_in(dir, "attempts.json.err", "printed as U+FFFD") == 1);
    KV_CHECK(kevo(dir, "export.json", "archive export --with-source") == 0);
    KV_CHECK(json_lines(dir, "export.json", 1) > 0);
    KV_CHECK(count_in(dir, "export.json", "// \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD") == 1);
}

static volatile sig_atomic_t stop_flag;

static void on_alarm(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* A stop request while requests are in flight (each answered after 3 s):
 * the run ends at once, nothing of theirs recorded. */
static void test_stop(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-stop");
    if (start_server(dir, "[]", "slow") != 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    KV_REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0);
    struct itimerval it = {{0, 0}, {0, 800000}};
    stop_flag = 0;
    KV_REQUIRE(setitimer(ITIMER_REAL, &it, NULL) == 0);
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI, .concurrency = 2, .stop = &stop_flag};
    double t0 = (double)kv_monotonic_ns() * 1e-9;
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    double s = (double)kv_monotonic_ns() * 1e-9 - t0;
    double requests = server_stat("requests");
    kv_test_llm_server_stop(&server);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(s < 2.5 && requests == 2, "stopped after %.2f s, %g requests", s, requests);
    KV_CHECK(count_in(dir, "events.jsonl", "\"reason\":\"stopped (signal)\"") == 1);
    KV_CHECK(count_in(dir, "events.jsonl", "\"type\":\"llm\"") == 0);
    KV_CHECK(f.tokens_in == 0 && f.cost_usd == 0 && f.refusals == 0);
}

/* A missing key variable or ABI file: an error naming it, nothing written. */
/* A problem without seeds (tests/fixtures/seedless): the LLM mutator's first
 * parent is the problem's reference, shown whole in the first prompt with
 * its evaluation; the children it writes of it are stored and evaluated. */
static void test_seedless(void)
{
    char dir[4096], why[512], fixtures[4096];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-seedless");
    snprintf(fixtures, sizeof fixtures, "%s/tests/fixtures/seedless", getenv("KEVO_SOURCE_DIR"));
    if (start_server(dir, "[]", "append") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI,
                  .concurrency = 2,
                  .llm_tokens = 6 * REQUEST_TYPICAL,
                  .problem = "seedless_max",
                  .problems_root = fixtures};
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    kv_test_llm_server_stop(&server);
    static const char *const problems[] = {"seedless_max"};
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, problems, 1, &sf, why, sizeof why) == 0, "%s", why);
    facts f;
    if (read_facts(dir, &f) != 0)
        return;
    char path[4200], *ref = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/seedless_max/reference.cu", fixtures);
    KV_REQUIRE(kv_read_file(path, &ref, &len, &err) == 0);
    char *parent = source_of(dir, f.first_parent);
    KV_CHECKF(f.first_parent == 1 && parent && strcmp(parent, ref) == 0, "first parent #%llu",
              (unsigned long long)f.first_parent);
    char *prompt = read_text(dir, "prompts/1.txt", NULL);
    KV_CHECK(prompt && strstr(prompt, ref));
    KV_CHECK_STR_CONTAINS(prompt, "## Problem: seedless_max");
    KV_CHECK_STR_CONTAINS(prompt, "Verdict: ok, ");
    KV_CHECKF(f.llm_programs >= 3 && f.llm_ok >= 1 && f.llm_unevaluated == 0 &&
                  f.llm_bad_lineage == 0,
              "%d llm programs, %d ok", f.llm_programs, f.llm_ok);
    free(prompt);
    free(parent);
    free(ref);
}

/* Parents generated from schedules (seeds=schedules): the prompt shows the
 * grammar and the parent's schedule; a ```schedule answer is a candidate
 * (op llm-schedule, generated from it, evaluated), a whole file is one as
 * before (op llm), a schedule that does not parse is a refusal naming the
 * parser's error. */
typedef struct {
    int sched_programs, sched_evaluated, sched_bad, code_programs, refusals, sched_answers;
    char refusal_text[4096];
} sched_facts;

static int on_sched_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    sched_facts *f = arg;
    if (strcmp(p->op, "llm-schedule") == 0) {
        f->sched_programs++;
        f->sched_evaluated += p->verdict != KV_VERDICT_NONE;
        f->sched_bad += p->n_parents != 1 || strcmp(p->model, MODEL) != 0;
    }
    f->code_programs += strcmp(p->op, "llm") == 0;
    return 0;
}

static int on_sched_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    sched_facts *f = arg;
    f->sched_answers +=
        a->stage == KV_STAGE_PROPOSAL && a->program_id != 0 && strcmp(a->op, "llm-schedule") == 0;
    if (a->stage == KV_STAGE_PROPOSAL && a->verdict == KV_VERDICT_PROPOSAL_ERROR) {
        f->refusals++;
        size_t n = strlen(f->refusal_text);
        snprintf(f->refusal_text + n, sizeof f->refusal_text - n, "%s\n",
                 a->detail ? a->detail : "");
    }
    return 0;
}

static void test_schedules(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-schedules");
    if (start_server(dir, "[\"schedule\", \"append\", \"badschedule\", \"schedule\"]",
                     "schedule") != 0)
        return;
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI,
                  .concurrency = 1,
                  .llm_tokens = 14 * REQUEST_TYPICAL,
                  .seeds = KV_SEEDS_SCHEDULES};
    KV_CHECKF(run_llm(dir, &o, &err) == 0, "%s", err.msg);
    kv_test_llm_server_stop(&server);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &sf, why, sizeof why) == 0, "%s", why);
    sched_facts f;
    memset(&f, 0, sizeof f);
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    int rc = kv_archive_open(dir, &ao, &a, &err);
    if (rc == 0)
        rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_sched_program, &f, &err);
    if (rc == 0)
        rc = kv_each_attempt(t, 1, on_sched_attempt, &f, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
    /* schedule answers: candidates (some may repeat a stored schedule) */
    KV_CHECKF(f.sched_answers >= 2 && f.sched_programs >= 1 &&
                  f.sched_evaluated == f.sched_programs && f.sched_bad == 0,
              "%d llm-schedule answers, %d programs, %d evaluated, %d with a wrong parent or "
              "model",
              f.sched_answers, f.sched_programs, f.sched_evaluated, f.sched_bad);
    KV_CHECKF(f.code_programs >= 1, "%d llm programs", f.code_programs);
    if (f.sched_answers < 2)
        fprintf(stderr, "refusals:\n%s", f.refusal_text);
    KV_CHECK_STR_CONTAINS(f.refusal_text, "the reply cannot be used: the schedule does not parse: "
                                          "phase 1 (rs): xport 'sm32'");
    char *prompt = read_text(dir, "prompts/1.txt", NULL);
    KV_CHECK(prompt != NULL);
    if (prompt) {
        KV_CHECK_STR_CONTAINS(prompt, "## The parent's schedule");
        KV_CHECK_STR_CONTAINS(prompt, "### The schedule language");
        KV_CHECK_STR_CONTAINS(prompt, "```schedule\nallreduce threads=");
    }
    free(prompt);
}

static void test_setup_errors(void)
{
    char dir[4096], archive[4200];
    kv_test_fresh_dir(dir, sizeof dir, "search-llm-setup");
    snprintf(archive, sizeof archive, "%s/archive.mdb", dir);
    kv_err err = {{0}};
    llm_opts o = {.api = KV_LLM_API_OPENAI, .concurrency = 1, .llm_tokens = 100};
    unsetenv(KEY_ENV);
    KV_CHECK(run_llm(dir, &o, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "the API key variable " KEY_ENV " (mutator.llm.api_key_env) is not set");
    KV_CHECK(access(archive, F_OK) != 0);
    setenv(KEY_ENV, KEY, 1);
    o.abi_path = "/nonexistent/abi.md";
    KV_CHECK(run_llm(dir, &o, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "/nonexistent/abi.md");
    KV_CHECK_STR_CONTAINS(err.msg, "ABI");
    KV_CHECK(access(archive, F_OK) != 0);
}

/* Which of the library's headers a prompt shows: the parent's includes and theirs, to the end
 * of the chain, and the helpers of the target cell's transport. */
static void test_prompt_headers(void)
{
    static const char *const names[] = {
        "kevo_cublas.cuh", "kevo_gemm_mma.cuh", "kevo_gemm_pipeline.cuh", "kevo_ll.cuh",
        "kevo_side.cuh",   "kevo_sync.cuh",     "kevo_tma.cuh",           "kevo_vec.cuh"};
    enum { N = sizeof names / sizeof names[0] };
    struct kv_run_header h[N];
    kv_run_llm_text x = {.n_headers = N, .headers = h};
    for (int i = 0; i < N; i++) {
        char path[4200];
        size_t len;
        snprintf(path, sizeof path, "%s/patterns/%s", getenv("KEVO_SOURCE_DIR"), names[i]);
        snprintf(h[i].name, sizeof h[i].name, "%s", names[i]);
        KV_REQUIRE(kv_read_file(path, &h[i].text, &len, NULL) == 0);
    }
    struct {
        const char *src, *cell, *want; /* want: the names shown, space-separated */
    } cases[] = {
        {"#include \"kevo_gemm_pipeline.cuh\"\n", "ce/unfused",
         "kevo_cublas.cuh kevo_gemm_pipeline.cuh kevo_side.cuh kevo_sync.cuh kevo_vec.cuh"},
        {"#include \"kevo/kernel.h\"\n", "sm/fused", ""},
        {"#include \"kevo/kernel.h\"\n", "ce/fused", "kevo_side.cuh kevo_sync.cuh kevo_vec.cuh"},
        {"#include \"kevo_ll.cuh\"\n", "sm/fused", "kevo_ll.cuh kevo_sync.cuh"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int wanted[N];
        int n = kv_run_llm_wanted_headers(&x, cases[c].src, kv_cell_parse(cases[c].cell), wanted);
        char got[512] = "";
        for (int i = 0; i < N; i++)
            if (wanted[i])
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? " " : "",
                         names[i]);
        int shown = 0;
        for (int i = 0; i < N; i++)
            shown += wanted[i] != 0;
        KV_CHECKF(strcmp(got, cases[c].want) == 0 && n == shown,
                  "case %zu (%s): got \"%s\" (%d), want \"%s\"", c, cases[c].cell, got, n,
                  cases[c].want);
    }
    for (int i = 0; i < N; i++)
        free(h[i].text);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    kv_test_no_proxy();
    setenv(KEY_ENV, KEY, 1);
    KV_RUN(test_prompt_headers);
    KV_RUN(test_setup_errors);
    KV_RUN(test_seedless);
    KV_RUN(test_schedules);
    KV_RUN(test_replies);
    KV_RUN(test_resume);
    KV_RUN(test_cost_budget);
    KV_RUN(test_concurrency);
    KV_RUN(test_dead_endpoint);
    KV_RUN(test_hostile);
    KV_RUN(test_stop);
    return kv_test_summary();
}
