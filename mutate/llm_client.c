/* llm_client.c — the asynchronous chat client over libcurl's multi
 * interface (llm.h).
 *
 * Requests wait in a queue, at most cfg.concurrency transfer at once. The
 * coordinator polls the sockets libcurl reports (CURLMOPT_SOCKETFUNCTION)
 * with a timeout from libcurl's timer (CURLMOPT_TIMERFUNCTION) and from the
 * retry back-offs, then calls kv_llm_step, which hands libcurl every socket
 * (curl_multi_socket_action with an empty event mask: poll's results are not
 * passed in, so libcurl tests each socket itself) and the timer when it is
 * due, and decides each finished transfer:
 *   200 with a usable body          → the reply;
 *   429, 5xx, a timeout, a failed connection
 *                                   → retried after 0.5 s × 2^(k-1) × [0.75, 1.25)
 *                                     (k: the attempt; at most 60 s), or after
 *                                     Retry-After when the server sends it (at
 *                                     most 10 min), up to cfg.max_retries times;
 *   a truncated or malformed body, or one without reply text
 *                                   → the same, but once at most: a server that
 *                                     sends a broken answer twice will likely
 *                                     keep doing so, and each try is paid for;
 *   any other status, a body over 8 MiB, a bad URL or TLS failure
 *                                   → failed at once with the API's message.
 * Tokens are summed over every attempt answered with 200, so a reply that
 * failed still carries what it cost; a count the answer does not state as a
 * whole number in [0, KV_LLM_TOKENS_MAX] is estimated from the characters
 * sent and received (ceil(chars / 4)) and the reply marked as estimated;
 * every count, stated or estimated, is capped at what the request could have
 * cost (the prompt's estimate in, max_tokens out; the reply then marked as
 * estimated too), so no reply records more than kv_llm_request_max.
 * Errors say what went wrong, never "request failed" (the caller says that).
 * The API key is only ever put in a request header; every error and reply
 * text is scrubbed of it before it leaves the client, and redirects are not
 * followed (the key would go along). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/env.h"
#include "mutate/llm.h"

#define MAX_BODY (8u << 20)
#define RETRY_BASE_S 0.5
#define RETRY_MAX_S 60.0        /* the longest back-off of our own */
#define RETRY_AFTER_MAX_S 600.0 /* the longest Retry-After obeyed */

typedef enum { R_WAITING, R_RUNNING, R_DONE } req_state;

typedef struct req {
    uint64_t ticket;
    int model;
    char *body;
    size_t prompt_chars;
    CURL *easy;
    struct curl_slist *headers;
    char *resp;
    size_t resp_len, resp_cap;
    int too_big;
    int bad_bodies;           /* attempts that ended in a broken answer */
    double retry_after;       /* seconds from the last response's header; < 0: none */
    double t_submit, next_at; /* monotonic seconds */
    req_state state;
    kv_llm_reply reply;
    struct req *next;
} req;

typedef struct {
    curl_socket_t fd;
    int what; /* CURL_POLL_IN, _OUT or _INOUT */
} sock;

struct kv_llm {
    kv_cfg_llm cfg;
    char key[1024];
    CURLM *multi;
    int curl_inited; /* curl_global_init succeeded: cleanup owed */
    kv_rng rng;
    req *reqs; /* submission order */
    int n;
    uint64_t next_ticket;
    sock *socks; /* what libcurl asked to watch */
    int n_socks, cap_socks;
    double timer_at; /* < 0: no libcurl timeout pending */
};

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

