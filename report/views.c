/* views.c — grids, QD scores and the text and JSON forms of archive records
 * (views.h). Pure: no archive I/O, no printing (cli/archive_print.c prints). */
#include "common/text.h"
#include "report/views.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/sha256.h"

#ifndef KEVO_VERSION
#define KEVO_VERSION "0.0.0"
#endif

/* ---- grids -------------------------------------------------------------------- */

void kv_grid_init(kv_grid *g)
{
    memset(g, 0, sizeof *g);
    for (int i = 0; i < KV_CELL_COUNT; i++)
        g->cell[i].speedup = NAN;
}

static int better(const kv_grid_cell *c, double fitness, uint64_t id)
{
    if (!c->occupied)
        return 1;
    if (fitness != c->fitness)
        return fitness > c->fitness;
    return id < c->program_id;
}

static void offer_cell(kv_grid *g, int i, const kv_grid_cell *in)
{
    kv_grid_cell *c = &g->cell[i];
    if (better(c, in->fitness, in->program_id))
        *c = *in;
}

int kv_grid_offer(kv_grid *g, const kv_elite *e)
{
    int i = kv_cell_parse(e->cell);
    if (i < 0)
        return -1;
    kv_grid_cell in = {.occupied = 1,
                       .program_id = e->program_id,
                       .fitness = e->fitness,
                       .speedup = NAN,
                       .island = e->island};
    offer_cell(g, i, &in);
    return i;
}

void kv_grid_merge(kv_grid *dst, const kv_grid *src)
{
    for (int i = 0; i < KV_CELL_COUNT; i++)
        if (src->cell[i].occupied)
            offer_cell(dst, i, &src->cell[i]);
}

void kv_grid_set_program(kv_grid *g, const kv_program *p)
{
    for (int i = 0; i < KV_CELL_COUNT; i++)
        if (g->cell[i].occupied && g->cell[i].program_id == p->id) {
            g->cell[i].speedup = p->speedup;
            g->cell[i].reference = strcmp(p->op, KV_OP_REFERENCE) == 0;
        }
}

int kv_grid_coverage(const kv_grid *g)
{
    int n = 0;
    for (int i = 0; i < KV_CELL_COUNT; i++)
        n += g->cell[i].occupied != 0;
    return n;
}

double kv_grid_qd_score(const kv_grid *g)
{
    double sum = 0;
    for (int i = 0; i < KV_CELL_COUNT; i++)
        if (g->cell[i].occupied)
            sum += g->cell[i].fitness;
    return sum;
}

cJSON *kv_grid_to_json(const kv_grid *g, int with_island)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    for (int i = 0; i < KV_CELL_COUNT; i++) {
        char name[KV_CELL_NAME_MAX];
        kv_cell_name(i, name);
        const kv_grid_cell *c = &g->cell[i];
        if (!c->occupied) {
            if (!cJSON_AddNullToObject(o, name))
                goto oom;
            continue;
        }
        cJSON *v = cJSON_AddObjectToObject(o, name);
        if (!v || !cJSON_AddNumberToObject(v, "program", (double)c->program_id) ||
            !cJSON_AddNumberToObject(v, "speedup", isnan(c->speedup) ? c->fitness : c->speedup) ||
            !cJSON_AddNumberToObject(v, "fitness", c->fitness) ||
            (with_island && !cJSON_AddNumberToObject(v, "island", c->island)) ||
            (c->reference && !cJSON_AddTrueToObject(v, "reference")))
            goto oom;
    }
    return o;
oom:
    cJSON_Delete(o);
    return NULL;
}

/* ---- numbers and text ------------------------------------------------------------ */

void kv_fmt_speedup(double s, char *out, size_t cap)
{
    if (!(s > 0))
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%.2fx", s);
}

