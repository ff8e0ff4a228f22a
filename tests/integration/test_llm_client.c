/* test_llm_client.c — the LLM client against a local server
 * (tests/support/llm_server.py, Python's standard library, on 127.0.0.1) that speaks
 * both APIs and misbehaves on demand, chosen by each request's prompt:
 * replies, usage and cost; 429 with Retry-After; 500 once and always; an
 * HTML 502; 401; timeouts; malformed, truncated, empty and oversized bodies;
 * a refused connection and a refused URL scheme; the concurrency limit; the
 * model draw; abandoning requests in flight; the key never in an error or a
 * reply. The tests drive the client with their own poll() loop, whose own
 * limit is long: the loop only turns in time if the client hands it the
 * right sockets and timeouts. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "common/clock.h"
#include "mutate/llm.h"
#include "test.h"
#include "test_util.h"

#define KEY "sk-test-SECRET-0123456789"
#define MAX_REQ 32
/* The system text of every request: 400 characters, so that the prompt's
 * estimate (about 100 tokens) covers the 100 tokens in the server reports */
#define SYSTEM_LEN 400
static char system_text[SYSTEM_LEN + 1];

static kv_test_llm_server server;
static int port;

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

/* The server's /stats, parsed (NULL when it does not answer). */
static cJSON *stats(void)
{
    char *body = kv_test_http_get(port, "/stats");
    cJSON *st = body ? cJSON_Parse(body) : NULL;
    free(body);
    return st;
}

