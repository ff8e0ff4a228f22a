/* test_llm_client.c — the LLM client against a local server
 * (tests/llm_server.py, Python's standard library, on 127.0.0.1) that speaks
 * both APIs and misbehaves on demand: replies, usage and cost; 429 with
 * Retry-After; 500 once and always; 401; timeouts; malformed, truncated and
 * empty bodies; the concurrency limit; the key never in an error. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kevo/clock.h"
#include "mutate/llm.h"
#include "test.h"

#define KEY "sk-test-SECRET-0123456789"

static pid_t server;
static int port;

static void start_server(void)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/llm_server.py", getenv("KEVO_SOURCE_DIR"));
    server = fork();
    if (server == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execlp("python3", "python3", script, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[32] = {0};
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    port = n > 0 ? atoi(buf) : 0;
}

static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
}

static size_t collect(char *d, size_t s, size_t n, void *u)
{
    strncat((char *)u, d, 4000 - strlen((char *)u) < s * n ? 4000 - strlen((char *)u) : s * n);
    return s * n;
}

/* The server's /stats (a JSON object) into out. */
static void stats(char *out)
{
    out[0] = 0;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/stats", port);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    curl_easy_perform(e);
    curl_easy_cleanup(e);
}

static void config(kv_cfg_llm *c, kv_llm_api api, int concurrency, double timeout_s, int retries)
{
    memset(c, 0, sizeof *c);
    c->api = api;
    snprintf(c->endpoint, sizeof c->endpoint, "http://127.0.0.1:%d/v1", port);
    snprintf(c->api_key_env, sizeof c->api_key_env, "KEVO_TEST_LLM_KEY");
    c->n_models = 1;
    snprintf(c->models[0].name, sizeof c->models[0].name, "ok");
    c->models[0].weight = 1;
    c->models[0].price_in_per_mtok = 2.0;
    c->models[0].price_out_per_mtok = 8.0;
    c->concurrency = concurrency;
    c->temperature = 0.5;
    c->max_tokens = 1000;
    c->timeout_s = timeout_s;
    c->max_retries = retries;
    c->prompt_budget_chars = 10000;
}

/* Sends one request per name (at most KV_CFG_MAX_MODELS: a model entry
 * each) and waits for every reply (at most 30 s). */
static int run_batch(const kv_cfg_llm *base, const char *const *names, int n, kv_llm_reply *out)
{
    kv_cfg_llm cfg = *base;
    kv_llm *c = NULL;
    kv_err err = {{0}};
    kv_rng rng;
    kv_rng_seed(&rng, 2);
    uint64_t tickets[16];
    /* one model entry per request: its name picks the server's behaviour */
    cfg.n_models = n;
    for (int i = 0; i < n; i++) {
        cfg.models[i] = base->models[0];
        snprintf(cfg.models[i].name, sizeof cfg.models[i].name, "%s", names[i]);
    }
    if (kv_llm_new(&cfg, 1, &c, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        return -1;
    }
    for (int i = 0; i < n; i++)
        KV_CHECK(kv_llm_submit(c, "system text", "user text", i, &rng, &tickets[i], &err) == 0);
    KV_CHECK(kv_llm_in_flight(c) == n && kv_llm_cost_in_flight(c) > 0);
    int got = 0;
    int64_t t0 = kv_monotonic_ns();
    while (got < n && kv_monotonic_ns() - t0 < 30000000000ll) {
        struct pollfd fds[64];
        int timeout = 200;
        int k = kv_llm_pollfds(c, fds, 64, &timeout);
        poll(fds, (nfds_t)k, timeout);
        if (kv_llm_step(c, &err) != 0) {
            KV_CHECKF(0, "%s", err.msg);
            break;
        }
        kv_llm_reply r;
        while (kv_llm_take(c, &r) == 0) {
            for (int i = 0; i < n; i++)
                if (tickets[i] == r.ticket)
                    out[i] = r;
            got++;
        }
    }
    KV_CHECKF(got == n, "%d of %d replies", got, n);
    KV_CHECK(kv_llm_in_flight(c) == 0 && kv_llm_cost_in_flight(c) == 0);
    kv_llm_free(c);
    return got == n ? 0 : -1;
}

static int run(const kv_cfg_llm *base, const char *const *names, int n, kv_llm_reply *out)
{
    for (int i = 0; i < n; i += KV_CFG_MAX_MODELS) {
        int k = n - i < KV_CFG_MAX_MODELS ? n - i : KV_CFG_MAX_MODELS;
        if (run_batch(base, names + i, k, out + i) != 0)
            return -1;
    }
    return 0;
}

static void test_key(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 2, 1, 0);
    unsetenv("KEVO_TEST_LLM_KEY");
    kv_llm *c = NULL;
    kv_err err = {{0}};
    KV_CHECK(kv_llm_new(&cfg, 1, &c, &err) != 0 && c == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "KEVO_TEST_LLM_KEY");
    setenv("KEVO_TEST_LLM_KEY", KEY, 1);
}

