/* export_rows.c — kevo archive export's per-size rows as CSV or JSON lines
 * (export_rows.h); the rows' values are report/rows.c's. */
#include "export_rows.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "archive_cmd.h"
#include "archive_print.h"
#include "common/json_out.h"
#include "common/text.h"

enum { COL_TEXT, COL_NUM, COL_BOOL, COL_INT };

static const char *const columns[] = {
    "id",     "problem", "size",  "cand_us", "cand_p10_us", "cand_p90_us", "cand_cv",
    "ref_us", "speedup", "gbps",  "cell",    "elite",       "verdict",     "op",
    "island", "parents", "model", "ok",      "timing",
};
#define N_COLUMNS (sizeof columns / sizeof columns[0])

void kv_export_rows_csv_header(FILE *out, int with_source)
{
    for (size_t i = 0; i < N_COLUMNS; i++)
        fprintf(out, "%s%s", i ? "," : "", columns[i]);
    fputs(with_source ? ",source_encoding,source\n" : "\n", out);
}

/* A number's text: the shortest that reads back exactly; "" when NaN. */
static void num_text(double v, char *out, size_t cap)
{
    if (isnan(v))
        out[0] = 0;
    else
        kv_fmt_double(v, out, cap);
}

static int write_csv(FILE *out, const kv_program *p, const kv_report_row *w, const char *src)
{
    const kv_size_result *s = w->size;
    double nums[] = {s ? s->cand_us : NAN,
                     s ? s->cand_p10_us : NAN,
                     s ? s->cand_p90_us : NAN,
                     w->cv,
                     s ? s->ref_us : NAN,
                     w->speedup,
                     w->gbps};
    char parents[KV_MAX_PARENTS * 24], num[40];
    kv_fmt_parents(p, ";", parents, sizeof parents);
    int rc = 0;
    fprintf(out, "%" PRIu64 ",", p->id);
    rc |= kv_csv_field(out, p->problem);
    fputc(',', out);
    rc |= kv_csv_field(out, s ? s->name : "");
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        num_text(nums[i], num, sizeof num);
        fprintf(out, ",%s", num);
    }
    fputc(',', out);
    rc |= kv_csv_field(out, p->cell);
    fprintf(out, ",%s,%s,", w->elite ? "true" : "false", kv_verdict_name(p->verdict));
    rc |= kv_csv_field(out, p->op);
    fprintf(out, ",%d,%s,", (int)p->island, parents);
    rc |= kv_csv_field(out, p->model);
    fprintf(out, ",%s,%s", s ? (s->ok ? "true" : "false") : "",
            s ? kv_size_timing_name(s->timing) : "");
    if (src) {
        fputc(',', out);
        rc |= kv_csv_source(out, src);
    }
    fputc('\n', out);
    return rc;
}

static int add_num(cJSON *o, const char *name, double v)
{
    return (isnan(v) ? cJSON_AddNullToObject(o, name) : cJSON_AddNumberToObject(o, name, v)) !=
           NULL;
}

static int write_json(FILE *out, const kv_program *p, const kv_report_row *w, const char *src,
                      size_t *replaced)
{
    const kv_size_result *s = w->size;
    cJSON *o = cJSON_CreateObject();
    cJSON *parents = cJSON_CreateArray();
    int ok = o && parents;
    for (uint32_t i = 0; ok && i < p->n_parents && i < KV_MAX_PARENTS; i++)
        ok = cJSON_AddItemToArray(parents, cJSON_CreateNumber((double)p->parents[i]));
    ok = ok && cJSON_AddNumberToObject(o, "id", (double)p->id) &&
         cJSON_AddStringToObject(o, "problem", p->problem) &&
         (s ? cJSON_AddStringToObject(o, "size", s->name) != NULL
            : cJSON_AddNullToObject(o, "size") != NULL) &&
         add_num(o, "cand_us", s ? s->cand_us : NAN) &&
         add_num(o, "cand_p10_us", s ? s->cand_p10_us : NAN) &&
         add_num(o, "cand_p90_us", s ? s->cand_p90_us : NAN) && add_num(o, "cand_cv", w->cv) &&
         add_num(o, "ref_us", s ? s->ref_us : NAN) && add_num(o, "speedup", w->speedup) &&
         add_num(o, "gbps", w->gbps) &&
         (p->cell[0] ? cJSON_AddStringToObject(o, "cell", p->cell) != NULL
                     : cJSON_AddNullToObject(o, "cell") != NULL) &&
         cJSON_AddBoolToObject(o, "elite", w->elite) &&
         cJSON_AddStringToObject(o, "verdict", kv_verdict_name(p->verdict)) &&
         cJSON_AddStringToObject(o, "op", p->op) &&
         cJSON_AddNumberToObject(o, "island", p->island) &&
         cJSON_AddItemToObject(o, "parents", parents);
    if (ok)
        parents = NULL;
    ok = ok && cJSON_AddStringToObject(o, "model", p->model) &&
         (s ? cJSON_AddBoolToObject(o, "ok", s->ok != 0) != NULL
            : cJSON_AddNullToObject(o, "ok") != NULL) &&
         (s ? cJSON_AddStringToObject(o, "timing", kv_size_timing_name(s->timing)) != NULL
            : cJSON_AddNullToObject(o, "timing") != NULL) &&
         (!src || cJSON_AddStringToObject(o, "source", src));
    size_t bad = 0;
    char *text = ok ? kv_json_print(o, 0, &bad) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(parents);
    if (!text)
        return -1;
    *replaced += bad;
    fprintf(out, "%s\n", text);
    free(text);
    return 0;
}

int kv_export_rows_write(FILE *out, int csv, const kv_program *p, const kv_report_row *rows,
                         size_t n, const char *src, kv_err *err)
{
    size_t replaced = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = csv ? write_csv(out, p, &rows[i], src) : write_json(out, p, &rows[i], src, &replaced);
    if (replaced)
        fprintf(stderr,
                "kevo archive export: program #%" PRIu64 ": %zu bytes that were not "
                "UTF-8 written as U+FFFD\n",
                p->id, replaced);
    return rc == 0 ? 0 : kv_err_set(err, "out of memory");
}
