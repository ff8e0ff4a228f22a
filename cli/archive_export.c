/* archive_export.c — kevo archive export: every program record as JSON, or
 * one row per program and size as CSV or JSON lines (report/rows.c, written by export_rows.c), to
 * stdout or to a file (kv_output_open). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_out.h"
#include "archive_cmd.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "eval_setup.h"
#include "export_rows.h"

const char kv_view_export_usage[] =
    "usage: kevo archive export [--run DIR] [--format json|csv|jsonl] [--problem P]\n"
    "                           [--with-source] [--out FILE]\n"
    "\n"
    "Every program of the archive, in id order.\n"
    "json (the default): an array of the program records (id, problem, parents,\n"
    "island, op, model, verdict, speedup, roofline, cell, created, evaluated,\n"
    "sizes, evidence), one object per line.\n"
    "csv, jsonl: one row per program and size (one with an empty size for a\n"
    "program without sizes): id, problem, size, cand_us (the candidate's median),\n"
    "cand_p10_us, cand_p90_us, cand_cv (from the evaluator's evidence; empty when\n"
    "it holds none), ref_us, speedup (at this size), gbps (bus bandwidth: the\n"
    "problem's send_bytes at the run's W over cand_us), cell, elite (of any\n"
    "island), verdict, op, island, parents (\"1;4\"), model, ok (the size passed\n"
    "its check), timing; empty (csv) or null (jsonl) where unknown. csv fields are\n"
    "quoted as RFC 4180 says, control characters in names escaped (\\e, \\x01);\n"
    "jsonl is one JSON object per line. docs/analysis.md reads them with pandas.\n"
    "--with-source adds each program's source (on each of its rows; csv:\n"
    "source_encoding \"text\" and the source as it is, or \"base64\" and its bytes\n"
    "in base64 when it holds a control character other than TAB and LF or is not\n"
    "UTF-8). --out writes FILE instead of stdout: a regular file (or a link's\n"
    "target) is replaced atomically; a FIFO or a device is written through.\n";

/* ---- export ------------------------------------------------------------------------------ */

typedef struct {
    kv_txn *t;
    const view_opts *o;
    kv_report_rows *rows; /* csv, jsonl */
    FILE *out;
    uint64_t n;
    size_t not_utf8; /* json: bytes replaced by U+FFFD */
} export_walk;

static int on_export(const kv_program *p, void *ctx, kv_err *err)
{
    export_walk *w = ctx;
    if (w->o->problem && strcmp(p->problem, w->o->problem) != 0)
        return 0;
    char *src = NULL;
    if (w->o->with_source) {
        int rc = kv_get_source(w->t, p->id, &src, NULL, err);
        if (rc < 0)
            return -1;
        if (rc == KV_NOTFOUND)
            return kv_err_set(err, "the source of program #%" PRIu64 " is missing", p->id);
    }
    int rc = 0;
    if (w->rows) {
        kv_report_row rows[KV_MAX_SIZES];
        size_t n = 0;
        kv_err note = {{0}};
        rc = kv_report_rows_of(w->rows, p, rows, &n, &note, err);
        if (note.msg[0]) {
            char msg[4 * sizeof note.msg];
            fprintf(stderr, "kevo archive export: %s\n", KV_TERM(msg, note.msg));
        }
        if (rc == 0)
            rc = kv_export_rows_write(w->out, w->o->csv, p, rows, n, src, err);
    } else {
        cJSON *j = kv_program_to_json(p, src);
        size_t replaced = 0;
        char *text = j ? kv_json_print(j, 0, &replaced) : NULL;
        w->not_utf8 += replaced;
        cJSON_Delete(j);
        if (text)
            fprintf(w->out, "%s%s", w->n ? ",\n" : "", text);
        else
            rc = kv_err_set(err, "out of memory formatting JSON");
        free(text);
    }
    free(src);
    if (rc == 0 && ferror(w->out))
        rc = kv_err_errno(err, errno ? errno : EIO, "writing the export");
    w->n++;
    return rc;
}

static int export_programs(kv_txn *t, const view_opts *o, FILE *out, kv_err *err)
{
    export_walk w = {.t = t, .o = o, .out = out};
    kv_err note = {{0}};
    if ((o->csv || o->jsonl) &&
        kv_report_rows_open(t, kv_cli_load_problem, &w.rows, &note, err) != 0)
        return -1;
    if (note.msg[0]) {
        char msg[4 * sizeof note.msg];
        fprintf(stderr, "kevo archive export: no GB/s: %s\n", KV_TERM(msg, note.msg));
    }
    if (o->csv)
        kv_export_rows_csv_header(out, o->with_source);
    else if (!o->jsonl)
        fputs("[\n", out);
    int rc = kv_each_program(t, on_export, &w, err);
    kv_report_rows_free(w.rows);
    if (rc != 0)
        return -1;
    if (!w.rows)
        fputs(w.n ? "\n]\n" : "]\n", out);
    if (w.not_utf8)
        fprintf(stderr, "kevo archive export: %zu bytes that were not UTF-8 written as U+FFFD\n",
                w.not_utf8);
    return 0;
}

int kv_view_export(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    int rc = o->problem ? require_problem(s, o->problem, err) : 0;
    kv_atomic_file file = {0};
    if (rc == 0 && o->out)
        rc = kv_output_open(&file, o->out, err);
    if (rc == 0)
        rc = export_programs(s->t, o, o->out ? file.f : stdout, err);
    if (o->out && file.f) {
        if (rc == 0)
            rc = kv_atomic_commit(&file, err);
        else
            kv_atomic_abandon(&file);
    }
    return rc;
}
