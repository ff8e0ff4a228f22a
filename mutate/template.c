/* template.c — the template mutator (template.h).
 *
 * Parameters are read from the source itself (kv_pattern_parse), since a
 * child's #define lines differ from its seed's, and written back one by one
 * (kv_pattern_with_param), so every child still carries valid annotations.
 *
 * Steps: a `values=` parameter moves to a neighbouring value 80% of the
 * time and to any other value otherwise; a `range=` parameter whose range
 * spans a factor of 4 or more (block counts, chunk sizes) is doubled or
 * halved, a narrower one moves by ±1..span/4. With KV_TPL_ANY: a sibling
 * when the target cell differs from the pattern's and a seed exists for
 * it (80%), recombination when a second parent is given (30%), else a
 * perturbation; an operator with no move falls back to perturb, then to a
 * sibling. */
#include "mutate/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIES 8

static const char *op_name(kv_tpl_op op)
{
    return op == KV_TPL_RECOMBINE ? "recombine" : op == KV_TPL_SIBLING ? "sibling" : "perturb";
}

static int can_move(const kv_pattern_param *p)
{
    return p->has_range ? p->hi > p->lo : p->n_values > 1;
}

/* A value of p other than its current one. */
static int64_t step(const kv_pattern_param *p, kv_rng *rng)
{
    const int64_t cur = p->value;
    if (!p->has_range) {
        int j = 0;
        while (j < p->n_values && p->values[j] != cur)
            j++;
        if (j == p->n_values || kv_rng_double(rng) < 0.2) { /* any other value */
            int k = (int)kv_rng_below(rng, (uint64_t)p->n_values - (j < p->n_values));
            return p->values[j < p->n_values && k >= j ? k + 1 : k];
        }
        int up = j == 0 ? 1 : j == p->n_values - 1 ? 0 : (int)kv_rng_below(rng, 2);
        return p->values[up ? j + 1 : j - 1];
    }
    int64_t v;
    if (p->lo >= 1 && p->hi >= 4 * p->lo) {
        int up = cur <= p->lo ? 1 : cur >= p->hi ? 0 : (int)kv_rng_below(rng, 2);
        v = up ? cur * 2 : cur / 2;
    } else {
        int64_t span = p->hi - p->lo, most = span / 4 > 1 ? span / 4 : 1;
        int64_t d = 1 + (int64_t)kv_rng_below(rng, (uint64_t)most);
        int up = cur <= p->lo ? 1 : cur >= p->hi ? 0 : (int)kv_rng_below(rng, 2);
        v = up ? cur + d : cur - d;
    }
    if (v < p->lo)
        v = p->lo;
    if (v > p->hi)
        v = p->hi;
    return v != cur ? v : cur < p->hi ? cur + 1 : cur - 1;
}

/* src with parameter `name` set to v (when present and allowed); *src is
 * replaced. 0, 1 (not applicable) or -1. */
static int set_param(char **src, size_t *len, const char *name, int64_t v, kv_err *err)
{
    kv_pattern_meta m;
    if (kv_pattern_parse(*src, *len, "child", &m, err) != 0)
        return -1;
    for (int i = 0; i < m.n_params; i++) {
        if (strcmp(m.params[i].name, name) != 0)
            continue;
        if (!kv_pattern_param_allows(&m.params[i], v))
            return 1;
        if (m.params[i].value == v)
            return 0;
        char *out = NULL;
        size_t out_len = 0;
        if (kv_pattern_with_param(*src, *len, &m, i, v, &out, &out_len, err) != 0)
            return -1;
        free(*src);
        *src = out;
        *len = out_len;
        return 0;
    }
    return 1;
}

static char *copy_src(const char *s, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, s, len);
        c[len] = 0;
    }
    return c;
}

static void note_add(char *note, size_t cap, const char *name, int64_t from, int64_t to)
{
    size_t l = strlen(note);
    snprintf(note + l, cap - l, "%s%s %lld->%lld", l ? ", " : "", name, (long long)from,
             (long long)to);
}

