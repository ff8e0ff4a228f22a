#include "eval_report.h"

#include <string.h>

#include "common/text.h"

static void timing(FILE *out, const kv_timing *t)
{
    fprintf(out, "%10.2f (%8.2f-%-8.2f cv %4.1f%%)", t->median, t->p10, t->p90, 100 * t->cv);
}

/* One line from ptxas' report: kernels, the most registers, spilled bytes. */
static void resources(FILE *out, const char *report)
{
    int kernels = 0, max_regs = 0;
    long spills = 0;
    for (const char *l = report; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *u = strstr(l, "Used ");
        const char *nl = strchr(l, '\n');
        int regs;
        long st, ld;
        if (u && (!nl || u < nl) && sscanf(u, "Used %d registers", &regs) == 1) {
            kernels++;
            if (regs > max_regs)
                max_regs = regs;
        }
        const char *sp = strstr(l, "bytes spill stores");
        if (sp && (!nl || sp < nl)) {
            const char *c = strchr(l, ',');
            if (c && sscanf(c + 1, " %ld bytes spill stores, %ld", &st, &ld) == 2)
                spills += st + ld;
        }
    }
    fprintf(out, "resources: %d kernel%s, up to %d registers, %ld bytes spilled\n", kernels,
            kernels == 1 ? "" : "s", max_regs, spills);
}

void kv_cli_print_report(FILE *out, const char *problem, const char *what, int world,
                         const kv_eval_report *r)
{
    /* the problem's and the file's names, the compiler's messages and the
     * sizes' names come from outside: escaped, never acted on */
    kv_text_fput(out, problem, KV_TEXT_ONE_LINE);
    fputs(": ", out);
    kv_text_fput(out, what, KV_TEXT_ONE_LINE);
    fprintf(out, ", W=%d\n", world);
    fprintf(out, "verdict: %s\n", kv_verdict_name(r->verdict));
    if (r->message[0]) {
        fputs("  ", out);
        kv_text_fput(out, r->message, KV_TEXT_MULTI_LINE);
        fputc('\n', out);
    }
    if (!r->baseline) {
        if (r->compile.key[0])
            fprintf(out, "compile: %s%.2f s, key %.16s, sass %.16s\n",
                    r->compile.cached ? "cached, " : "", r->compile.seconds, r->compile.key,
                    r->compile.sass_hash);
        if (r->compile.report)
            resources(out, r->compile.report);
        char cell[KV_CELL_NAME_MAX];
        if (r->classified)
            fprintf(out, "cell: %s\n", kv_eval_cell_name(r, cell));
        if (r->classified && r->cls.evidence_json) {
            fputs("evidence: ", out);
            kv_text_fput(out, r->cls.evidence_json, KV_TEXT_ONE_LINE);
            fputc('\n', out);
        }
    }
    if (r->n_sizes == 0)
        return;
    fprintf(out, "\n%-12s %-5s %-40s %s\n", "size", "check", "reference us (p10-p90, cv)",
            r->baseline ? "roofline us  fraction  timed as"
                        : "candidate us (p10-p90, cv)              speedup  roofline  timed as");
    for (int i = 0; i < r->n_sizes; i++) {
        const kv_eval_size *s = &r->sizes[i];
        char name[4 * sizeof s->timing_note];
        fprintf(out, "%-12s %-5s ", KV_TERM(name, s->name),
                !s->checked ? "-"
                : s->ok     ? "ok"
                            : "FAIL");
        if (!s->timed) {
            fprintf(out, "%s\n",
                    s->validation ? "(validation: checked, not timed)" : "(not timed)");
            continue;
        }
        timing(out, &s->ref);
        char how[32];
        if (s->graph_calls > 0)
            snprintf(how, sizeof how, "graph of %d", s->graph_calls);
        else
            snprintf(how, sizeof how, "calls");
        if (r->baseline) {
            fprintf(out, "  %10.2f  %6.1f%%   %s\n", s->roofline_us, 100 * s->roofline_fraction,
                    how);
        } else {
            fputs("  ", out);
            timing(out, &s->cand);
            fprintf(out, "  %6.2fx  %6.1f%%  %s\n", s->speedup, 100 * s->roofline_fraction, how);
        }
        if (s->timing_note[0]) /* from the worker, which runs the candidate */
            fprintf(out, "%-12s       %s\n", "", KV_TERM(name, s->timing_note));
        if (s->ref_plain)
            fprintf(out,
                    "%-12s       reference on plain memory, off the window (a tensor's bytes "
                    "are not a multiple of 16 x W: docs/problems.md, \"NCCL on the "
                    "window\")\n",
                    "");
    }
    if (!r->baseline && r->verdict == KV_VERDICT_OK)
        fprintf(out, "\nspeedup (geometric mean): %.3fx   roofline (mean): %.1f%%\n", r->speedup,
                100 * r->roofline);
    fprintf(out, "wall %.1f s, timed GPU %.3f s\n", r->wall_s, r->job.gpu_s);
}
