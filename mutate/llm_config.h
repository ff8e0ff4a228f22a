/* llm_config.h — the LLM mutator's settings, as the run configuration's
 * "llm" section holds them (search/config.h embeds this struct; the search's
 * schema table reads it). Defined here, by their user, so that mutate/ needs
 * nothing from search/. The name and text limits are the configuration's
 * too. */
#ifndef KEVO_MUTATE_LLM_CONFIG_H
#define KEVO_MUTATE_LLM_CONFIG_H

#define KV_CFG_NAME_MAX 64
#define KV_CFG_TEXT_MAX 512
#define KV_CFG_MAX_MODELS 8

typedef enum { KV_LLM_API_OPENAI = 0, KV_LLM_API_ANTHROPIC = 1 } kv_llm_api;

typedef struct {
    char name[KV_CFG_NAME_MAX * 2]; /* model id sent to the endpoint */
    double weight;                  /* relative sampling weight (> 0) */
    double price_in_per_mtok;       /* USD per million prompt tokens */
    double price_out_per_mtok;      /* USD per million completion tokens */
} kv_cfg_model;

typedef struct {
    kv_llm_api api;                    /* "openai" (chat completions) or "anthropic" (messages) */
    char endpoint[KV_CFG_TEXT_MAX];    /* base URL, e.g. https://api.openai.com/v1 */
    char api_key_env[KV_CFG_NAME_MAX]; /* name of the environment variable holding the key */
    int n_models;
    kv_cfg_model models[KV_CFG_MAX_MODELS];
    int concurrency; /* requests in flight */
    double temperature;
    int max_tokens;   /* completion tokens per request */
    double timeout_s; /* per request */
    int max_retries;
    int prompt_budget_chars; /* size budget of one prompt */
} kv_cfg_llm;

#endif
