/* html_sources.c — the source of each program the page links to (elites,
 * best programs per size, lineages), each in id="elite-<id>" with its
 * evidence: per-size times, verdict, cell, operator and parents. */
#include "html_int.h"

#include <stdlib.h>
#include <string.h>

static void times_table(FILE *f, const kv_program *p)
{
    if (p->n_sizes == 0)
        return;
    fputs("<table><tr><th class=\"l\">size</th><th>time (&#181;s)</th><th>p10</th>"
          "<th>p90</th><th>NCCL (&#181;s)</th><th>speedup</th><th>roofline (&#181;s)</th>"
          "<th class=\"l\">timing</th><th class=\"l\">ok</th></tr>\n",
          f);
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++) {
        const kv_size_result *s = &p->sizes[i];
        fputs("<tr><td class=\"l\">", f);
        kv_html_str(f, s->name);
        fprintf(f, "</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>", s->cand_us,
                s->cand_p10_us, s->cand_p90_us, s->ref_us);
        if (s->ok && s->cand_us > 0)
            fprintf(f, "<td>%.2fx</td>", s->ref_us / s->cand_us);
        else
            fputs("<td>-</td>", f);
        fprintf(f, "<td>%.2f</td><td class=\"l\">%s</td><td class=\"l\">%s</td></tr>\n",
                s->roofline_us, kv_size_timing_name(s->timing), s->ok ? "yes" : "no");
    }
    fputs("</table>\n", f);
}

static int one(kv_rp *r, uint64_t id, kv_err *err)
{
    FILE *f = r->f;
    kv_program p;
    int got = kv_get_program(r->t, id, &p, err);
    if (got == KV_FAIL)
        return -1;
    if (got == KV_NOTFOUND) {
        fprintf(f,
                "<section id=\"elite-%llu\"><h3>#%llu</h3><p>Not in the archive.</p>"
                "</section>\n",
                (unsigned long long)id, (unsigned long long)id);
        return 0;
    }
    char *src = NULL;
    size_t len = 0;
    got = kv_get_source(r->t, id, &src, &len, err);
    if (got == KV_FAIL) {
        kv_program_clear(&p);
        return -1;
    }
    fprintf(f, "<section id=\"elite-%llu\">\n<h3>#%llu ", (unsigned long long)id,
            (unsigned long long)id);
    kv_html_str(f, p.problem);
    fputs("</h3>\n<p>verdict ", f);
    fputs(kv_verdict_name(p.verdict), f);
    if (p.verdict == KV_VERDICT_OK)
        fprintf(f, ", speedup %.2fx, roofline %.0f%%", p.speedup, 100 * p.roofline);
    fputs(", cell ", f);
    kv_html_str(f, p.cell[0] ? p.cell : "-");
    fputs(", operator ", f);
    kv_html_str(f, p.op);
    if (p.model[0]) {
        fputs(" (", f);
        kv_html_str(f, p.model);
        fputs(")", f);
    }
    fprintf(f, ", island %d, parents", (int)p.island);
    if (p.n_parents == 0)
        fputs(" none", f);
    for (uint32_t i = 0; i < p.n_parents && i < KV_MAX_PARENTS; i++) {
        unsigned long long q = (unsigned long long)p.parents[i];
        if (kv_rp_ids_has(&r->shown, p.parents[i]))
            fprintf(f, " <a href=\"#elite-%llu\">#%llu</a>", q, q);
        else
            fprintf(f, " #%llu", q);
    }
    fputs(".</p>\n", f);
    times_table(f, &p);
    if (p.evidence && p.evidence[0]) {
        fputs("<details><summary>evidence</summary><pre>", f);
        kv_html_str(f, p.evidence);
        fputs("</pre></details>\n", f);
    }
    fprintf(f, "<details><summary>source (%zu bytes)</summary><pre>", len);
    if (src)
        kv_html_text(f, src, len);
    fputs("</pre></details>\n</section>\n", f);
    free(src);
    kv_program_clear(&p);
    return 0;
}

int kv_rp_sources(kv_rp *r, kv_err *err)
{
    kv_rp_ids_sort(&r->shown);
    fputs("<section id=\"sources\">\n<h2>Sources</h2>\n<p>The elites, the best programs per "
          "size and the lineages of the best, with their evidence.</p>\n",
          r->f);
    for (size_t i = 0; i < r->shown.n; i++)
        if (one(r, r->shown.v[i], err) != 0)
            return -1;
    fputs("</section>\n", r->f);
    return 0;
}
