/* llm.h — the LLM mutator's client: chat requests to an OpenAI-compatible
 * `/chat/completions` or Anthropic `/messages` endpoint over libcurl's multi
 * interface, driven by the coordinator's poll() loop (never blocking), with
 * a concurrency limit, per-request timeouts, retries with exponential
 * back-off and jitter that honour Retry-After, and token and cost
 * accounting. The API key is read from the environment variable the
 * configuration names and never appears in errors, logs or replies. */
#ifndef KEVO_MUTATE_LLM_H
#define KEVO_MUTATE_LLM_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "common/names.h"
#include "mutate/llm_config.h"
#include "common/err.h"
#include "common/rng.h"

typedef struct kv_llm kv_llm;

typedef struct {
    uint64_t ticket;
    int ok;                          /* 1: text holds the model's reply */
    char model[KV_CFG_NAME_MAX * 2]; /* as configured */
    char *text;                      /* owned; NULL unless ok */
    char error[512]; /* why not ok (HTTP status and the API's message, timeout, ...) */
    uint64_t tokens_in, tokens_out; /* summed over the attempts answered with 200 */
    int tokens_estimated;           /* 1: some count was not in the reply's usage, or not a
                                 * whole number in [0, KV_LLM_TOKENS_MAX]: estimated
                                 * (kv_llm_estimate_tokens) from the characters sent
                                 * (prompt) and received (the response body); or
                                 * capped at what the request could cost
                                 * (kv_llm_cap_usage) */
    double cost_usd;                /* the tokens at the model's prices (also when not ok) */
    double wall_s;                  /* from submission to the last answer, retries included */
    int attempts;                   /* HTTP requests made */
} kv_llm_reply;

void kv_llm_reply_free(kv_llm_reply *r);

/* What kv_llm_new would refuse in cfg, before anything is started: an unset,
 * empty or overlong key variable (the error names the variable), no model,
 * no concurrency. */
int kv_llm_check(const kv_cfg_llm *cfg, kv_err *err);
/* kv_llm_check, then the key is taken out of the environment: kevo keeps it
 * and erases the variable (its bytes too, which /proc/<pid>/environ would
 * show), so that no child can see it; kv_llm_check and kv_llm_new use the
 * kept key while the variable stays unset. kevo run calls it first thing. */
int kv_llm_take_key(const kv_cfg_llm *cfg, kv_err *err);
/* A client for cfg (copied); kv_llm_check's errors, or libcurl's. seed: the
 * back-off jitter's random state. */
int kv_llm_new(const kv_cfg_llm *cfg, uint64_t seed, kv_llm **out, kv_err *err);
void kv_llm_free(kv_llm *c); /* abandons what is in flight */

/* Queues a request (system and user are copied into its body); model < 0:
 * drawn by the models' weights with rng. Nothing is sent before kv_llm_step. */
int kv_llm_submit(kv_llm *c, const char *system, const char *user, int model, kv_rng *rng,
                  uint64_t *ticket, kv_err *err);
/* Submitted and not yet taken. */
int kv_llm_in_flight(const kv_llm *c);
/* The most the requests in flight can still cost, in tokens and USD (each as
 * kv_llm_request_max): budgets count it. */
void kv_llm_max_in_flight(const kv_llm *c, uint64_t *tokens, double *usd);
/* The model of the next request: drawn by the models' weights with rng. */
int kv_llm_draw_model(const kv_llm *c, kv_rng *rng);
/* The descriptors to poll (at most cap; their number is returned) and the
 * time until the client needs a step: *timeout_ms is lowered to it, never
 * raised (-1 in *timeout_ms: no limit of the caller's). */
int kv_llm_pollfds(kv_llm *c, struct pollfd *fds, int cap, int *timeout_ms);
/* After poll returns (an fd ready or the timeout): starts queued requests,
 * drives the transfers (curl_multi_socket_action), decides finished ones and
 * schedules retries. -1 only when libcurl's multi handle fails; a request
 * that cannot be set up finishes not ok instead. */
int kv_llm_step(kv_llm *c, kv_err *err);
/* A finished reply (0), or KV_NOTFOUND. */
int kv_llm_take(kv_llm *c, kv_llm_reply *out);

/* llm_api.c: the two APIs' JSON, without a network. */
/* The request body for a model (malloc'ed). */
char *kv_llm_request_body(const kv_cfg_llm *cfg, int model, const char *system, const char *user);
/* The largest token count taken from a reply's usage, per count: a request
 * of up to 200,000 completion tokens and a 2 MB prompt stays far below it. */
#define KV_LLM_TOKENS_MAX 100000000u
typedef struct {
    uint64_t in, out;
    int in_given, out_given; /* 0: absent or not a whole number in [0, KV_LLM_TOKENS_MAX] */
} kv_llm_usage;
/* Parses a 200 response: 0 with *text (malloc'ed), or -1 with why; the
 * usage counts the response states (also when -1). */
int kv_llm_parse_response(kv_llm_api api, const char *body, size_t len, char **text,
                          kv_llm_usage *usage, char *why, size_t cap);
/* Tokens estimated from characters: ceil(chars / 4). */
uint64_t kv_llm_estimate_tokens(size_t chars);
/* Attempts answered with 200 are paid for, and a broken answer is retried
 * once: a request is paid for at most 1 + KV_LLM_BAD_BODY_RETRIES times. */
#define KV_LLM_BAD_BODY_RETRIES 1
/* Caps one answer's counts (stated or estimated) at what its request could
 * have cost: the prompt's estimate in, max_tokens out; 1 when one was cut. */
int kv_llm_cap_usage(const kv_cfg_llm *cfg, size_t prompt_chars, kv_llm_usage *usage);
/* The most one request of prompt_chars characters to a model can cost: the
 * prompt's estimate plus max_tokens for every attempt that can be paid for,
 * in tokens and at the model's prices. */
void kv_llm_request_max(const kv_cfg_llm *cfg, int model, size_t prompt_chars, uint64_t *tokens,
                        double *usd);
/* The API's own error message from an error response (error.message or
 * error), else the start of a body that is not JSON, or "" (into out). */
void kv_llm_error_message(const char *body, size_t len, char *out, size_t cap);

#endif