static double stat_number(const cJSON *st, const char *object, const char *key)
{
    const cJSON *o = object ? cJSON_GetObjectItemCaseSensitive(st, object) : st;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void config(kv_cfg_llm *c, kv_llm_api api, int concurrency, double timeout_s, int retries)
{
    memset(c, 0, sizeof *c);
    c->api = api;
    snprintf(c->endpoint, sizeof c->endpoint, "http://127.0.0.1:%d/v1/", port);
    snprintf(c->api_key_env, sizeof c->api_key_env, "KEVO_TEST_LLM_KEY");
    c->n_models = 1;
    snprintf(c->models[0].name, sizeof c->models[0].name, "m-test");
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

/* One client with its requests and their replies (by submission order). */
typedef struct {
    kv_llm *c;
    int n, got;
    uint64_t tickets[MAX_REQ];
    kv_llm_reply out[MAX_REQ];
} job;

static int job_new(job *j, const kv_cfg_llm *cfg)
{
    memset(j, 0, sizeof *j);
    kv_err err = {{0}};
    int rc = kv_llm_new(cfg, 7, &j->c, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    return rc;
}

static void job_submit(job *j, const char *prompt, int model, kv_rng *rng)
{
    kv_err err = {{0}};
    int rc = kv_llm_submit(j->c, system_text, prompt, model, rng, &j->tickets[j->n], &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    j->n += rc == 0;
}

static void job_free(job *j)
{
    kv_llm_free(j->c);
    for (int i = 0; i < j->n; i++)
        kv_llm_reply_free(&j->out[i]);
}

/* Drives the jobs' clients in one poll loop until every reply is in (30 s
 * at most). poll's own limit is 10 s: only the clients' fds and timeouts
 * make the loop turn sooner. Returns the seconds it took; *max_fds: the
 * most descriptors the clients asked to watch at once. */
static double drive(job *jobs, int nj, int *max_fds)
{
    double t0 = now_s();
    int want = 0, got = 0;
    for (int k = 0; k < nj; k++)
        want += jobs[k].n;
    *max_fds = 0;
    while (got < want && now_s() - t0 < 30) {
        struct pollfd fds[128];
        int timeout = 10000, n = 0;
        for (int k = 0; k < nj; k++)
            n += kv_llm_pollfds(jobs[k].c, fds + n, 128 - n, &timeout);
        *max_fds = n > *max_fds ? n : *max_fds;
        if (poll(fds, (nfds_t)n, timeout) < 0) {
            perror("poll");
            break;
        }
        for (int k = 0; k < nj; k++) {
            kv_err err = {{0}};
            if (kv_llm_step(jobs[k].c, &err) != 0) {
                KV_CHECKF(0, "%s", err.msg);
                return now_s() - t0;
            }
            kv_llm_reply r;
            while (kv_llm_take(jobs[k].c, &r) == 0) {
                int i = 0;
                while (i < jobs[k].n && jobs[k].tickets[i] != r.ticket)
                    i++;
                KV_CHECKF(i < jobs[k].n, "unknown ticket %llu", (unsigned long long)r.ticket);
                if (i < jobs[k].n)
                    jobs[k].out[i] = r;
                else
                    kv_llm_reply_free(&r);
                jobs[k].got++;
                got++;
            }
        }
    }
    KV_CHECKF(got == want, "%d of %d replies", got, want);
    for (int k = 0; k < nj; k++) {
        uint64_t tokens;
        double usd;
        kv_llm_max_in_flight(jobs[k].c, &tokens, &usd);
        KV_CHECK(kv_llm_in_flight(jobs[k].c) == 0 && tokens == 0 && usd == 0);
    }
    return now_s() - t0;
}

static void test_key(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 2, 1, 0);
    kv_llm *c = NULL;
    kv_err err = {{0}};
    unsetenv("KEVO_TEST_LLM_KEY");
    KV_CHECK(kv_llm_new(&cfg, 1, &c, &err) != 0 && c == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "KEVO_TEST_LLM_KEY");
    setenv("KEVO_TEST_LLM_KEY", "", 1);
    KV_CHECK(kv_llm_new(&cfg, 1, &c, &err) != 0 && c == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "KEVO_TEST_LLM_KEY (mutator.llm.api_key_env) is not set");
    setenv("KEVO_TEST_LLM_KEY", KEY, 1);
}

/* Six requests of 0.5 s, two at a time: the server never sees three. */
static void test_concurrency(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 2, 5, 0);
    job j;
    if (job_new(&j, &cfg) != 0)
        return;
    char prompts[6][16];
    for (int i = 0; i < 6; i++) {
        snprintf(prompts[i], sizeof prompts[i], "hold-%d", i);
        job_submit(&j, prompts[i], 0, NULL);
    }
    /* before any answer: each takes at most ceil((400 + 6) / 4) = 102 tokens in
     * at $2/M and 1000 out at $8/M, for each of the two attempts that can be
     * paid for (a broken answer is retried once) */
    double want = 6 * 2 * (102 * 2.0 + 1000 * 8.0) * 1e-6, usd;
    uint64_t tokens;
    kv_llm_max_in_flight(j.c, &tokens, &usd);
    KV_CHECKF(kv_llm_in_flight(j.c) == 6 && tokens == 6 * 2 * 1102 && usd > want - 1e-12 &&
                  usd < want + 1e-12,
              "%d in flight taking %llu tokens and $%g, want $%g", kv_llm_in_flight(j.c),
              (unsigned long long)tokens, usd, want);
    int max_fds = 0;
    double s = drive(&j, 1, &max_fds);
    for (int i = 0; i < j.n; i++)
        KV_CHECK(j.out[i].ok && j.out[i].attempts == 1);
    cJSON *st = stats();
    KV_CHECKF(stat_number(st, NULL, "max_concurrent") == 2, "at most %g requests at once",
              stat_number(st, NULL, "max_concurrent"));
    cJSON_Delete(st);
    KV_CHECKF(s >= 1.4 && s < 4.0, "6 requests of 0.5 s, 2 at a time, took %.2f s", s);
    KV_CHECKF(max_fds >= 1 && max_fds <= 2, "the client asked to watch %d sockets", max_fds);
    job_free(&j);
}

enum {
    OK,
    R429,
    R500ONCE,
    R500,
    R502,
    R401,
    ECHO,
    SLOW,
    MALFORMED,
    TRUNCATED,
    NOCONTENT,
    HUGE,
    N_BEHAVIOURS
};
static const char *const behaviours[N_BEHAVIOURS] = {
    "ok",   "429once", "500once",   "500always", "502html",   "401",
    "echo", "slow",    "malformed", "truncated", "nocontent", "huge"};

static void check_behaviours(const kv_llm_reply *r, const char *api, const cJSON *st)
{
    char prompt[64];
    /* ok: the text, the usage and the cost */
    KV_CHECKF(r[OK].ok && r[OK].attempts == 1 && strstr(r[OK].text, "int ok;"), "%s: %s", api,
              r[OK].error);
    KV_CHECK(r[OK].tokens_in == 100 && r[OK].tokens_out == 20);
    KV_CHECKF(r[OK].cost_usd > 0.00036 - 1e-12 && r[OK].cost_usd < 0.00036 + 1e-12, "%g",
              r[OK].cost_usd);
    KV_CHECK(strcmp(r[OK].model, "m-test") == 0);
    /* 429 with Retry-After: 1, then ok: the wait was honoured */
    snprintf(prompt, sizeof prompt, "429once-%s", api);
    double gap = stat_number(st, "second_at", prompt) - stat_number(st, "first_at", prompt);
    KV_CHECKF(r[R429].ok && r[R429].attempts == 2 && r[R429].wall_s >= 0.95 && gap >= 0.95,
              "%s: ok %d attempts %d %.2f s, server saw the retry after %.2f s", api, r[R429].ok,
              r[R429].attempts, r[R429].wall_s, gap);
    KV_CHECK(r[R500ONCE].ok && r[R500ONCE].attempts == 2 && r[R500ONCE].tokens_in == 100);
    KV_CHECK(!r[R500].ok && r[R500].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[R500].error, "HTTP 500: upstream overloaded (after 3 attempts)");
    /* an error page that is not JSON: its start, on one line */
    KV_CHECK(!r[R502].ok && r[R502].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[R502].error, "HTTP 502: <html> <head><title>502 Bad Gateway");
    /* 401: no retry, the API's message, never the key */
    KV_CHECK(!r[R401].ok && r[R401].attempts == 1);
    KV_CHECK_STR_CONTAINS(r[R401].error, "HTTP 401: bad key");
    KV_CHECK_STR_CONTAINS(r[R401].error, "***");
    KV_CHECKF(strstr(r[R401].error, KEY) == NULL, "the key leaked: %s", r[R401].error);
    /* a reply echoing the headers: the key is scrubbed from the text too */
    KV_CHECK(r[ECHO].ok && r[ECHO].text && strstr(r[ECHO].text, "***"));
    KV_CHECKF(r[ECHO].text && strstr(r[ECHO].text, KEY) == NULL, "the key leaked: %s",
              r[ECHO].text);
    /* beyond the 1 s timeout, three times */
    KV_CHECK(!r[SLOW].ok && r[SLOW].attempts == 3);
    KV_CHECK_STR_CONTAINS(r[SLOW].error, "Timeout");
    /* broken answers: retried once */
    KV_CHECK(!r[MALFORMED].ok && r[MALFORMED].attempts == 2);
    KV_CHECK_STR_CONTAINS(r[MALFORMED].error, "not JSON");
    KV_CHECK_STR_CONTAINS(r[MALFORMED].error, "(after 2 attempts)");
    KV_CHECK(!r[TRUNCATED].ok && r[TRUNCATED].attempts == 2);
    KV_CHECK_STR_CONTAINS(r[TRUNCATED].error, "truncated");
    /* no text, but the tokens of both attempts were paid for */
    KV_CHECK(!r[NOCONTENT].ok && r[NOCONTENT].attempts == 2);
    KV_CHECK_STR_CONTAINS(r[NOCONTENT].error, "no reply text");
    KV_CHECKF(r[NOCONTENT].tokens_in == 200 && r[NOCONTENT].tokens_out == 40 &&
                  r[NOCONTENT].cost_usd > 0.00072 - 1e-12 &&
                  r[NOCONTENT].cost_usd < 0.00072 + 1e-12,
              "%llu in, %llu out, $%g", (unsigned long long)r[NOCONTENT].tokens_in,
              (unsigned long long)r[NOCONTENT].tokens_out, r[NOCONTENT].cost_usd);
    /* over the 8 MiB cap: cut off, not retried */
    KV_CHECK(!r[HUGE].ok && r[HUGE].attempts == 1);
    KV_CHECK_STR_CONTAINS(r[HUGE].error, "exceeds 8 MiB");
    for (int i = 0; i < N_BEHAVIOURS; i++) {
        KV_CHECKF(r[i].ok == (r[i].text != NULL) && r[i].ok == !r[i].error[0], "%s %s", api,
                  behaviours[i]);
        KV_CHECKF(strstr(r[i].error, KEY) == NULL, "the key leaked: %s", r[i].error);
    }
}

/* Every behaviour through both APIs at once, two retries, a 1 s timeout. */
static void test_behaviours(void)
{
    const char *api[2] = {"openai", "anthropic"};
    job jobs[2];
    char prompts[2][N_BEHAVIOURS][64];
    for (int k = 0; k < 2; k++) {
        kv_cfg_llm cfg;
        config(&cfg, k ? KV_LLM_API_ANTHROPIC : KV_LLM_API_OPENAI, 16, 1.0, 2);
        if (job_new(&jobs[k], &cfg) != 0) {
            if (k)
                job_free(&jobs[0]);
            return;
        }
        for (int i = 0; i < N_BEHAVIOURS; i++) {
            snprintf(prompts[k][i], sizeof prompts[k][i], "%s-%s", behaviours[i], api[k]);
            job_submit(&jobs[k], prompts[k][i], 0, NULL);
        }
    }
    int max_fds = 0;
    drive(jobs, 2, &max_fds);
    cJSON *st = stats();
    KV_CHECK(st != NULL);
    for (int k = 0; k < 2; k++) {
        if (jobs[k].got == jobs[k].n)
            check_behaviours(jobs[k].out, api[k], st);
        job_free(&jobs[k]);
    }
    cJSON_Delete(st);
}

/* A port that refuses connections (bound, not listening), and a URL scheme
 * the client does not speak (not retried). */
static void test_unreachable(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0) {
        KV_CHECKF(0, "cannot bind a local socket");
        if (s >= 0)
            close(s);
        return;
    }
    job jobs[2];
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 2, 2.0, 1);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:%d/v1", ntohs(a.sin_port));
    if (job_new(&jobs[0], &cfg) != 0) {
        close(s);
        return;
    }
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "file:///nonexistent/v1");
    if (job_new(&jobs[1], &cfg) != 0) {
        job_free(&jobs[0]);
        close(s);
        return;
    }
    job_submit(&jobs[0], "ok-refused", 0, NULL);
    job_submit(&jobs[1], "ok-file", 0, NULL);
    int max_fds = 0;
    drive(jobs, 2, &max_fds);
    close(s);
    const kv_llm_reply *r = &jobs[0].out[0], *f = &jobs[1].out[0];
    KV_CHECKF(!r->ok && r->attempts == 2, "ok %d attempts %d: %s", r->ok, r->attempts, r->error);
    KV_CHECK_STR_CONTAINS(r->error, "connect");
    KV_CHECK_STR_CONTAINS(r->error, "(after 2 attempts)");
    /* the cause only: the caller says that the request failed */
    KV_CHECKF(strstr(r->error, "request failed") == NULL, "%s", r->error);
    KV_CHECKF(!f->ok && f->attempts == 1, "ok %d attempts %d: %s", f->ok, f->attempts, f->error);
    KV_CHECK_STR_CONTAINS(f->error, "protocol");
    job_free(&jobs[0]);
    job_free(&jobs[1]);
}

