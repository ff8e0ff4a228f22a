/* html_lineage.c — the lineage of a problem's best program
 * (id="lineage-<problem>"): its ancestors along first parents as a nested
 * list, each node with its operator, speedup and a line diff against its
 * parent. */
#include "html_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64           /* ancestors shown */
#define MAX_DIFF_CELLS 4000000 /* LCS table cells; a larger diff is not computed */
#define MAX_DIFF_LINES 200     /* diff lines shown per node */

/* ---- the diff ---------------------------------------------------------------------- */

typedef struct {
    const char **p; /* line starts */
    size_t *len;    /* line lengths, without the newline */
    size_t n;
} lines;

static int split(const char *s, lines *out)
{
    size_t n = 1;
    for (const char *c = s; *c; c++)
        n += *c == '\n';
    out->p = malloc(n * sizeof *out->p);
    out->len = malloc(n * sizeof *out->len);
    if (!out->p || !out->len)
        return -1;
    out->n = 0;
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        out->p[out->n] = s;
        out->len[out->n++] = l;
        s += l + (e ? 1 : 0);
    }
    return 0;
}

static int same(const lines *a, size_t i, const lines *b, size_t j)
{
    return a->len[i] == b->len[j] && memcmp(a->p[i], b->p[j], a->len[i]) == 0;
}

static void line_out(FILE *f, const char *cls, const char *mark, const lines *l, size_t i)
{
    fprintf(f, "<span class=\"%s\">%s", cls, mark);
    kv_html_text(f, l->p[i], l->len[i]);
    fputs("</span>\n", f);
}

void kv_rp_diff(FILE *f, const char *a, const char *b, int max_lines)
{
    lines la = {0}, lb = {0};
    uint32_t *t = NULL;
    fputs("<pre>", f);
    if (split(a, &la) || split(b, &lb)) {
        fputs("(out of memory)", f);
        goto done;
    }
    /* the common head and tail need no table */
    size_t h = 0;
    while (h < la.n && h < lb.n && same(&la, h, &lb, h))
        h++;
    size_t ta = la.n, tb = lb.n;
    while (ta > h && tb > h && same(&la, ta - 1, &lb, tb - 1))
        ta--, tb--;
    size_t n = ta - h, m = tb - h;
    if (n == 0 && m == 0) {
        fputs("(same source)", f);
        goto done;
    }
    if ((n + 1) * (m + 1) > MAX_DIFF_CELLS || !(t = calloc((n + 1) * (m + 1), sizeof *t))) {
        fprintf(f, "(%zu lines differ from %zu: too large to diff)", m, n);
        goto done;
    }
    /* t[i][j]: LCS of a[h+i..ta) and b[h+j..tb) */
#define T(i, j) t[(i) * (m + 1) + (j)]
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;)
            T(i, j) = same(&la, h + i, &lb, h + j) ? T(i + 1, j + 1) + 1
                      : T(i + 1, j) > T(i, j + 1)  ? T(i + 1, j)
                                                   : T(i, j + 1);
    int shown = 0, hidden = 0;
    size_t i = 0, j = 0;
    if (h > 0)
        fprintf(f, "  (%zu lines the same)\n", h);
    while (i < n || j < m) {
        const char *cls, *mark;
        const lines *l;
        size_t k;
        if (i < n && j < m && same(&la, h + i, &lb, h + j)) {
            cls = "ctx", mark = "  ", l = &la, k = h + i, i++, j++;
        } else if (j < m && (i == n || T(i, j + 1) >= T(i + 1, j))) {
            cls = "add", mark = "+ ", l = &lb, k = h + j, j++;
        } else {
            cls = "del", mark = "- ", l = &la, k = h + i, i++;
        }
        if (shown < max_lines) {
            line_out(f, cls, mark, l, k);
            shown++;
        } else {
            hidden++;
        }
    }
