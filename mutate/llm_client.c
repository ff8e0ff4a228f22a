/* llm_client.c — the asynchronous chat client over libcurl's multi
 * interface (llm.h).
 *
 * Requests wait in a queue, at most cfg.concurrency transfer at once. The
 * coordinator polls the sockets libcurl reports (CURLMOPT_SOCKETFUNCTION)
 * with a timeout from libcurl's timer and from the retry back-offs, then
 * calls kv_llm_step, which drives the transfers (curl_multi_perform) and
 * decides each finished one:
 *   200 with a usable body          → the reply;
 *   429, 5xx, a timeout, a failed connection, a truncated or malformed body
 *                                   → retried after 0.5 s × 2^(k-1) × [0.75, 1.25)
 *                                     (k: the attempt), or after Retry-After
 *                                     when the server sends it (at most 10 min),
 *                                     up to cfg.max_retries retries;
 *   any other status                → failed at once with the API's message.
 * The API key is only ever put in a request header; every error text is
 * scrubbed of it before it leaves the client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "kevo/clock.h"
#include "mutate/llm.h"

#define MAX_BODY (8u << 20)
#define MAX_SOCKETS 256
#define RETRY_BASE_S 0.5
#define RETRY_AFTER_MAX_S 600.0

typedef enum { R_WAITING, R_RUNNING, R_DONE } req_state;

typedef struct req {
    uint64_t ticket;
    int model;
    char *body;
    size_t prompt_chars;
    CURL *easy;
    struct curl_slist *headers;
    char *resp;
    size_t resp_len;
    int too_big;
    double retry_after;          /* seconds from the last response's header; < 0: none */
    double t_submit, next_at;    /* monotonic seconds */
    req_state state;
    kv_llm_reply reply;
    struct req *next;
} req;