static void test_concurrency(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 2, 5, 0);
    const char *names[] = {"hold-1", "hold-2", "hold-3", "hold-4", "hold-5", "hold-6"};
    kv_llm_reply r[6];
    memset(r, 0, sizeof r);
    int64_t t0 = kv_monotonic_ns();
    if (run(&cfg, names, 6, r) == 0) {
        double s = (double)(kv_monotonic_ns() - t0) * 1e-9;
        for (int i = 0; i < 6; i++)
            KV_CHECK(r[i].ok && r[i].attempts == 1);
        char st[4096];
        stats(st);
        KV_CHECKF(strstr(st, "\"max_concurrent\": 2,") != NULL, "%s", st);
        KV_CHECKF(s >= 1.4, "6 requests of 0.5 s, 2 at a time, took %.2f s", s);
    }
    for (int i = 0; i < 6; i++)
        kv_llm_reply_free(&r[i]);
}

static void test_behaviours(kv_llm_api api)
{
    kv_cfg_llm cfg;
    config(&cfg, api, 16, 1.0, 2);
    const char *p = api == KV_LLM_API_ANTHROPIC ? "a-" : "o-";
    char names[9][64];
    const char *b[] = {"ok", "429once", "500once", "500always", "401",
                       "slow", "malformed", "truncated", "nocontent"};
    const char *np[9];
    for (int i = 0; i < 9; i++) {
        snprintf(names[i], sizeof names[i], "%s%s", b[i], p[0] == 'a' ? "-1" : "-2");
        np[i] = names[i];
    }
    kv_llm_reply r[9];
    memset(r, 0, sizeof r);
    if (run(&cfg, np, 9, r) != 0)
        return;
    /* ok: the text, the usage and the cost */
    KV_CHECK(r[0].ok && r[0].attempts == 1 && strstr(r[0].text, "int ok;"));
    KV_CHECK(r[0].tokens_in == 100 && r[0].tokens_out == 20);
    KV_CHECKF(r[0].cost_usd > 0.00035 && r[0].cost_usd < 0.00037, "%g", r[0].cost_usd);
    /* 429 with Retry-After: 1, then ok: the wait was honoured */
    KV_CHECKF(r[1].ok && r[1].attempts == 2 && r[1].wall_s >= 0.95, "ok %d attempts %d %.2f s",
              r[1].ok, r[1].attempts, r[1].wall_s);
    KV_CHECK(r[2].ok && r[2].attempts == 2);
    KV_CHECK(!r[3].ok && r[3].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[3].error, "HTTP 500: upstream overloaded (after 3 attempts)");
    /* 401: no retry, the API's message, never the key */
    KV_CHECK(!r[4].ok && r[4].attempts == 1);
    KV_CHECK_STR_CONTAINS(r[4].error, "HTTP 401: bad key");
    KV_CHECKF(strstr(r[4].error, KEY) == NULL, "the key leaked: %s", r[4].error);
    /* beyond the 1 s timeout, three times */
    KV_CHECK(!r[5].ok && r[5].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[5].error, "Timeout");
    KV_CHECK(!r[6].ok && r[6].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[6].error, "not JSON");
    KV_CHECK(!r[7].ok && r[7].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[7].error, "truncated");
    KV_CHECK(!r[8].ok);
    KV_CHECK_STR_CONTAINS(r[8].error, "no reply text");
    for (int i = 0; i < 9; i++) {
        KV_CHECK(r[i].ok == (r[i].text != NULL));
        kv_llm_reply_free(&r[i]);
    }
}

static void test_openai(void)
{
    test_behaviours(KV_LLM_API_OPENAI);
}

static void test_anthropic(void)
{
    test_behaviours(KV_LLM_API_ANTHROPIC);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    start_server();
    if (port <= 0) {
        fprintf(stderr, "test_llm_client: the local server did not start (python3?)\n");
        stop_server();
        return 1;
    }
    /* the server answers before the tests start (a loaded machine starts it slowly) */
    char st[4096] = "";
    for (int i = 0; i < 100 && !strstr(st, "max_concurrent"); i++) {
        stats(st);
        if (!strstr(st, "max_concurrent"))
            usleep(100000);
    }
    if (!strstr(st, "max_concurrent")) {
        fprintf(stderr, "test_llm_client: the local server on port %d does not answer\n", port);
        stop_server();
        return 1;
    }
    setenv("KEVO_TEST_LLM_KEY", KEY, 1);
    KV_RUN(test_key);
    KV_RUN(test_concurrency);
    KV_RUN(test_openai);
    KV_RUN(test_anthropic);
    stop_server();
    curl_global_cleanup();
    return kv_test_summary();
}