static int perturb(const kv_tpl_in *in, const kv_pattern_meta *pm, kv_rng *rng, kv_proposal *out,
                   kv_err *err)
{
    int movable[KV_PATTERN_MAX_PARAMS], n = 0;
    for (int i = 0; i < pm->n_params; i++)
        if (can_move(&pm->params[i]))
            movable[n++] = i;
    if (n == 0) {
        kv_err_set(err, "pattern %s has no parameter that can change", in->pattern);
        return 1;
    }
    char *src = copy_src(in->parent_src, in->parent_len);
    size_t len = in->parent_len;
    if (!src)
        return kv_err_set(err, "out of memory");
    int k = n > 1 && kv_rng_double(rng) < 0.3 ? 2 : 1;
    for (int j = 0; j < k; j++) { /* k distinct parameters: a partial shuffle */
        int pick = j + (int)kv_rng_below(rng, (uint64_t)(n - j));
        int tmp = movable[j];
        movable[j] = movable[pick];
        movable[pick] = tmp;
        const kv_pattern_param *p = &pm->params[movable[j]];
        int64_t v = step(p, rng);
        if (set_param(&src, &len, p->name, v, err) < 0) {
            free(src);
            return -1;
        }
        note_add(out->note, sizeof out->note, p->name, p->value, v);
    }
    out->src = src;
    out->len = len;
    out->n_parents = 1;
    out->parents[0] = in->parent_id;
    return 0;
}

static int same_values(const kv_pattern_meta *a, const int64_t *v)
{
    for (int i = 0; i < a->n_params; i++)
        if (a->params[i].value != v[i])
            return 0;
    return 1;
}

static int recombine(const kv_tpl_in *in, const kv_pattern_meta *pm, kv_rng *rng,
                     kv_proposal *out, kv_err *err)
{
    kv_pattern_meta om;
    if (!in->other_src) {
        kv_err_set(err, "no second parent to recombine with");
        return 1;
    }
    if (kv_pattern_parse(in->other_src, in->other_len, "second parent", &om, err) != 0)
        return -1;
    int64_t other[KV_PATTERN_MAX_PARAMS];
    int differ = 0;
    for (int i = 0; i < pm->n_params; i++) {
        other[i] = pm->params[i].value;
        for (int j = 0; j < om.n_params; j++)
            if (strcmp(om.params[j].name, pm->params[i].name) == 0 &&
                kv_pattern_param_allows(&pm->params[i], om.params[j].value))
                other[i] = om.params[j].value;
        differ += other[i] != pm->params[i].value;
    }
    if (differ < 2) { /* every child would equal one of the parents */
        kv_err_set(err, "the two parents differ in %d parameter%s", differ, differ == 1 ? "" : "s");
        return 1;
    }
    int64_t child[KV_PATTERN_MAX_PARAMS];
    for (int t = 0; t < MAX_TRIES; t++) {
        for (int i = 0; i < pm->n_params; i++)
            child[i] = kv_rng_below(rng, 2) ? other[i] : pm->params[i].value;
        if (!same_values(pm, child) && memcmp(child, other, sizeof(int64_t) * pm->n_params) != 0)
            break;
        if (t == MAX_TRIES - 1) { /* take the first differing value from each side */
            int first = 1;
            for (int i = 0; i < pm->n_params; i++)
                if (other[i] != pm->params[i].value) {
                    child[i] = first ? other[i] : pm->params[i].value;
                    first = 0;
                }
        }
    }
    char *src = copy_src(in->parent_src, in->parent_len);
    size_t len = in->parent_len;
    if (!src)
        return kv_err_set(err, "out of memory");
    for (int i = 0; i < pm->n_params; i++) {
        if (child[i] == pm->params[i].value)
            continue;
        if (set_param(&src, &len, pm->params[i].name, child[i], err) < 0) {
            free(src);
            return -1;
        }
        note_add(out->note, sizeof out->note, pm->params[i].name, pm->params[i].value, child[i]);
    }
    out->src = src;
    out->len = len;
    out->n_parents = 2;
    out->parents[0] = in->parent_id;
    out->parents[1] = in->other_id;
    return 0;
}

