/* summary.c — an evaluation's typed summary, from a report or from the
 * evidence JSON kv_eval_report_json wrote (evaluator.h). */
#include "evaluator/evaluator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static void empty(kv_eval_summary *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = KV_VERDICT_OK;
    out->cell = -1;
}

int kv_eval_summary_of(const kv_eval_report *r, kv_eval_summary *out, kv_err *err)
{
    empty(out);
    out->verdict = r->verdict;
    snprintf(out->message, sizeof out->message, "%s", r->message);
    out->cell = r->classified ? r->cell : -1;
    if (r->compile.report && !(out->compile_report = strdup(r->compile.report)))
        return kv_err_set(err, "out of memory");
    return 0;
}

/* The string at key of o, or NULL when absent; -1 when present and not a string. */
static int string_at(const cJSON *o, const char *key, const char **out, kv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!cJSON_IsString(v))
        return kv_err_set(err, "evidence: \"%s\" is not a string", key);
    *out = v->valuestring;
    return 0;
}

int kv_eval_summary_decode(const char *evidence, kv_eval_summary *out, kv_err *err)
{
    empty(out);
    if (!evidence)
        return 0;
    cJSON *o = cJSON_Parse(evidence);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return kv_err_set(err, "evidence: not a JSON object");
    }
    const cJSON *compile = cJSON_GetObjectItemCaseSensitive(o, "compile");
    const char *verdict, *message, *cell, *report = NULL;
    int rc = 0;
    if (string_at(o, "verdict", &verdict, err) != 0 ||
        string_at(o, "message", &message, err) != 0 || string_at(o, "cell", &cell, err) != 0 ||
        (compile && string_at(compile, "report", &report, err) != 0))
        rc = -1;
    else if (verdict && kv_verdict_parse(verdict, &out->verdict) != 0)
        rc = kv_err_set(err, "evidence: unknown verdict \"%s\"", verdict);
    else if (cell && (out->cell = kv_cell_parse(cell)) < 0)
        rc = kv_err_set(err, "evidence: unknown cell \"%s\"", cell);
    else if (report && !(out->compile_report = strdup(report)))
        rc = kv_err_set(err, "out of memory");
    if (rc == 0 && message)
        snprintf(out->message, sizeof out->message, "%s", message);
    cJSON_Delete(o);
    if (rc != 0)
        kv_eval_summary_free(out);
    return rc;
}

void kv_eval_summary_free(kv_eval_summary *s)
{
    free(s->compile_report);
    empty(s);
}