void kv_fmt_double(double v, char *out, size_t cap)
{
    if (isnan(v) || isinf(v)) {
        snprintf(out, cap, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

void kv_fmt_time(int64_t ns, char *out, size_t cap)
{
    if (ns == 0) {
        snprintf(out, cap, "-");
        return;
    }
    kv_format_utc(ns, out, (unsigned)cap);
    if (!out[0])
        snprintf(out, cap, "%" PRId64 "ns", ns);
}

void kv_first_line(const char *s, char *out, size_t cap)
{
    if (cap == 0)
        return;
    size_t n = 0;
    if (s) {
        n = strcspn(s, "\r\n");
        if (n >= cap)
            n = cap - 1;
        memcpy(out, s, n);
    }
    out[n] = 0;
}

void kv_fmt_parents(const kv_program *p, const char *sep, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < p->n_parents && i < KV_MAX_PARENTS && used < cap; i++) {
        int n = snprintf(out + used, cap - used, "%s%" PRIu64, i ? sep : "", p->parents[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void kv_program_summary(const kv_program *p, char *out, size_t cap)
{
    char sp[32];
    kv_fmt_speedup(p->verdict == KV_VERDICT_OK ? p->speedup : 0, sp, sizeof sp);
    snprintf(out, cap, "#%" PRIu64 "  %s  %s  %s  %s", p->id, p->op[0] ? p->op : "-",
             kv_verdict_name(p->verdict), sp, p->cell[0] ? p->cell : "-");
}

/* ---- program export --------------------------------------------------------------- */

/* "// label value", continuing a multi-line value on further comment lines. */
static void comment_value(FILE *out, const char *label, const char *text)
{
    fprintf(out, "// %-11s ", label);
    char shown[4096];
    kv_text_for_terminal(text, shown, sizeof shown, KV_TEXT_MULTI_LINE);
    for (const char *s = shown; *s; s++) {
        if (*s == '\r')
            continue;
        if (*s == '\n') {
            if (s[1])
                fprintf(out, "\n// %-11s ", "");
            continue;
        }
        fputc(*s, out);
    }
    fputc('\n', out);
}

static void comment_sizes(FILE *out, const kv_program *p)
{
    if (p->n_sizes == 0) {
        comment_value(out, "sizes:", "none recorded");
        return;
    }
    fprintf(out, "// sizes:      %-16s %14s %14s %9s\n", "name", "reference", "kevo", "speedup");
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++) {
        const kv_size_result *s = &p->sizes[i];
        char sp[32];
        kv_fmt_speedup(s->ok && s->cand_us > 0 ? s->ref_us / s->cand_us : 0, sp, sizeof sp);
        fprintf(out, "//             %-16s %11.3f us %11.3f us %9s%s\n", s->name, s->ref_us,
                s->cand_us, sp, s->ok ? "" : "  (failed)");
    }
}

char *kv_export_header(const kv_program *p, const char *exported_utc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return NULL;
    char text[256], sp[32];
    char problem[4 * KV_NAME_MAX];
    fprintf(out, "// kevo program #%" PRIu64 " of problem %s\n//\n", p->id,
            KV_TERM(problem, p->problem));
    comment_value(out, "problem:", p->problem);
    snprintf(text, sizeof text, "#%" PRIu64 " (island %d)", p->id, (int)p->island);
    comment_value(out, "program:", text);
    kv_fmt_speedup(p->speedup, sp, sizeof sp);
    snprintf(text, sizeof text, "%s (geometric mean over %u size%s; verdict %s)", sp, p->n_sizes,
             p->n_sizes == 1 ? "" : "s", kv_verdict_name(p->verdict));
    comment_value(out, "speedup:", text);
    comment_sizes(out, p);
    if (p->roofline > 0) {
        snprintf(text, sizeof text, "%.1f%% of the roofline (mean)", 100 * p->roofline);
        comment_value(out, "roofline:", text);
    }
    comment_value(out, "cell:", p->cell[0] ? p->cell : "unclassified");
    comment_value(out, "evidence:", p->evidence && p->evidence[0] ? p->evidence : "none");
    comment_value(out, "operator:", p->op[0] ? p->op : "-");
    comment_value(out, "model:", p->model[0] ? p->model : "-");
    char parents[KV_MAX_PARENTS * 24];
    kv_fmt_parents(p, ", #", parents, sizeof parents);
    snprintf(text, sizeof text, "%s%s", p->n_parents ? "#" : "", p->n_parents ? parents : "none");
    comment_value(out, "parents:", text);
    kv_fmt_time(p->created_ns, text, sizeof text);
    comment_value(out, "created:", text);
    kv_fmt_time(p->evaluated_ns, text, sizeof text);
    comment_value(out, "evaluated:", text);
    fprintf(out, "//\n// exported by kevo %s %s\n", KEVO_VERSION, exported_utc);
    if (fclose(out) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static cJSON *sizes_to_json(const kv_program *p)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++) {
        const kv_size_result *s = &p->sizes[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o) || !cJSON_AddStringToObject(o, "name", s->name) ||
            !cJSON_AddNumberToObject(o, "ref_us", s->ref_us) ||
            !cJSON_AddNumberToObject(o, "cand_us", s->cand_us) ||
            !cJSON_AddNumberToObject(o, "cand_p10_us", s->cand_p10_us) ||
            !cJSON_AddNumberToObject(o, "cand_p90_us", s->cand_p90_us) ||
            !cJSON_AddNumberToObject(o, "roofline_us", s->roofline_us) ||
            !cJSON_AddBoolToObject(o, "ok", s->ok != 0) ||
            !cJSON_AddStringToObject(o, "timing", kv_size_timing_name(s->timing))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* A time as UTC text, or null when unset. */
static int add_time(cJSON *o, const char *name, int64_t ns)
{
    if (ns == 0)
        return cJSON_AddNullToObject(o, name) != NULL;
    char text[64];
    kv_fmt_time(ns, text, sizeof text);
    return cJSON_AddStringToObject(o, name, text) != NULL;
}

/* An exact 64-bit integer (a double would round nanoseconds). */
static int add_i64(cJSON *o, const char *name, int64_t v)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRId64, v);
    return cJSON_AddRawToObject(o, name, text) != NULL;
}

static int add_evidence(cJSON *o, const char *evidence)
{
    if (!evidence)
        return cJSON_AddNullToObject(o, "evidence") != NULL;
    cJSON *v = cJSON_Parse(evidence); /* stored as JSON text; kept verbatim if it is not */
    if (!v)
        v = cJSON_CreateString(evidence);
    return v && cJSON_AddItemToObject(o, "evidence", v);
}

cJSON *kv_program_to_json(const kv_program *p, const char *src)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *parents = cJSON_CreateArray();
    cJSON *sizes = sizes_to_json(p);
    char hex[KV_SHA256_HEX_LEN];
    kv_sha256_hex(p->source_hash, hex);
    if (!o || !parents || !sizes)
        goto oom;
    for (uint32_t i = 0; i < p->n_parents && i < KV_MAX_PARENTS; i++) {
        cJSON *n = cJSON_CreateNumber((double)p->parents[i]);
        if (!n || !cJSON_AddItemToArray(parents, n)) {
            cJSON_Delete(n);
            goto oom;
        }
    }
    int ok = cJSON_AddNumberToObject(o, "id", (double)p->id) &&
             cJSON_AddStringToObject(o, "problem", p->problem) &&
             cJSON_AddItemToObject(o, "parents", parents);
    parents = ok ? NULL : parents;
    ok = ok && cJSON_AddNumberToObject(o, "island", p->island) &&
         cJSON_AddStringToObject(o, "op", p->op) && cJSON_AddStringToObject(o, "model", p->model) &&
         cJSON_AddStringToObject(o, "verdict", kv_verdict_name(p->verdict)) &&
         cJSON_AddNumberToObject(o, "speedup", p->speedup) &&
         cJSON_AddNumberToObject(o, "roofline", p->roofline) &&
         (p->cell[0] ? cJSON_AddStringToObject(o, "cell", p->cell) != NULL
                     : cJSON_AddNullToObject(o, "cell") != NULL) &&
         add_time(o, "created", p->created_ns) && add_i64(o, "created_ns", p->created_ns) &&
         add_time(o, "evaluated", p->evaluated_ns) && add_i64(o, "evaluated_ns", p->evaluated_ns) &&
         cJSON_AddItemToObject(o, "sizes", sizes);
    sizes = ok ? NULL : sizes;
    ok = ok && add_evidence(o, p->evidence) && cJSON_AddStringToObject(o, "source_hash", hex) &&
         cJSON_AddNumberToObject(o, "source_len", p->source_len) &&
         (!src || cJSON_AddStringToObject(o, "source", src));
    if (!ok)
        goto oom;
    return o;
oom:
    cJSON_Delete(o);
    cJSON_Delete(parents);
    cJSON_Delete(sizes);
    return NULL;
}

/* ---- attempts --------------------------------------------------------------------- */

static int add_id(cJSON *o, const char *name, uint64_t id)
{
    if (id == 0)
        return cJSON_AddNullToObject(o, name) != NULL;
    return cJSON_AddNumberToObject(o, name, (double)id) != NULL;
}

cJSON *kv_attempt_to_json(const kv_attempt *a)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok =
        cJSON_AddNumberToObject(o, "seq", (double)a->seq) && add_time(o, "time", a->time_ns) &&
        add_i64(o, "time_ns", a->time_ns) && cJSON_AddStringToObject(o, "problem", a->problem) &&
        cJSON_AddNumberToObject(o, "island", a->island) &&
        cJSON_AddStringToObject(o, "stage", kv_stage_name(a->stage)) &&
        cJSON_AddStringToObject(o, "verdict", kv_verdict_name(a->verdict)) &&
        add_id(o, "program", a->program_id) && add_id(o, "parent", a->parent_id) &&
        cJSON_AddStringToObject(o, "op", a->op) && cJSON_AddStringToObject(o, "model", a->model) &&
        cJSON_AddNumberToObject(o, "speedup", a->speedup) &&
        cJSON_AddNumberToObject(o, "wall_s", a->wall_s) &&
        cJSON_AddNumberToObject(o, "gpu_s", a->gpu_s) &&
        cJSON_AddNumberToObject(o, "tokens_in", (double)a->tokens_in) &&
        cJSON_AddNumberToObject(o, "tokens_out", (double)a->tokens_out) &&
        cJSON_AddNumberToObject(o, "cost_usd", a->cost_usd) &&
        (a->detail ? cJSON_AddStringToObject(o, "detail", a->detail) != NULL
                   : cJSON_AddNullToObject(o, "detail") != NULL);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
