/* archive_export.c — kevo archive export: every program record as JSON or
 * CSV, to stdout or to a file (kv_output_open). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_out.h"
#include "archive_cmd.h"
#include "common/fsutil.h"

const char usage_export[] =
    "usage: kevo archive export [--run DIR] [--format json|csv] [--problem P]\n"
    "                           [--with-source] [--out FILE]\n"
    "\n"
    "Every program record (id, problem, parents, island, op, model, verdict,\n"
    "speedup, roofline, cell, created, evaluated, per-size times), in id order.\n"
    "json (the default): an array, one object per line. csv: a header row, then one\n"
    "row per program, sizes flattened as \"name:ref_us:cand_us;...\", fields quoted\n"
    "as RFC 4180 says, control characters in names escaped (\\e, \\x01). --with-source\n"
    "adds each program's source (csv: source_encoding \"text\" and the source as it\n"
    "is, or \"base64\" and its bytes in base64 when it holds a control character\n"
    "other than TAB and LF or is not UTF-8). --out writes FILE\n"
    "instead of stdout: a regular file (or a link's target) is replaced\n"
    "atomically; a FIFO or a device is written through.\n";

/* ---- export ------------------------------------------------------------------------------ */

typedef struct {
    kv_txn *t;
    const view_opts *o;
    FILE *out;
    uint64_t n;
    size_t not_utf8;             /* json: bytes replaced by U+FFFD */
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
    if (w->o->csv) {
        rc = kv_csv_program(w->out, p, src) == 0 ? 0 : kv_err_set(err, "out of memory");
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
    if (o->csv)
        kv_csv_program_header(out, o->with_source);
    else
        fputs("[\n", out);
    if (kv_each_program(t, on_export, &w, err) != 0)
        return -1;
    if (!o->csv)
        fputs(w.n ? "\n]\n" : "]\n", out);
    if (w.not_utf8)
        fprintf(stderr, "kevo archive export: %zu bytes that were not UTF-8 written as U+FFFD\n",
                w.not_utf8);
    return 0;
}

int run_export(const view_opts *o, const snapshot *s, kv_err *err)
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
