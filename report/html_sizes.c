/* html_sizes.c — a problem's best program per size (id="sizes-<problem>"):
 * its time, NCCL's, the speedup, its cell, the bus bandwidth of both (the
 * problem's cost model: bytes each GPU sends at the run's W, over the time;
 * nccl-tests' busbw for the collectives), the fraction of the roofline and
 * the fraction of the link's measured ceiling (bus GB/s over it). */
#include "html_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "problem/problem.h"
#include "report/size_best.h"

/* The stored roofline time of a program at one size, 0 when none. */
static int stored_roofline(kv_txn *t, uint64_t id, const char *size, double *out, kv_err *err)
{
    kv_program p;
    *out = 0;
    int got = kv_get_program(t, id, &p, err);
    if (got == KV_FAIL)
        return -1;
    if (got == KV_OK)
        for (uint32_t i = 0; i < p.n_sizes; i++)
            if (strcmp(p.sizes[i].name, size) == 0)
                *out = p.sizes[i].roofline_us;
    kv_program_clear(&p);
    return 0;
}

static void gbps(FILE *f, double bytes, double us)
{
    if (bytes > 0 && us > 0)
        fprintf(f, "<td>%.1f</td>", bytes / (us * 1e3));
    else
        fputs("<td>-</td>", f);
}

int kv_rp_sizes(kv_rp *r, const char *problem, kv_err *err)
{
    FILE *f = r->f;
    kv_report_size_bests l = {0};
    kv_problem *def = calloc(1, sizeof *def); /* ~50 KiB */
    int have_def = 0, rc = -1;
    if (!def) {
        kv_err_set(err, "out of memory");
        goto done;
    }
    /* the definition gives the sizes' order and the cost model; without it
     * (a problem no longer on disk) the table keeps name order and no GB/s */
    char root[PATH_MAX], dir[PATH_MAX + KV_NAME_MAX + 1];
    kv_err ignored = {{0}};
    kv_problems_default_root(root, sizeof root);
    snprintf(dir, sizeof dir, "%s/%s", root, problem);
    if (kv_problem_load(dir, def, &ignored) == 0)
        have_def = 1;
    if (kv_report_size_bests_load(r->t, problem, have_def ? def : NULL, &l, err) != 0)
        goto done;

    fputs("<section id=\"sizes-", f);
    kv_html_str(f, problem);
    fputs("\">\n<h3>Best program per size</h3>\n", f);
    if (l.n == 0) {
        fputs("<p>No program timed with the full protocol yet.</p>\n</section>\n", f);
        rc = 0;
        goto done;
    }
    if (r->world)
        fprintf(f,
                "<p>Bus bandwidth: the bytes each GPU sends (the problem's cost model, "
                "W = %d) over the time.</p>\n",
                r->world);
    fprintf(f,
            "<p>Of link: the bus bandwidth over the link's ceiling, %.0f GB/s per direction "
            "(",
            r->link_gbps);
    kv_html_str(f, r->link_from);
    fputs("). The roofline uses the machine's nominal ceilings.</p>\n", f);
    fputs("<table><tr><th class=\"l\">size</th><th>program</th><th>time (&#181;s)</th>"
          "<th>NCCL (&#181;s)</th><th>speedup</th><th class=\"l\">cell</th>"
          "<th>bus GB/s</th><th>NCCL bus GB/s</th><th>of roofline</th><th>of link</th></tr>\n",
          f);
    for (size_t i = 0; i < l.n; i++) {
        const kv_size_best *b = &l.v[i];
        double send = 0, roof_us = 0;
        if (stored_roofline(r->t, b->program_id, b->size, &roof_us, err) != 0)
            goto done;
        kv_roofline rl;
        if (have_def && r->world && l.known[i] >= 0 &&
            kv_problem_roofline(def, l.known[i], r->world, &rl, &ignored) == 0) {
            send = rl.send_bytes;
            if (roof_us <= 0)
                roof_us = rl.seconds * 1e6;
        }
        if (kv_rp_ids_add(&r->shown, b->program_id) != 0) {
            kv_err_set(err, "out of memory");
            goto done;
        }
        fputs("<tr><td class=\"l\">", f);
        kv_html_str(f, b->size);
        fprintf(f,
                "</td><td><a href=\"#elite-%llu\">#%llu</a></td><td>%.2f</td><td>%.2f</td>"
                "<td class=\"%s\">%.2fx</td><td class=\"l\">",
                (unsigned long long)b->program_id, (unsigned long long)b->program_id, b->cand_us,
                b->ref_us, kv_rp_speedup_class(b->speedup), b->speedup);
        kv_html_str(f, b->cell[0] ? b->cell : "-");
        fputs("</td>", f);
        gbps(f, send, b->cand_us);
        gbps(f, send, b->ref_us);
        if (roof_us > 0 && b->cand_us > 0)
            fprintf(f, "<td>%.0f%%</td>", 100 * roof_us / b->cand_us);
        else
            fputs("<td>-</td>", f);
        if (send > 0 && b->cand_us > 0)
            fprintf(f, "<td>%.0f%%</td>", 100 * send / (b->cand_us * 1e3) / r->link_gbps);
        else
            fputs("<td>-</td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n</section>\n", f);
    rc = 0;
done:
    if (have_def)
        kv_problem_free(def);
    free(def);
    kv_report_size_bests_free(&l);
    return rc;
}
