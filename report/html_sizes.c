/* html_sizes.c — a problem's best program per size (id="sizes-<problem>"):
 * its time, NCCL's, the speedup, its cell, the bus bandwidth of both (the
 * problem's cost model: bytes each GPU sends at the run's W, over the time;
 * nccl-tests' busbw for the collectives) and the fraction of the roofline. */
#include "html_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "problem/problem.h"

typedef struct {
    kv_size_best b;
    int order; /* index of the size in the problem's definition, or INT_MAX */
} size_row;

typedef struct {
    size_row *v;
    size_t n, cap;
} size_rows;

static int collect(const kv_size_best *b, void *ctx, kv_err *err)
{
    size_rows *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        size_row *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].b = *b;
    l->v[l->n].order = INT_MAX;
    l->n++;
    return 0;
}

static int by_order(const void *a, const void *b)
{
    const size_row *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return strcmp(x->b.size, y->b.size);
}

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
    size_rows l = {0};
    kv_problem *def = calloc(1, sizeof *def); /* ~50 KiB */
    int have_def = 0, rc = -1;
    if (!def) {
        kv_err_set(err, "out of memory");
        goto done;
    }
    if (kv_each_size_best(r->t, problem, collect, &l, err) != 0)
        goto done;
    /* the definition gives the sizes' order and the cost model; without it
     * (a problem no longer on disk) the table keeps name order and no GB/s */
    char root[PATH_MAX], dir[PATH_MAX + KV_NAME_MAX + 1];
    kv_err ignored = {{0}};
    kv_problems_default_root(root, sizeof root);
    snprintf(dir, sizeof dir, "%s/%s", root, problem);
    if (l.n > 0 && kv_problem_load(dir, def, &ignored) == 0)
        have_def = 1;
    for (size_t i = 0; i < l.n && have_def; i++) {
        int k = kv_problem_find_size(def, l.v[i].b.size);
        l.v[i].order = k >= 0 ? k : INT_MAX;
    }
    if (l.n > 1) /* qsort of NULL, 0 is undefined */
        qsort(l.v, l.n, sizeof *l.v, by_order);

    fputs("<section id=\"sizes-", f);
    kv_html_str(f, problem);
    fputs("\">\n<h3>Best program per size</h3>\n", f);
    if (l.n == 0) {
        fputs("<p>No program timed with the full protocol yet.</p>\n</section>\n", f);
        rc = 0;
        goto done;
    }
    if (r->world)
        fprintf(f, "<p>Bus bandwidth: the bytes each GPU sends (the problem's cost model, "
                   "W = %d) over the time.</p>\n", r->world);
    fputs("<p>Fraction of the measured link ceiling: not shown, the run stores no measured "
          "ceiling of its link (the roofline uses the machine's nominal ceilings).</p>\n", f);
    fputs("<table><tr><th class=\"l\">size</th><th>program</th><th>time (&#181;s)</th>"
          "<th>NCCL (&#181;s)</th><th>speedup</th><th class=\"l\">cell</th>"
          "<th>bus GB/s</th><th>NCCL bus GB/s</th><th>of roofline</th></tr>\n", f);
    for (size_t i = 0; i < l.n; i++) {
        const kv_size_best *b = &l.v[i].b;
        double send = 0, roof_us = 0;
        if (stored_roofline(r->t, b->program_id, b->size, &roof_us, err) != 0)
            goto done;
        kv_roofline rl;
        if (have_def && r->world && l.v[i].order != INT_MAX &&
            kv_problem_roofline(def, l.v[i].order, r->world, &rl, &ignored) == 0) {
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
        fprintf(f, "</td><td><a href=\"#elite-%llu\">#%llu</a></td><td>%.2f</td><td>%.2f</td>"
                   "<td class=\"%s\">%.2fx</td><td class=\"l\">",
                (unsigned long long)b->program_id, (unsigned long long)b->program_id,
                b->cand_us, b->ref_us, kv_rp_speedup_class(b->speedup), b->speedup);
        kv_html_str(f, b->cell[0] ? b->cell : "-");
        fputs("</td>", f);
        gbps(f, send, b->cand_us);
        gbps(f, send, b->ref_us);
        if (roof_us > 0 && b->cand_us > 0)
            fprintf(f, "<td>%.0f%%</td>", 100 * roof_us / b->cand_us);
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
    free(l.v);
    return rc;
}
