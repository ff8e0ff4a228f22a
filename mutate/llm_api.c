/* llm_api.c — the request and response JSON of the two chat APIs (llm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json_out.h"
#include "mutate/llm.h"

static cJSON *message(const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    if (m && (!cJSON_AddStringToObject(m, "role", role) ||
              !cJSON_AddStringToObject(m, "content", content))) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

char *kv_llm_request_body(const kv_cfg_llm *cfg, int model, const char *system, const char *user)
{
    cJSON *o = cJSON_CreateObject(), *msgs = NULL;
    int bad = !o || !cJSON_AddStringToObject(o, "model", cfg->models[model].name) ||
              !cJSON_AddNumberToObject(o, "max_tokens", cfg->max_tokens) ||
              !cJSON_AddNumberToObject(o, "temperature", cfg->temperature) ||
              !(msgs = cJSON_AddArrayToObject(o, "messages"));
    if (!bad && cfg->api == KV_LLM_API_ANTHROPIC) {
        bad = !cJSON_AddStringToObject(o, "system", system) ||
              !cJSON_AddItemToArray(msgs, message("user", user));
    } else if (!bad) {
        bad = !cJSON_AddItemToArray(msgs, message("system", system)) ||
              !cJSON_AddItemToArray(msgs, message("user", user));
    }
    char *body = bad ? NULL : kv_json_print(o, 0, NULL);
    cJSON_Delete(o);
    return body;
}

/* A token count as the reply states it: 1 with *n when it is a whole
 * number in [0, KV_LLM_TOKENS_MAX]; 0 for anything else (missing, negative,
 * fractional, a string, 1e30, 2^64-1, an infinity), which is never cast. */
static int count_of(const cJSON *usage, const char *key, uint64_t *n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, key);
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble; /* NaN fails every comparison below */
    if (!(d >= 0 && d <= (double)KV_LLM_TOKENS_MAX) || d != floor(d))
        return 0;
    *n = (uint64_t)d;
    return 1;
}

int kv_llm_parse_response(kv_llm_api api, const char *body, size_t len, char **text,
                          kv_llm_usage *usage_out, char *why, size_t cap)
{
    *text = NULL;
    memset(usage_out, 0, sizeof *usage_out);
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!o) {
        snprintf(why, cap, "the response is not JSON (%zu bytes)", len);
        return -1;
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
    char *out = NULL;
    if (api == KV_LLM_API_ANTHROPIC) {
        usage_out->in_given = count_of(usage, "input_tokens", &usage_out->in);
        usage_out->out_given = count_of(usage, "output_tokens", &usage_out->out);
        /* the text blocks of content[], concatenated */
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content"), *b;
        size_t n = 0;
        cJSON_ArrayForEach(b, content)
        {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 ||
                !cJSON_IsString(t))
                continue;
            size_t l = strlen(t->valuestring);
            char *grown = realloc(out, n + l + 1);
            if (!grown) {
                free(out);
                cJSON_Delete(o);
                snprintf(why, cap, "out of memory");
                return -1;
            }
            out = grown;
            memcpy(out + n, t->valuestring, l + 1);
            n += l;
        }
    } else {
        usage_out->in_given = count_of(usage, "prompt_tokens", &usage_out->in);
        usage_out->out_given = count_of(usage, "completion_tokens", &usage_out->out);
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
        const cJSON *msg =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(choices, 0), "message");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (cJSON_IsString(c))
            out = strdup(c->valuestring);
    }
    cJSON_Delete(o);
    if (!out || !out[0]) {
        free(out);
        snprintf(why, cap, "the response has no reply text (%s)",
                 api == KV_LLM_API_ANTHROPIC ? "no text block in content"
                                             : "no choices[0].message.content");
        return -1;
    }
    *text = out;
    return 0;
}

void kv_llm_error_message(const char *body, size_t len, char *out, size_t cap)
{
    out[0] = 0;
    cJSON *o = cJSON_ParseWithLength(body, len);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *m = cJSON_IsString(e) ? e : cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(m))
        snprintf(out, cap, "%.300s", m->valuestring);
    cJSON_Delete(o);
    if (out[0] || o || cap < 2)
        return;
    /* not JSON (a proxy's HTML page, say): its start, on one line */
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap && n < 200; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch < 0x20 || ch == 0x7f)
            ch = ' ';
        if (ch == ' ' && (n == 0 || out[n - 1] == ' '))
            continue;
        out[n++] = (char)ch;
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = 0;
}

uint64_t kv_llm_estimate_tokens(size_t chars)
{
    return (uint64_t)(chars / 4 + (chars % 4 != 0));
}

int kv_llm_cap_usage(const kv_cfg_llm *cfg, size_t prompt_chars, kv_llm_usage *usage)
{
    uint64_t in = kv_llm_estimate_tokens(prompt_chars), out = (uint64_t)cfg->max_tokens;
    int cut = usage->in > in || usage->out > out;
    if (usage->in > in)
        usage->in = in;
    if (usage->out > out)
        usage->out = out;
    return cut;
}

void kv_llm_request_max(const kv_cfg_llm *cfg, int model, size_t prompt_chars, uint64_t *tokens,
                        double *usd)
{
    const kv_cfg_model *m = &cfg->models[model];
    const uint64_t tries = 1 + KV_LLM_BAD_BODY_RETRIES;
    uint64_t in = tries * kv_llm_estimate_tokens(prompt_chars);
    uint64_t out = tries * (uint64_t)cfg->max_tokens;
    *tokens = in + out;
    *usd = ((double)in * m->price_in_per_mtok + (double)out * m->price_out_per_mtok) * 1e-6;
}