/* model < 0: drawn by the weights (1 : 3), deterministically for a seed. */
static void test_model_draw(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_OPENAI, 16, 5, 0);
    cfg.n_models = 2;
    cfg.models[1] = cfg.models[0];
    snprintf(cfg.models[0].name, sizeof cfg.models[0].name, "m-light");
    snprintf(cfg.models[1].name, sizeof cfg.models[1].name, "m-heavy");
    cfg.models[1].weight = 3;
    job j;
    if (job_new(&j, &cfg) != 0)
        return;
    kv_rng rng;
    kv_rng_seed(&rng, 11);
    char prompts[24][16];
    for (int i = 0; i < 24; i++) {
        snprintf(prompts[i], sizeof prompts[i], "ok-draw%d", i);
        job_submit(&j, prompts[i], -1, &rng);
    }
    int max_fds = 0, light = 0, heavy = 0;
    drive(&j, 1, &max_fds);
    for (int i = 0; i < j.n; i++) {
        KV_CHECK(j.out[i].ok);
        light += strcmp(j.out[i].model, "m-light") == 0;
        heavy += strcmp(j.out[i].model, "m-heavy") == 0;
    }
    KV_CHECKF(light + heavy == 24 && light >= 1 && heavy > light, "%d light, %d heavy", light,
              heavy);
    job_free(&j);
}