#undef T
    if (hidden)
        fprintf(f, "  (%d more lines of diff)\n", hidden);
    if (la.n > ta)
        fprintf(f, "  (%zu lines the same)", la.n - ta);
done:
    fputs("</pre>", f);
    free(t);
    free(la.p);
    free(la.len);
    free(lb.p);
    free(lb.len);
}

/* ---- the tree ---------------------------------------------------------------------- */

typedef struct {
    kv_program p;
    char *src;
} node;

int kv_rp_lineage(kv_rp *r, const char *problem, kv_err *err)
{
    FILE *f = r->f;
    uint64_t best;
    double speedup;
    int k = kv_top_k(r->t, problem, 1, &best, &speedup, err);
    if (k < 0)
        return -1;
    fputs("<section id=\"lineage-", f);
    kv_html_str(f, problem);
    fputs("\">\n<h3>Lineage of the best program</h3>\n", f);
    if (k == 0) {
        fputs("<p>No correct program yet.</p>\n</section>\n", f);
        return 0;
    }
    node *chain = calloc(MAX_DEPTH, sizeof *chain); /* ~2 KiB each */
    int n = 0, rc = -1;
    if (!chain)
        return kv_err_set(err, "out of memory");
    uint64_t id = best;
    /* from the best program up its first parents to a root */
    while (id && n < MAX_DEPTH) {
        memset(&chain[n], 0, sizeof chain[n]);
        int got = kv_get_program(r->t, id, &chain[n].p, err);
        if (got == KV_FAIL)
            goto done;
        if (got == KV_NOTFOUND)
            break;
        size_t len;
        if (kv_get_source(r->t, id, &chain[n].src, &len, err) == KV_FAIL) {
            kv_program_clear(&chain[n].p);
            goto done;
        }
        n++;
        id = chain[n - 1].p.n_parents ? chain[n - 1].p.parents[0] : 0;
        for (int i = 0; i < n && id; i++)
            if (chain[i].p.id == id)
                id = 0; /* a cycle: a damaged record */
    }
    if (n == MAX_DEPTH && id)
        fprintf(f, "<p>The %d nearest ancestors of #%llu.</p>\n", MAX_DEPTH,
                (unsigned long long)best);
    /* the root first, each child nested in its parent */
    for (int i = n - 1; i >= 0; i--) {
        const kv_program *p = &chain[i].p;
        fprintf(f, "<ul class=\"tree\"><li><a href=\"#elite-%llu\">#%llu</a> ",
                (unsigned long long)p->id, (unsigned long long)p->id);
        kv_html_str(f, p->op);
        if (p->model[0]) {
            fputs(" (", f);
            kv_html_str(f, p->model);
            fputs(")", f);
        }
        if (p->verdict == KV_VERDICT_OK)
            fprintf(f, " <span class=\"%s\">%.2fx</span>", kv_rp_speedup_class(p->speedup),
                    p->speedup);
        else
            fprintf(f, " %s", kv_verdict_name(p->verdict));
        for (uint32_t q = 1; q < p->n_parents; q++)
            fprintf(f, ", also from #%llu", (unsigned long long)p->parents[q]);
        if (i < n - 1) {
            fprintf(f, "\n<details><summary>diff against #%llu</summary>",
                    (unsigned long long)chain[i + 1].p.id);
            kv_rp_diff(f, chain[i + 1].src ? chain[i + 1].src : "",
                       chain[i].src ? chain[i].src : "", MAX_DIFF_LINES);
            fputs("</details>", f);
        }
        fputs("\n", f);
        if (kv_rp_ids_add(&r->shown, p->id) != 0) {
            kv_err_set(err, "out of memory");
            goto done;
        }
    }
    for (int i = 0; i < n; i++)
        fputs("</li></ul>", f);
    fputs("\n</section>\n", f);
    rc = 0;
done:
    for (int i = 0; i < n; i++) {
        kv_program_clear(&chain[i].p);
        free(chain[i].src);
    }
    free(chain);
    return rc;
}