void kv_llm_reply_free(kv_llm_reply *r)
{
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* The shortest piece of the key that scrub() replaces: a server that echoes
 * the key cut short or in parts must not leak it either. */
#define SCRUB_MIN 12

/* Replaces, in s, every run of characters that is a piece of the key at
 * least SCRUB_MIN long (the whole key, when shorter) by "***". */
static void scrub(const kv_llm *c, char *s)
{
    size_t k = strlen(c->key);
    if (!s || k < 4)
        return;
    size_t need = k < SCRUB_MIN ? k : SCRUB_MIN;
    char *w = s;
    const char *p = s;
    while (*p) {
        size_t best = 0; /* the longest piece of the key that starts at p */
        const char *j = memchr(c->key, *p, k);
        while (j) {
            size_t at = (size_t)(j - c->key), l = 0;
            while (at + l < k && p[l] == j[l])
                l++;
            best = l > best ? l : best;
            j = memchr(j + 1, *p, k - at - 1);
        }
        if (best >= need) {
            memcpy(w, "***", 3);
            w += 3;
            p += best;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    kv_llm *c = userp;
    int i = 0;
    while (i < c->n_socks && c->socks[i].fd != s)
        i++;
    if (what == CURL_POLL_REMOVE) {
        if (i < c->n_socks)
            c->socks[i] = c->socks[--c->n_socks];
        return 0;
    }
    if (i == c->n_socks) {
        if (c->n_socks == c->cap_socks) {
            int cap = c->cap_socks ? 2 * c->cap_socks : 16;
            sock *grown = realloc(c->socks, sizeof *grown * (size_t)cap);
            if (!grown)
                return -1; /* libcurl fails the transfers */
            c->socks = grown;
            c->cap_socks = cap;
        }
        c->n_socks++;
    }
    c->socks[i].fd = s;
    c->socks[i].what = what;
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    kv_llm *c = userp;
    c->timer_at = timeout_ms < 0 ? -1 : now_s() + (double)timeout_ms * 1e-3;
    return 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *userp)
{
    req *r = userp;
    size_t len = size * n;
    if (r->resp_len + len > MAX_BODY) {
        r->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (r->resp_len + len + 1 > r->resp_cap) { /* doubling: bodies arrive in 16 KiB pieces */
        size_t cap = r->resp_cap ? r->resp_cap : 64 << 10;
        while (cap < r->resp_len + len + 1)
            cap *= 2;
        char *grown = realloc(r->resp, cap);
        if (!grown)
            return 0;
        r->resp = grown;
        r->resp_cap = cap;
    }
    memcpy(r->resp + r->resp_len, data, len);
    r->resp_len += len;
    r->resp[r->resp_len] = 0;
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *userp)
{
    req *r = userp;
    size_t len = size * n;
    if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0) {
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)(len - 12 < 31 ? len - 12 : 31), data + 12);
        char *end;
        double s = strtod(v, &end);
        if (end != v && s >= 0) /* delta-seconds; an HTTP date is ignored (plain back-off) */
            r->retry_after = s < RETRY_AFTER_MAX_S ? s : RETRY_AFTER_MAX_S;
    }
    return len;
}

/* The key kv_llm_take_key took out of the environment, and its variable. */
static struct {
    char name[KV_CFG_NAME_MAX];
    char key[sizeof((kv_llm *)0)->key];
} held;

/* The key: the variable's value, or what kv_llm_take_key took from it. */
static const char *api_key(const kv_cfg_llm *cfg)
{
    const char *key = getenv(cfg->api_key_env);
    if ((!key || !key[0]) && held.key[0] && strcmp(held.name, cfg->api_key_env) == 0)
        return held.key;
    return key;
}

int kv_llm_take_key(const kv_cfg_llm *cfg, kv_err *err)
{
    if (kv_llm_check(cfg, err) != 0)
        return -1;
    const char *key = api_key(cfg);
    if (key && key[0]) {
        snprintf(held.name, sizeof held.name, "%s", cfg->api_key_env);
        snprintf(held.key, sizeof held.key, "%s", key);
        kv_env_erase(cfg->api_key_env);
    }
    return 0;
}

int kv_llm_check(const kv_cfg_llm *cfg, kv_err *err)
{
    const char *key = api_key(cfg);
    if (!key || !key[0])
        return kv_err_set(err, "the API key variable %s (mutator.llm.api_key_env) is not set",
                          cfg->api_key_env);
    if (strlen(key) >= sizeof((kv_llm *)0)->key)
        return kv_err_set(err, "the value of %s is too long for an API key", cfg->api_key_env);
    if (cfg->n_models < 1 || cfg->n_models > KV_CFG_MAX_MODELS)
        return kv_err_set(err, "mutator.llm.models: no model");
    if (cfg->concurrency < 1)
        return kv_err_set(err, "mutator.llm.concurrency: must be at least 1");
    return 0;
}

int kv_llm_new(const kv_cfg_llm *cfg, uint64_t seed, kv_llm **out, kv_err *err)
{
    *out = NULL;
    if (kv_llm_check(cfg, err) != 0)
        return -1;
    const char *key = api_key(cfg);
    kv_llm *c = calloc(1, sizeof *c);
    if (!c)
        return kv_err_set(err, "out of memory");
    c->cfg = *cfg;
    snprintf(c->key, sizeof c->key, "%s", key);
    kv_rng_seed(&c->rng, seed);
    c->next_ticket = 1;
    c->timer_at = -1;
    CURLcode gc = curl_global_init(CURL_GLOBAL_DEFAULT); /* reference-counted by libcurl */
    c->curl_inited = gc == CURLE_OK;
    if (gc != CURLE_OK || !(c->multi = curl_multi_init())) {
        kv_llm_free(c);
        return kv_err_set(err, "libcurl: %s",
                          gc != CURLE_OK ? curl_easy_strerror(gc) : "curl_multi_init failed");
    }
    if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK) {
        kv_llm_free(c);
        return kv_err_set(err, "libcurl: cannot set the multi callbacks");
    }
    *out = c;
    return 0;
}