/* Freeing the client abandons its transfers at once. */
static void test_abandon(void)
{
    kv_cfg_llm cfg;
    config(&cfg, KV_LLM_API_ANTHROPIC, 2, 5, 0);
    job j;
    if (job_new(&j, &cfg) != 0)
        return;
    job_submit(&j, "slow-abandon1", 0, NULL);
    job_submit(&j, "slow-abandon2", 0, NULL);
    job_submit(&j, "slow-abandon3", 0, NULL);
    double t0 = now_s();
    int watched = 0;
    while (now_s() - t0 < 2 && watched < 2) {
        struct pollfd fds[8];
        int timeout = 100;
        watched = kv_llm_pollfds(j.c, fds, 8, &timeout);
        kv_err err = {{0}};
        if (poll(fds, (nfds_t)watched, timeout) < 0 || kv_llm_step(j.c, &err) != 0)
            break;
    }
    KV_CHECKF(watched == 2 && kv_llm_in_flight(j.c) == 3, "%d sockets, %d in flight", watched,
              kv_llm_in_flight(j.c));
    double t1 = now_s();
    kv_llm_free(j.c);
    KV_CHECKF(now_s() - t1 < 0.5, "freeing took %.2f s", now_s() - t1);
}

/* Usage counts that are not whole numbers in [0, KV_LLM_TOKENS_MAX] (1e30,
 * 2^64-1, 1e999, negative, a string, a fraction, none at all) are never
 * taken (nor cast: the sanitizer build stops on an out-of-range cast): the
 * tokens are estimated from the characters sent and received, and the
 * reply says so. A usage within range is taken as stated. */
