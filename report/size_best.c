/* size_best.c — a problem's best program per size, in the problem's order
 * (size_best.h). */
#include "report/size_best.h"

#include <stdlib.h>
#include <string.h>

static int collect(const kv_size_best *b, void *ctx, kv_err *err)
{
    kv_report_size_bests *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        kv_size_best *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *b;
    return 0;
}

int kv_report_size_bests_load(kv_txn *t, const char *problem, const kv_problem *def,
                              kv_report_size_bests *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    if (kv_each_size_best(t, problem, collect, out, err) != 0)
        goto fail;
    out->known = malloc((out->n ? out->n : 1) * sizeof *out->known);
    if (!out->known) {
        kv_err_set(err, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < out->n; i++)
        out->known[i] = def ? kv_problem_find_size(def, out->v[i].size) : -1;
    /* insertion sort by the problem's order (entries arrive in name order,
     * which unknown sizes keep): a handful of sizes */
    for (size_t i = 1; i < out->n; i++) {
        kv_size_best b = out->v[i];
        int k = out->known[i];
        size_t j = i;
        while (j > 0 && k >= 0 && (out->known[j - 1] < 0 || out->known[j - 1] > k)) {
            out->v[j] = out->v[j - 1];
            out->known[j] = out->known[j - 1];
            j--;
        }
        out->v[j] = b;
        out->known[j] = k;
    }
    return 0;
fail:
    kv_report_size_bests_free(out);
    return -1;
}

void kv_report_size_bests_free(kv_report_size_bests *b)
{
    free(b->v);
    free(b->known);
    memset(b, 0, sizeof *b);
}