/* Gives back the transfer's handles and its response; the request stays. */
static void req_release(kv_llm *c, req *r)
{
    if (r->easy) {
        /* fails only for a handle not in the multi, which then needs no removal */
        (void)curl_multi_remove_handle(c->multi, r->easy);
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
    curl_slist_free_all(r->headers);
    r->headers = NULL;
    free(r->resp);
    r->resp = NULL;
    r->resp_len = r->resp_cap = 0;
    r->too_big = 0;
}

void kv_llm_free(kv_llm *c)
{
    if (!c)
        return;
    while (c->reqs) {
        req *r = c->reqs;
        c->reqs = r->next;
        req_release(c, r);
        kv_llm_reply_free(&r->reply);
        free(r->body);
        free(r);
    }
    if (c->multi)
        curl_multi_cleanup(c->multi);
    if (c->curl_inited)
        curl_global_cleanup();
    free(c->socks);
    memset(c->key, 0, sizeof c->key);
    free(c);
}

int kv_llm_submit(kv_llm *c, const char *system, const char *user, int model, kv_rng *rng,
                  uint64_t *ticket, kv_err *err)
{
    if (model < 0)
        model = kv_llm_draw_model(c, rng);
    if (model < 0 || model >= c->cfg.n_models)
        return kv_err_set(err, "no model to send the request to");
    req *r = calloc(1, sizeof *r);
    if (!r || !(r->body = kv_llm_request_body(&c->cfg, model, system, user))) {
        free(r);
        return kv_err_set(err, "out of memory");
    }
    r->ticket = c->next_ticket++;
    r->model = model;
    r->prompt_chars = strlen(system) + strlen(user);
    r->retry_after = -1;
    r->t_submit = now_s();
    r->reply.ticket = r->ticket;
    snprintf(r->reply.model, sizeof r->reply.model, "%s", c->cfg.models[model].name);
    req **p = &c->reqs;
    while (*p)
        p = &(*p)->next;
    *p = r;
    c->n++;
    *ticket = r->ticket;
    return 0;
}

int kv_llm_in_flight(const kv_llm *c)
{
    return c->n;
}

void kv_llm_max_in_flight(const kv_llm *c, uint64_t *tokens, double *usd)
{
    *tokens = 0;
    *usd = 0;
    for (const req *r = c->reqs; r; r = r->next) {
        if (r->state == R_DONE)
            continue;
        uint64_t t;
        double u;
        kv_llm_request_max(&c->cfg, r->model, r->prompt_chars, &t, &u);
        *tokens += t;
        *usd += u;
    }
}

int kv_llm_draw_model(const kv_llm *c, kv_rng *rng)
{
    double w[KV_CFG_MAX_MODELS];
    for (int i = 0; i < c->cfg.n_models; i++)
        w[i] = c->cfg.models[i].weight;
    return kv_rng_weighted(rng, w, c->cfg.n_models);
}

static int running(const kv_llm *c)
{
    int n = 0;
    for (const req *r = c->reqs; r; r = r->next)
        n += r->state == R_RUNNING;
    return n;
}

int kv_llm_pollfds(kv_llm *c, struct pollfd *fds, int cap, int *timeout_ms)
{
    int n = 0;
    for (int i = 0; i < c->n_socks && n < cap; i++) {
        short ev = 0;
        if (c->socks[i].what == CURL_POLL_IN || c->socks[i].what == CURL_POLL_INOUT)
            ev |= POLLIN;
        if (c->socks[i].what == CURL_POLL_OUT || c->socks[i].what == CURL_POLL_INOUT)
            ev |= POLLOUT;
        fds[n++] = (struct pollfd){.fd = c->socks[i].fd, .events = ev};
    }
    double now = now_s(), next = c->timer_at;
    int slots = running(c) < c->cfg.concurrency;
    for (const req *r = c->reqs; r; r = r->next) {
        if (r->state == R_WAITING && slots)
            next = next < 0 || r->next_at < next ? r->next_at : next;
        else if (r->state == R_DONE)
            next = now; /* a reply is waiting to be taken */
    }
    if (next >= 0) {
        double ms = next <= now ? 0 : (next - now) * 1e3 + 1;
        int m = ms > 3600e3 ? 3600000 : (int)ms;
        if (*timeout_ms < 0 || m < *timeout_ms)
            *timeout_ms = m;
    }
    return n;
}

static void finish(kv_llm *c, req *r, int ok)
{
    r->reply.ok = ok;
    r->reply.wall_s = now_s() - r->t_submit;
    scrub(c, r->reply.error);
    scrub(c, r->reply.text);
    r->state = R_DONE;
    req_release(c, r);
}

/* Sets up and adds the transfer of r: 0, or -1 with why (r's handles given back). */
static int start(kv_llm *c, req *r, char *why, size_t cap)
{
    char url[KV_CFG_TEXT_MAX + 32], auth[1100];
    int anthropic = c->cfg.api == KV_LLM_API_ANTHROPIC;
    size_t el = strlen(c->cfg.endpoint);
    snprintf(url, sizeof url, "%.*s%s", (int)(el && c->cfg.endpoint[el - 1] == '/' ? el - 1 : el),
             c->cfg.endpoint, anthropic ? "/messages" : "/chat/completions");
    if (anthropic)
        snprintf(auth, sizeof auth, "x-api-key: %s", c->key);
    else
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->key);
    /* "Expect:" keeps libcurl from waiting for a 100 Continue on big prompts */
    const char *fixed[] = {"Content-Type: application/json",
                           "Expect:", anthropic ? "anthropic-version: 2023-06-01" : NULL, auth};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        struct curl_slist *h;
        if (fixed[i] && !(h = curl_slist_append(r->headers, fixed[i]))) {
            memset(auth, 0, sizeof auth);
            req_release(c, r);
            snprintf(why, cap, "out of memory");
            return -1;
        } else if (fixed[i]) {
            r->headers = h;
        }
    }
    memset(auth, 0, sizeof auth);
    r->easy = curl_easy_init();
    long timeout_ms = (long)(c->cfg.timeout_s * 1e3);
    if (!r->easy || curl_easy_setopt(r->easy, CURLOPT_URL, url) != CURLE_OK ||
#if LIBCURL_VERSION_NUM >= 0x075500
        curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
#else
        curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) !=
            CURLE_OK ||