static void test_usage(void)
{
    static const char *const bad[] = {"usagehuge", "usagemax",  "usageinf", "usageneg",
                                      "usagestr",  "usagefrac", "usagenone"};
    const int nb = (int)(sizeof bad / sizeof bad[0]);
    for (int k = 0; k < 2; k++) {
        kv_cfg_llm cfg;
        config(&cfg, k ? KV_LLM_API_ANTHROPIC : KV_LLM_API_OPENAI, 8, 5, 0);
        job j;
        if (job_new(&j, &cfg) != 0)
            return;
        for (int i = 0; i < nb; i++)
            job_submit(&j, bad[i], 0, NULL);
        job_submit(&j, "ok", 0, NULL);
        int max_fds = 0;
        drive(&j, 1, &max_fds);
        for (int i = 0; i < nb && j.got == j.n; i++) {
            const kv_llm_reply *r = &j.out[i];
            /* the system text and the prompt, 4 characters a token, rounded up */
            uint64_t in = (SYSTEM_LEN + strlen(bad[i]) + 3) / 4;
            KV_CHECKF(r->ok && r->tokens_estimated && r->tokens_in == in,
                      "%s %s: ok %d, "
                      "estimated %d, %llu tokens in (want %llu): %s",
                      k ? "anthropic" : "openai", bad[i], r->ok, r->tokens_estimated,
                      (unsigned long long)r->tokens_in, (unsigned long long)in, r->error);
            /* a body of 400 characters of text and at most 400 of JSON around it */
            KV_CHECKF(r->tokens_out >= 100 && r->tokens_out <= 200, "%s: %llu tokens out", bad[i],
                      (unsigned long long)r->tokens_out);
            KV_CHECK(r->cost_usd > 0 && r->cost_usd < 0.01);
        }
        if (j.got == j.n)
            KV_CHECK(!j.out[nb].tokens_estimated && j.out[nb].tokens_in == 100 &&
                     j.out[nb].tokens_out == 20);
        job_free(&j);
    }
}

/* No reply records more than its request's most (kv_llm_request_max, what
 * a budget reserves for it): counts claimed beyond the prompt's estimate and
 * max_tokens (1e8, in range but absurd), counts estimated from a body longer
 * than max_tokens, and a broken answer retried (both attempts paid) are all
 * capped; before, a {1e8, 1e8} usage recorded $1,000 a request. */