/* The seed for the target cell (or any other seed when there is none). */
static const kv_seed *sibling_of(const kv_tpl_in *in, int own_cell, kv_rng *rng)
{
    const kv_seed *pick[64];
    int n = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++)
        for (int i = 0; i < in->lib->n && n < 64; i++) {
            const kv_seed *s = &in->lib->seeds[i];
            if (strcmp(s->name, in->pattern) == 0)
                continue;
            if (pass == 0 ? s->meta.cell == in->target_cell && in->target_cell != own_cell
                          : s->meta.cell != own_cell)
                pick[n++] = s;
        }
    return n ? pick[kv_rng_below(rng, (uint64_t)n)] : NULL;
}

static int sibling(const kv_tpl_in *in, const kv_pattern_meta *pm, int own_cell, kv_rng *rng,
                   kv_proposal *out, kv_err *err)
{
    const kv_seed *s = sibling_of(in, own_cell, rng);
    if (!s) {
        kv_err_set(err, "no seed of another cell for the problem of %s", in->pattern);
        return 1;
    }
    char *src = copy_src(s->src, s->len);
    size_t len = s->len;
    if (!src)
        return kv_err_set(err, "out of memory");
    snprintf(out->note, sizeof out->note, "from %s", in->pattern);
    for (int i = 0; i < pm->n_params; i++) {
        int rc = set_param(&src, &len, pm->params[i].name, pm->params[i].value, err);
        if (rc < 0) {
            free(src);
            return -1;
        }
        if (rc == 0)
            note_add(out->note, sizeof out->note, pm->params[i].name, pm->params[i].value,
                     pm->params[i].value);
    }
    out->src = src;
    out->len = len;
    snprintf(out->model, sizeof out->model, "%s", s->name);
    out->n_parents = 1;
    out->parents[0] = in->parent_id;
    return 0;
}

int kv_template_propose(const kv_tpl_in *in, kv_rng *rng, kv_proposal *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    kv_pattern_meta pm;
    if (kv_pattern_parse(in->parent_src, in->parent_len, in->pattern, &pm, err) != 0)
        return 1; /* not a pattern's child (an LLM's rewrite, say): nothing to tune */
    const kv_seed *own = kv_library_find(in->lib, in->pattern);
    int own_cell = own ? own->meta.cell : pm.cell;
    int has_target_seed = 0;
    for (int i = 0; i < in->lib->n; i++)
        has_target_seed |= in->target_cell >= 0 && in->target_cell != own_cell &&
                           in->lib->seeds[i].meta.cell == in->target_cell;
    kv_tpl_op op = in->op;
    if (op == KV_TPL_ANY) {
        double u = kv_rng_double(rng);
        op = has_target_seed && u < 0.8            ? KV_TPL_SIBLING
             : in->other_src && kv_rng_double(rng) < 0.3 ? KV_TPL_RECOMBINE
                                                   : KV_TPL_PERTURB;
    }
    snprintf(out->model, sizeof out->model, "%s", in->pattern);
    int rc = op == KV_TPL_SIBLING     ? sibling(in, &pm, own_cell, rng, out, err)
             : op == KV_TPL_RECOMBINE ? recombine(in, &pm, rng, out, err)
                                      : perturb(in, &pm, rng, out, err);
    if (rc == 1 && in->op == KV_TPL_ANY && op != KV_TPL_PERTURB) {
        out->note[0] = 0;
        rc = perturb(in, &pm, rng, out, err);
        op = KV_TPL_PERTURB;
    }
    if (rc == 1 && in->op == KV_TPL_ANY && op == KV_TPL_PERTURB) {
        out->note[0] = 0;
        rc = sibling(in, &pm, own_cell, rng, out, err);
        op = KV_TPL_SIBLING;
    }
    if (rc != 0) {
        free(out->src);
        memset(out, 0, sizeof *out);
        return rc;
    }
    snprintf(out->op, sizeof out->op, "%s", op_name(op));
    return 0;
}
