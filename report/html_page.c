/* html_page.c — the report's page: its skeleton and CSS, the one escaping
 * function, the speedup colour scale, and kv_report_write (html.h). */
#include "html.h"
#include "html_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/machine.h"
#include "common/text.h"
#include "report/snapshot.h"

/* ---- escaping -------------------------------------------------------------------- */

void kv_html_text(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0; /* bytes [run, i) are copied as they are */
    while (i < n) {
        unsigned char c = p[i];
        const char *rep = NULL;
        char esc[16];
        size_t len = 1;
        if (c < 0x80) {
            switch (c) {
            case '&': rep = "&amp;"; break;
            case '<': rep = "&lt;"; break;
            case '>': rep = "&gt;"; break;
            case '"': rep = "&quot;"; break;
            case '\'': rep = "&#39;"; break;
            case '\n':
            case '\t': break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    snprintf(esc, sizeof esc, "\\x%02x", c);
                    rep = esc;
                }
            }
        } else {
            uint32_t cp;
            len = kv_utf8_seq(p + i, n - i, &cp);
            if (len == 0) {
                rep = "\xEF\xBF\xBD"; /* U+FFFD */
                len = 1;
            } else if (cp >= 0x80 && cp <= 0x9f) {
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
                rep = esc;
            }
        }
        if (rep) {
            fwrite(p + run, 1, i - run, f);
            fputs(rep, f);
            run = i + len;
        }
        i += len;
    }
    fwrite(p + run, 1, n - run, f);
}

void kv_html_str(FILE *f, const char *s)
{
    if (s)
        kv_html_text(f, s, strlen(s));
}

/* ---- the speedup scale ------------------------------------------------------------- */

static const struct {
    double from;
    const char *cls, *label;
} scale[] = {
    {0, "s0", "&lt; 0.9x"},        {0.9, "s1", "0.9&#8211;1.1x"}, {1.1, "s2", "1.1&#8211;1.3x"},
    {1.3, "s3", "1.3&#8211;1.6x"}, {1.6, "s4", "1.6&#8211;2x"},   {2.0, "s5", "&#8805; 2x"},
};
#define N_SCALE (sizeof scale / sizeof scale[0])

const char *kv_rp_speedup_class(double s)
{
    if (!(s > 0))
        return "sn";
    const char *c = scale[0].cls;
    for (size_t i = 0; i < N_SCALE; i++)
        if (s >= scale[i].from)
            c = scale[i].cls;
    return c;
}

void kv_rp_speedup_legend(FILE *f)
{
    fputs("<p class=\"legend\">speedup over NCCL:", f);
    for (size_t i = 0; i < N_SCALE; i++)
        fprintf(f, " <span class=\"%s\">%s</span>", scale[i].cls, scale[i].label);
    fputs(" <span class=\"sn\">empty</span></p>\n", f);
}

/* ---- id sets ----------------------------------------------------------------------- */