static void test_usage_capped(void)
{
    static const char *const prompts[] = {"usageabsurd", "usagehuge", "usagenone",
                                          "nocontent",   "malformed", "ok"};
    const int np = (int)(sizeof prompts / sizeof prompts[0]);
    for (int k = 0; k < 2; k++) {
        kv_cfg_llm cfg;
        config(&cfg, k ? KV_LLM_API_ANTHROPIC : KV_LLM_API_OPENAI, 8, 5, 2);
        cfg.max_tokens = 10; /* below the 20 out the server reports */
        job j;
        if (job_new(&j, &cfg) != 0)
            return;
        char p[np][64];
        for (int i = 0; i < np; i++) {
            snprintf(p[i], sizeof p[i], "%s-cap%d", prompts[i], k);
            job_submit(&j, p[i], 0, NULL);
        }
        int max_fds = 0;
        drive(&j, 1, &max_fds);
        for (int i = 0; i < np && j.got == j.n; i++) {
            const kv_llm_reply *r = &j.out[i];
            uint64_t most;
            double most_usd;
            kv_llm_request_max(&cfg, 0, SYSTEM_LEN + strlen(p[i]), &most, &most_usd);
            KV_CHECKF(r->tokens_in + r->tokens_out <= most && r->cost_usd <= most_usd + 1e-12 &&
                          r->tokens_out <= (uint64_t)r->attempts * 10,
                      "%s: %llu + %llu tokens, $%g in %d attempts; the most: %llu, $%g", p[i],
                      (unsigned long long)r->tokens_in, (unsigned long long)r->tokens_out,
                      r->cost_usd, r->attempts, (unsigned long long)most, most_usd);
            KV_CHECKF(r->tokens_estimated, "%s: capped counts not marked estimated", p[i]);
        }
        job_free(&j);
    }
}

/* Whether s holds a piece of KEY of 12 characters or more. */
static int has_key_piece(const char *s)
{
    size_t k = strlen(KEY);
    for (size_t i = 0; s && i + 12 <= k; i++) {
        char piece[16];
        snprintf(piece, sizeof piece, "%.12s", KEY + i);
        if (strstr(s, piece))
            return 1;
    }
    return 0;
}

/* A server that echoes the key cut short or in pieces, in a reply's text and
 * in an error: every piece of 12 characters or more is scrubbed. */
static void test_key_pieces(void)
{
    for (int k = 0; k < 2; k++) {
        kv_cfg_llm cfg;
        config(&cfg, k ? KV_LLM_API_ANTHROPIC : KV_LLM_API_OPENAI, 2, 5, 0);
        job j;
        if (job_new(&j, &cfg) != 0)
            return;
        job_submit(&j, "echofrag", 0, NULL);
        job_submit(&j, "echofrag401", 0, NULL);
        int max_fds = 0;
        drive(&j, 1, &max_fds);
        if (j.got == j.n) {
            KV_CHECKF(j.out[0].ok && j.out[0].text && !has_key_piece(j.out[0].text) &&
                          strstr(j.out[0].text, "cut: *** mid: *** tail: ***"),
                      "a piece of the key leaked: %s", j.out[0].text);
            KV_CHECKF(!j.out[1].ok && !has_key_piece(j.out[1].error) &&
                          strstr(j.out[1].error, "cut: *** mid: *** tail: ***"),
                      "a piece of the key leaked: %s", j.out[1].error);
        }
        job_free(&j);
    }
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    memset(system_text, 's', SYSTEM_LEN);
    kv_test_no_proxy();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "test_llm_client: curl_global_init failed\n");
        return 1;
    }
    if (kv_test_llm_server_start(&server, NULL) != 0)
        return 1;
    port = server.port;
    setenv("KEVO_TEST_LLM_KEY", KEY, 1);
    KV_RUN(test_key);
    KV_RUN(test_concurrency); /* first: the server's max_concurrent counts every test */
    KV_RUN(test_behaviours);
    KV_RUN(test_usage);
    KV_RUN(test_usage_capped);
    KV_RUN(test_key_pieces);
    KV_RUN(test_unreachable);
    KV_RUN(test_model_draw);
    KV_RUN(test_abandon);
    kv_test_llm_server_stop(&server);
    curl_global_cleanup();
    return kv_test_summary();
}