struct kv_llm {
    kv_cfg_llm cfg;
    char key[1024];
    CURLM *multi;
    kv_rng rng;
    req *reqs;                   /* submission order */
    int n;
    uint64_t next_ticket;
    struct {
        curl_socket_t fd;
        int what;
    } socks[MAX_SOCKETS];
    int n_socks;
    double timer_at;             /* < 0: no libcurl timeout pending */
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

/* Replaces every occurrence of the key in s by "***". */
static void scrub(const kv_llm *c, char *s)
{
    size_t k = strlen(c->key);
    char *p;
    while (k >= 4 && (p = strstr(s, c->key)) != NULL) {
        memcpy(p, "***", 3);
        memmove(p + 3, p + k, strlen(p + k) + 1);
    }
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
        if (c->n_socks == MAX_SOCKETS)
            return -1;
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
    c->timer_at = timeout_ms < 0 ? -1 : now_s() + timeout_ms * 1e-3;
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
    char *grown = realloc(r->resp, r->resp_len + len + 1);
    if (!grown)
        return 0;
    r->resp = grown;
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

int kv_llm_new(const kv_cfg_llm *cfg, uint64_t seed, kv_llm **out, kv_err *err)
{
    *out = NULL;
    const char *key = getenv(cfg->api_key_env);
    if (!key || !key[0])
        return kv_err_set(err, "the API key variable %s (mutator.llm.api_key_env) is not set",
                          cfg->api_key_env);
    if (cfg->n_models < 1)
        return kv_err_set(err, "mutator.llm.models: no model");
    kv_llm *c = calloc(1, sizeof *c);
    if (!c)
        return kv_err_set(err, "out of memory");
    if (strlen(key) >= sizeof c->key) {
        free(c);
        return kv_err_set(err, "the value of %s is too long for an API key", cfg->api_key_env);
    }
    c->cfg = *cfg;
    snprintf(c->key, sizeof c->key, "%s", key);
    kv_rng_seed(&c->rng, seed);
    c->next_ticket = 1;
    c->timer_at = -1;
    CURLcode gc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (gc != CURLE_OK || !(c->multi = curl_multi_init())) {
        free(c);
        return kv_err_set(err, "libcurl: %s", gc != CURLE_OK ? curl_easy_strerror(gc)
                                                             : "curl_multi_init failed");
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

static void req_release(kv_llm *c, req *r)
{
    if (r->easy) {
        curl_multi_remove_handle(c->multi, r->easy);
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
    curl_slist_free_all(r->headers);
    r->headers = NULL;
    free(r->resp);
    r->resp = NULL;
    r->resp_len = 0;
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
    memset(c->key, 0, sizeof c->key);
    free(c);
}

int kv_llm_submit(kv_llm *c, const char *system, const char *user, int model, kv_rng *rng,
                  uint64_t *ticket, kv_err *err)
{
    if (model < 0) {
        double w[KV_CFG_MAX_MODELS];
        for (int i = 0; i < c->cfg.n_models; i++)
            w[i] = c->cfg.models[i].weight;
        model = kv_rng_weighted(rng, w, c->cfg.n_models);
    }
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

double kv_llm_cost_in_flight(const kv_llm *c)
{
    double usd = 0;
    for (const req *r = c->reqs; r; r = r->next) {
        if (r->state == R_DONE)
            continue;
        const kv_cfg_model *m = &c->cfg.models[r->model];
        usd += (r->prompt_chars / 4.0 * m->price_in_per_mtok +
                (double)c->cfg.max_tokens * m->price_out_per_mtok) * 1e-6;
    }
    return usd;
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
    for (const req *r = c->reqs; r; r = r->next)
        if (r->state == R_WAITING && slots)
            next = next < 0 || r->next_at < next ? r->next_at : next;
    for (const req *r = c->reqs; r; r = r->next)
        if (r->state == R_DONE)
            next = now; /* a reply is waiting to be taken */
    if (next >= 0) {
        int ms = next <= now ? 0 : (int)((next - now) * 1e3) + 1;
        if (*timeout_ms < 0 || ms < *timeout_ms)
            *timeout_ms = ms;
    }
    return n;
}

static int start(kv_llm *c, req *r, kv_err *err)
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
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h && anthropic)
        h = curl_slist_append(h, "anthropic-version: 2023-06-01") ? h : NULL;
    struct curl_slist *h2 = h ? curl_slist_append(h, auth) : NULL;
    memset(auth, 0, sizeof auth);
    if (!h2) {
        curl_slist_free_all(h);
        return kv_err_set(err, "out of memory");
    }
    r->headers = h2;
    r->easy = curl_easy_init();
    long timeout_ms = (long)(c->cfg.timeout_s * 1e3);
    if (!r->easy ||
        curl_easy_setopt(r->easy, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body)) !=
            CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L) !=
            CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r) != CURLE_OK ||
        curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
        req_release(c, r);
        return kv_err_set(err, "libcurl: cannot set up a request to %s", c->cfg.endpoint);
    }
    r->retry_after = -1;
    r->state = R_RUNNING;
    r->reply.attempts++;
    return 0;
}

static void finish(kv_llm *c, req *r, int ok)
{
    r->reply.ok = ok;
    r->reply.wall_s = now_s() - r->t_submit;
    scrub(c, r->reply.error);
    r->state = R_DONE;
    req_release(c, r);
}

/* A failed attempt: retried after a back-off while retries are left. */
static void retry_or_fail(kv_llm *c, req *r, int retryable, const char *fmt, const char *detail)
{
    snprintf(r->reply.error, sizeof r->reply.error, fmt, detail);
    if (!retryable || r->reply.attempts > c->cfg.max_retries) {
        if (retryable) {
            size_t l = strlen(r->reply.error);
            snprintf(r->reply.error + l, sizeof r->reply.error - l, " (after %d attempts)",
                     r->reply.attempts);
        }
        finish(c, r, 0);
        return;
    }
    double delay = r->retry_after >= 0 ? r->retry_after
                                       : RETRY_BASE_S * (double)(1u << (r->reply.attempts - 1)) *
                                             (0.75 + 0.5 * kv_rng_double(&c->rng));
    req_release(c, r);
    r->state = R_WAITING;
    r->next_at = now_s() + delay;
}

static void done(kv_llm *c, req *r, CURLcode res)
{
    long code = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    char msg[400], what[480];
    if (res != CURLE_OK) {
        int retryable = !r->too_big;
        snprintf(what, sizeof what, "%s%s",
                 res == CURLE_PARTIAL_FILE ? "truncated response: " : "",
                 r->too_big ? "the response exceeds 8 MiB" : curl_easy_strerror(res));
        retry_or_fail(c, r, retryable, "request failed: %s", what);
        return;
    }
    if (code == 200) {
        char why[256];
        if (kv_llm_parse_response(c->cfg.api, r->resp ? r->resp : "", r->resp_len, &r->reply.text,
                                  &r->reply.tokens_in, &r->reply.tokens_out, why,
                                  sizeof why) == 0) {
            const kv_cfg_model *m = &c->cfg.models[r->model];
            r->reply.cost_usd = ((double)r->reply.tokens_in * m->price_in_per_mtok +
                                 (double)r->reply.tokens_out * m->price_out_per_mtok) * 1e-6;
            r->reply.error[0] = 0;
            finish(c, r, 1);
            return;
        }
        retry_or_fail(c, r, 1, "%s", why);
        return;
    }
    kv_llm_error_message(r->resp ? r->resp : "", r->resp_len, msg, sizeof msg);
    snprintf(what, sizeof what, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
    retry_or_fail(c, r, code == 429 || code >= 500, "%s", what);
}

int kv_llm_step(kv_llm *c, kv_err *err)
{
    double now = now_s();
    int slots = c->cfg.concurrency - running(c);
    for (req *r = c->reqs; r && slots > 0; r = r->next)
        if (r->state == R_WAITING && r->next_at <= now) {
            if (start(c, r, err) != 0)
                return -1;
            slots--;
        }
    int still = 0;
    CURLMcode mc = curl_multi_perform(c->multi, &still);
    if (mc != CURLM_OK)
        return kv_err_set(err, "libcurl: %s", curl_multi_strerror(mc));
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        req *r = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r)
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
