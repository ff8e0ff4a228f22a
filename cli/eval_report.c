#include "eval_report.h"

#include <string.h>

static void timing(FILE *out, const kv_timing *t)
{
    fprintf(out, "%10.2f (%8.2f-%-8.2f cv %4.1f%%)", t->median, t->p10, t->p90, 100 * t->cv);
}

void kv_cli_print_report(FILE *out, const char *problem, const char *what, int world,
                         const kv_eval_report *r)
{
    fprintf(out, "%s: %s, W=%d\n", problem, what, world);
    fprintf(out, "verdict: %s\n", kv_verdict_name(r->verdict));
    if (r->message[0])
        fprintf(out, "  %s\n", r->message);
    if (!r->baseline) {
        if (r->compile.key[0])
            fprintf(out, "compile: %s%.2f s, key %.16s, sass %.16s\n",
                    r->compile.cached ? "cached, " : "", r->compile.seconds, r->compile.key,
                    r->compile.sass_hash);
        if (r->compile.report && r->compile.report[0])
            fprintf(out, "resources:\n%s%s", r->compile.report,
                    r->compile.report[strlen(r->compile.report) - 1] == '\n' ? "" : "\n");
        if (r->cell[0])
            fprintf(out, "cell: %s\n", r->cell);
        if (r->classified && r->cls.evidence_json)
            fprintf(out, "evidence: %s\n", r->cls.evidence_json);
    }
    if (r->n_sizes == 0)
        return;
    fprintf(out, "\n%-12s %-5s %-40s %s\n", "size", "check",
            "reference us (p10-p90, cv)", r->baseline ? "roofline us  fraction" : "candidate us (p10-p90, cv)              speedup  roofline");
    for (int i = 0; i < r->n_sizes; i++) {
        const kv_eval_size *s = &r->sizes[i];
        fprintf(out, "%-12s %-5s ", s->name, !s->checked ? "-" : s->ok ? "ok" : "FAIL");
        if (!s->timed) {
            fprintf(out, "%s\n", s->validation ? "(validation: checked, not timed)" : "(not timed)");
            continue;
        }
        timing(out, &s->ref);
        if (r->baseline) {
            fprintf(out, "  %10.2f  %6.1f%%\n", s->roofline_us, 100 * s->roofline_fraction);
            continue;
        }
        fputs("  ", out);
        timing(out, &s->cand);
        fprintf(out, "  %6.2fx  %6.1f%%\n", s->speedup, 100 * s->roofline_fraction);
    }
    if (!r->baseline && r->verdict == KV_VERDICT_OK)
        fprintf(out, "\nspeedup (geometric mean): %.3fx   roofline (mean): %.1f%%\n", r->speedup,
                100 * r->roofline);
    fprintf(out, "wall %.1f s, timed GPU %.3f s\n", r->wall_s, r->job.gpu_s);
}