#endif
        curl_easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body)) !=
            CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS,
                         timeout_ms < 10000 ? timeout_ms : 10000L) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r) != CURLE_OK) {
        req_release(c, r);
        snprintf(why, cap, "libcurl cannot set up a request to %s", c->cfg.endpoint);
        return -1;
    }
    CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
    if (mc != CURLM_OK) {
        curl_easy_cleanup(r->easy); /* not in the multi: no removal */
        r->easy = NULL;
        req_release(c, r);
        snprintf(why, cap, "libcurl cannot start a request: %s", curl_multi_strerror(mc));
        return -1;
    }
    r->retry_after = -1;
    r->state = R_RUNNING;
    r->reply.attempts++;
    return 0;
}

typedef enum { NO_RETRY, RETRY, RETRY_ONCE } retry_kind;

/* A failed attempt: retried after a back-off while retries are left. */
static void retry_or_fail(kv_llm *c, req *r, retry_kind kind, const char *fmt, ...) KV_PRINTF(4, 5);
static void retry_or_fail(kv_llm *c, req *r, retry_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reply.error, sizeof r->reply.error, fmt, ap);
    va_end(ap);
    int retry = kind == RETRY || (kind == RETRY_ONCE && r->bad_bodies++ < KV_LLM_BAD_BODY_RETRIES);
    if (!retry || r->reply.attempts > c->cfg.max_retries) {
        if (kind != NO_RETRY) {
            size_t l = strlen(r->reply.error);
            snprintf(r->reply.error + l, sizeof r->reply.error - l, " (after %d attempts)",
                     r->reply.attempts);
        }
        finish(c, r, 0);
        return;
    }
    double delay = r->retry_after;
    if (delay < 0) {
        int k = r->reply.attempts - 1 < 16 ? r->reply.attempts - 1 : 16;
        delay = RETRY_BASE_S * (double)(1u << k);
        delay = (delay < RETRY_MAX_S ? delay : RETRY_MAX_S) * (0.75 + 0.5 * kv_rng_double(&c->rng));
    }
    req_release(c, r);
    r->state = R_WAITING;
    r->next_at = now_s() + delay;
}

/* Failures of the transfer itself worth another try: the network, the
 * server going away, a timeout. A bad URL, a refused certificate or our own
 * write callback's refusal would fail the same way again. */
static retry_kind curl_retry_kind(CURLcode res)
{
    switch (res) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return RETRY;
    case CURLE_PARTIAL_FILE: return RETRY_ONCE;
    default: return NO_RETRY;
    }
}

