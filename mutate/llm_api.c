/* llm_api.c — the request and response JSON of the two chat APIs (llm.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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
    char *body = bad ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return body;
}

static uint64_t count_of(const cJSON *usage, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

int kv_llm_parse_response(kv_llm_api api, const char *body, size_t len, char **text,
                          uint64_t *tokens_in, uint64_t *tokens_out, char *why, size_t cap)
{
    *text = NULL;
    *tokens_in = *tokens_out = 0;
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!o) {
        snprintf(why, cap, "the response is not JSON (%zu bytes)", len);
        return -1;
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
    char *out = NULL;
    if (api == KV_LLM_API_ANTHROPIC) {
        *tokens_in = count_of(usage, "input_tokens");
        *tokens_out = count_of(usage, "output_tokens");
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
        *tokens_in = count_of(usage, "prompt_tokens");
        *tokens_out = count_of(usage, "completion_tokens");
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(choices, 0),
                                                            "message");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (cJSON_IsString(c))
            out = strdup(c->valuestring);
    }
    cJSON_Delete(o);
    if (!out || !out[0]) {
        free(out);
        snprintf(why, cap, "the response has no reply text (%s)",
                 api == KV_LLM_API_ANTHROPIC ? "no text block in content" : "no choices[0].message.content");
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