int kv_rp_ids_add(kv_rp_ids *s, uint64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void kv_rp_ids_sort(kv_rp_ids *s)
{
    if (s->n == 0)
        return;
    qsort(s->v, s->n, sizeof *s->v, cmp_u64);
    size_t k = 1;
    for (size_t i = 1; i < s->n; i++)
        if (s->v[i] != s->v[k - 1])
            s->v[k++] = s->v[i];
    s->n = k;
}

int kv_rp_ids_has(const kv_rp_ids *s, uint64_t id)
{
    return s->n && bsearch(&id, s->v, s->n, sizeof id, cmp_u64) != NULL;
}

/* ---- the page ---------------------------------------------------------------------- */

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222;background:#fff}"
    "h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}"
    "h3{font-size:1.05em}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}"
    "pre{background:#f8f8f8;border:1px solid #ddd;padding:6px;overflow-x:auto;font-size:12px}"
    "nav a{margin-right:1em}.grids{display:flex;flex-wrap:wrap;gap:1.5em}"
    ".grid td{width:8em;text-align:center}.legend span{padding:1px 6px;margin-left:4px}"
    ".s0{background:#f4a6a6}.s1{background:#eeeeee}.s2{background:#d4ecc4}"
    ".s3{background:#a9d98c}.s4{background:#6fbf4a}.s5{background:#3a8f1c;color:#fff}"
    ".s5 a{color:#fff}.sn{background:#fafafa;color:#999}"
    ".add{color:#116611}.del{color:#aa1111}ul.tree{list-style:none;padding-left:1.2em;"
    "border-left:1px dotted #aaa}details{margin:.3em 0}svg{background:#fff;"
    "border:1px solid #ddd;margin:.3em 1em .3em 0}svg text{font:11px sans-serif}";

static int write_problem(kv_rp *r, const kv_problem_stats *s, kv_err *err)
{
    FILE *f = r->f;
    fputs("<section id=\"problem-", f);
    kv_html_str(f, s->problem);
    fputs("\">\n<h2>Problem ", f);
    kv_html_str(f, s->problem);
    fprintf(f, "</h2>\n<p>%llu programs, %llu attempts, %llu ok.</p>\n",
            (unsigned long long)s->programs, (unsigned long long)s->attempts,
            (unsigned long long)s->ok);
    if (kv_rp_grid(r, s->problem, err) || kv_rp_sizes(r, s->problem, err) ||
        kv_rp_anytime(r, s->problem, err) || kv_rp_lineage(r, s->problem, err))
        return kv_err_prefix(err, "problem %s", s->problem);
    fputs("</section>\n", f);
    return 0;
}

static int write_page(kv_rp *r, kv_err *err)
{
    FILE *f = r->f;
    kv_report_problems pl = {0};
    int rc = -1;
    if (kv_report_problems_load(r->t, &pl, err) != 0)
        goto done;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'\">\n<title>kevo report: ",
          f);
    kv_html_str(f, r->run_dir);
    fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>kevo report: ", css);
    kv_html_str(f, r->run_dir);
    fputs("</h1>\n<nav><a href=\"#run\">run</a><a href=\"#models\">models</a>", f);
    for (size_t i = 0; i < pl.n; i++) {
        fputs("<a href=\"#problem-", f);
        kv_html_str(f, pl.v[i].problem);
        fputs("\">", f);
        kv_html_str(f, pl.v[i].problem);
        fputs("</a>", f);
    }
    fputs("<a href=\"#verdicts\">verdicts</a><a href=\"#sources\">sources</a></nav>\n", f);
    if (kv_rp_run(r, err) || kv_rp_models(r, err))
        goto done;
    for (size_t i = 0; i < pl.n; i++)
        if (write_problem(r, &pl.v[i], err))
            goto done;
    if (kv_rp_verdicts(r, err) || kv_rp_sources(r, err))
        goto done;
    fputs("</body></html>\n", f);
    rc = 0;
done:
    free(pl.v);
    return rc;
}

/* The link ceiling: the caller's, else the configuration's report.link_gbps,
 * else the key's default (the lent 2 x H200, common/machine.h). */
static void link_ceiling(kv_rp *r, const kv_report_opts *opts)
{
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(r->config, "report");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(rep, "link_gbps");
    if (opts && opts->link_gbps > 0) {
        r->link_gbps = opts->link_gbps;
        r->link_from = "given to kevo report (--link-gbps)";
    } else if (cJSON_IsNumber(g) && g->valuedouble > 0) {
        r->link_gbps = g->valuedouble;
        r->link_from = "the run's report.link_gbps";
    } else {
        r->link_gbps = KV_FLOOR_LINK_BYTES_PER_S * 1e-9;
        r->link_from = "measured on 2 x H200 by bench/link_overlap, both directions loaded; "
                       "set report.link_gbps or --link-gbps for another machine";
    }
}

int kv_report_write(const char *run_dir, const char *out_path, const kv_report_opts *opts,
                    kv_err *err)
{
    kv_archive_opts aopts = {.readonly = 1};
    kv_archive *a = NULL;
    kv_atomic_file af = {0};
    kv_rp r = {.run_dir = run_dir};
    int rc = -1;
    if (kv_archive_open(run_dir, &aopts, &a, err) != 0)
        return -1;
    if (kv_read_begin(a, &r.t, err) != 0)
        goto done;
    if (kv_rp_events_load(run_dir, &r.ev, err) != 0)
        goto done;
    char *json = NULL;
    char hash[KV_SHA256_HEX_LEN];
    int got = kv_get_config(r.t, &json, hash, err);
    if (got == KV_FAIL)
        goto done;
    if (got == KV_OK) {
        r.config = cJSON_Parse(json);
        free(json);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(r.config, "world");
        if (cJSON_IsNumber(w) && w->valuedouble >= 1 && w->valuedouble <= 64)
            r.world = (int)w->valuedouble;
    }
    link_ceiling(&r, opts);
    if (kv_atomic_open(&af, out_path, err) != 0)
        goto done;
    r.f = af.f;
    if (write_page(&r, err) != 0) {
        kv_atomic_abandon(&af);
        kv_err_prefix(err, "report of %s", run_dir);
        goto done;
    }
    if (kv_atomic_commit(&af, err) != 0)
        goto done;
    rc = 0;
done:
    if (r.t)
        kv_txn_abort(r.t);
    kv_archive_close(a);
    cJSON_Delete(r.config);
    kv_rp_events_free(&r.ev);
    free(r.shown.v);
    return rc;
}