static void done(kv_llm *c, req *r, CURLcode res)
{
    long code = 0;
    if (res == CURLE_OK && curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
        code = 0;
    char msg[400], what[480];
    if (res != CURLE_OK) {
        snprintf(what, sizeof what, "%s%s", res == CURLE_PARTIAL_FILE ? "truncated response: " : "",
                 r->too_big ? "the response exceeds 8 MiB" : curl_easy_strerror(res));
        retry_or_fail(c, r, r->too_big ? NO_RETRY : curl_retry_kind(res), "%s", what);
        return;
    }
    if (code == 200) {
        char why[256];
        kv_llm_usage u;
        char *text = NULL;
        int rc = kv_llm_parse_response(c->cfg.api, r->resp ? r->resp : "", r->resp_len, &text, &u,
                                       why, sizeof why);
        /* an answer without usable text may still have been paid for; a
         * count the reply does not state usably is estimated, never 0 */
        if (!u.in_given)
            u.in = kv_llm_estimate_tokens(r->prompt_chars);
        if (!u.out_given)
            u.out = kv_llm_estimate_tokens(r->resp_len);
        r->reply.tokens_estimated |= !u.in_given || !u.out_given;
        /* no answer is recorded above what its request could have cost, so
         * the spending stays within what the budget reserved for it
         * (kv_llm_request_max): a claimed or estimated count beyond it is cut */
        r->reply.tokens_estimated |= kv_llm_cap_usage(&c->cfg, r->prompt_chars, &u);
        const kv_cfg_model *m = &c->cfg.models[r->model];
        r->reply.tokens_in += u.in;
        r->reply.tokens_out += u.out;
        r->reply.cost_usd = ((double)r->reply.tokens_in * m->price_in_per_mtok +
                             (double)r->reply.tokens_out * m->price_out_per_mtok) *
                            1e-6;
        if (rc == 0) {
            r->reply.text = text;
            r->reply.error[0] = 0;
            finish(c, r, 1);
            return;
        }
        retry_or_fail(c, r, RETRY_ONCE, "%s", why);
        return;
    }
    kv_llm_error_message(r->resp ? r->resp : "", r->resp_len, msg, sizeof msg);
    snprintf(what, sizeof what, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
    retry_or_fail(c, r, code == 429 || code >= 500 ? RETRY : NO_RETRY, "%s", what);
}

/* Hands libcurl one socket (or CURL_SOCKET_TIMEOUT). */
static int act(kv_llm *c, curl_socket_t fd, kv_err *err)
{
    int still = 0;
    CURLMcode mc = curl_multi_socket_action(c->multi, fd, 0, &still);
    if (mc != CURLM_OK)
        return kv_err_set(err, "libcurl: %s", curl_multi_strerror(mc));
    return 0;
}

int kv_llm_step(kv_llm *c, kv_err *err)
{
    double now = now_s();
    int slots = c->cfg.concurrency - running(c);
    for (req *r = c->reqs; r && slots > 0; r = r->next) {
        char why[256];
        if (r->state != R_WAITING || r->next_at > now)
            continue;
        if (start(c, r, why, sizeof why) != 0) {
            snprintf(r->reply.error, sizeof r->reply.error, "%s", why);
            finish(c, r, 0); /* a local failure: the next request may fare better */
            continue;
        }
        slots--;
    }
    /* the callbacks change the socket table: act on a copy */
    int n = c->n_socks;
    curl_socket_t *fds = n ? malloc(sizeof *fds * (size_t)n) : NULL;
    if (n && !fds)
        return kv_err_set(err, "out of memory");
    for (int i = 0; i < n; i++)
        fds[i] = c->socks[i].fd;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = act(c, fds[i], err);
    free(fds);
    /* libcurl's timer: also how newly added transfers begin */
    if (rc == 0 && c->timer_at >= 0 && c->timer_at <= now_s())
        rc = act(c, CURL_SOCKET_TIMEOUT, err);
    if (rc != 0)
        return -1;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        req *r = NULL;
        if (m->msg != CURLMSG_DONE ||
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r) != CURLE_OK || !r)
            continue;
        done(c, r, m->data.result);
    }
    return 0;
}

int kv_llm_take(kv_llm *c, kv_llm_reply *out)
{
    for (req **p = &c->reqs; *p; p = &(*p)->next) {
        req *r = *p;
        if (r->state != R_DONE)
            continue;
        *p = r->next;
        *out = r->reply;
        free(r->body);
        free(r);
        c->n--;
        return 0;
    }
    return KV_NOTFOUND;
}
