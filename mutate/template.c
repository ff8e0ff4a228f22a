/* template.c — the template mutator (template.h; docs/patterns.md, "The
 * template mutator").
 *
 * Parameters are read from the source itself (kv_pattern_parse), since a
 * child's #define lines differ from its seed's, and written back one by one
 * (kv_pattern_with_param), so every child still carries valid annotations.
 *
 * Steps: a `values=` parameter moves to the next allowed value above or
 * below 80% of the time and to any other value otherwise; a `range=`
 * parameter whose range spans a factor of 4 or more (block counts, chunk
 * sizes) is doubled or halved, a narrower one moves by 1..span/4. With
 * KV_TPL_ANY: a sibling when the target cell differs from the pattern's and
 * a seed exists for it (80%), recombination when a second parent is given
 * (30%), else a perturbation; an operator with no move falls back to
 * perturb, then to a sibling. KV_TPL_JUMP, which the search asks for when
 * the neighbourhoods of its elites are used up, draws every parameter anew:
 * a random point of the pattern's whole space. A parent generated from a
 * schedule is handed to template_sched.c, whose moves are structural. */
#include "mutate/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIES 8

static const char *op_name(kv_tpl_op op)
{
    return op == KV_TPL_RECOMBINE ? "recombine"
           : op == KV_TPL_SIBLING ? "sibling"
           : op == KV_TPL_JUMP    ? "jump"
                                  : "perturb";
}

static int can_move(const kv_pattern_param *p)
{
    return p->has_range ? p->hi > p->lo : p->n_values > 1;
}

/* The allowed values of a `values=` parameter just below and just above
 * cur (by value, so the list's order does not matter); -1 where none. */
static void neighbours(const kv_pattern_param *p, int64_t cur, int *below, int *above)
{
    *below = *above = -1;
    for (int k = 0; k < p->n_values; k++) {
        int64_t x = p->values[k];
        if (x < cur && (*below < 0 || x > p->values[*below]))
            *below = k;
        if (x > cur && (*above < 0 || x < p->values[*above]))
            *above = k;
    }
}

/* A value of p other than its current one (p must be able to move). */
static int64_t step(const kv_pattern_param *p, kv_rng *rng)
{
    const int64_t cur = p->value;
    if (!p->has_range) {
        int below, above;
        neighbours(p, cur, &below, &above);
        if (kv_rng_double(rng) < 0.2) { /* any other value: skip cur's slot */
            int j = 0;
            while (j < p->n_values && p->values[j] != cur)
                j++;
            int k = (int)kv_rng_below(rng, (uint64_t)p->n_values - (j < p->n_values));
            return p->values[j < p->n_values && k >= j ? k + 1 : k];
        }
        int up = below < 0 ? 1 : above < 0 ? 0 : (int)kv_rng_below(rng, 2);
        return p->values[up ? above : below];
    }
    int up = cur <= p->lo ? 1 : cur >= p->hi ? 0 : (int)kv_rng_below(rng, 2);
    int64_t v;
    if (p->lo >= 1 && p->hi / 4 >= p->lo) { /* spans a factor of 4: double or halve */
        v = up ? (cur > p->hi / 2 ? p->hi : cur * 2) : cur / 2;
    } else { /* narrow: +-1 .. span/4 */
        int64_t span = p->hi - p->lo, most = span / 4 > 1 ? span / 4 : 1;
        int64_t d = 1 + (int64_t)kv_rng_below(rng, (uint64_t)most);
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

/* Appends sep and s to the string buf (cap bytes), truncating. */
static void append(char *buf, size_t cap, const char *sep, const char *s)
{
    size_t l = strlen(buf);
    for (const char *p = sep; *p && l + 1 < cap; p++)
        buf[l++] = *p;
    for (const char *p = s; *p && l + 1 < cap; p++)
        buf[l++] = *p;
    buf[l] = 0;
}

static void note_add(char *note, size_t cap, const char *name, int64_t from, int64_t to)
{
    size_t l = strlen(note);
    const char *sep = l && note[l - 1] != ' ' ? ", " : ""; /* none after "from x: " */
    snprintf(note + l, cap - l, "%s%s %lld->%lld", sep, name, (long long)from, (long long)to);
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

/* out->src: base (whose parameters pm describes) with the values v, each
 * change added to out->note. 0 or -1. */
static int with_values(const char *base, size_t base_len, const kv_pattern_meta *pm,
                       const int64_t *v, kv_proposal *out, kv_err *err)
{
    char *src = copy_src(base, base_len);
    size_t len = base_len;
    if (!src)
        return kv_err_set(err, "out of memory");
    for (int i = 0; i < pm->n_params; i++) {
        // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult): v holds n_params values
        if (v[i] == pm->params[i].value)
            continue;
        if (set_param(&src, &len, pm->params[i].name, v[i], err) < 0) {
            free(src);
            return -1;
        }
        note_add(out->note, sizeof out->note, pm->params[i].name, pm->params[i].value, v[i]);
    }
    out->src = src;
    out->len = len;
    return 0;
}

/* A value of p drawn uniformly from all it allows. */
static int64_t any_value(const kv_pattern_param *p, kv_rng *rng)
{
    if (!p->has_range)
        return p->values[kv_rng_below(rng, (uint64_t)p->n_values)];
    return p->lo + (int64_t)kv_rng_below(rng, (uint64_t)(p->hi - p->lo) + 1);
}

static int same_values(const kv_pattern_meta *a, const int64_t *v)
{
    for (int i = 0; i < a->n_params; i++)
        if (a->params[i].value != v[i])
            return 0;
    return 1;
}

/* A random point of the space of the parent's pattern or, half of the
 * time, of another seed of the problem (drawn uniformly): once a pattern's
 * whole space is stored, its jumps only give duplicates. */
static int jump(const kv_tpl_in *in, const kv_pattern_meta *parent, kv_rng *rng, kv_proposal *out,
                kv_err *err)
{
    const kv_pattern_meta *pm = parent;
    const char *base = in->parent_src;
    size_t base_len = in->parent_len;
    int others = 0;
    for (int i = 0; i < in->lib->n; i++)
        others += strcmp(in->lib->seeds[i].name, in->pattern) != 0;
    if (others > 0 && kv_rng_below(rng, 2)) {
        int k = (int)kv_rng_below(rng, (uint64_t)others);
        for (int i = 0; i < in->lib->n; i++)
            if (strcmp(in->lib->seeds[i].name, in->pattern) != 0 && k-- == 0) {
                const kv_seed *s = &in->lib->seeds[i];
                pm = &s->meta;
                base = s->src;
                base_len = s->len;
                snprintf(out->model, sizeof out->model, "%s", s->name);
                snprintf(out->note, sizeof out->note, "from %s: ", in->pattern);
                break;
            }
    }
    int64_t child[KV_PATTERN_MAX_PARAMS];
    int movable = 0;
    for (int i = 0; i < pm->n_params; i++)
        movable += can_move(&pm->params[i]);
    if (movable == 0) {
        kv_err_set(err, "pattern %s has no parameter that can change", out->model);
        return 1;
    }
    for (int t = 0; t < MAX_TRIES; t++) {
        for (int i = 0; i < pm->n_params; i++)
            child[i] = any_value(&pm->params[i], rng);
        if (!same_values(pm, child))
            break;
        if (t == MAX_TRIES - 1) /* a tiny space that keeps drawing the parent: one step */
            for (int i = 0; i < pm->n_params; i++)
                if (can_move(&pm->params[i])) {
                    child[i] = step(&pm->params[i], rng);
                    break;
                }
    }
    if (with_values(base, base_len, pm, child, out, err) != 0)
        return -1;
    out->n_parents = 1;
    out->parents[0] = in->parent_id;
    return 0;
}

static int recombine(const kv_tpl_in *in, const kv_pattern_meta *pm, kv_rng *rng, kv_proposal *out,
                     kv_err *err)
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
    if (with_values(in->parent_src, in->parent_len, pm, child, out, err) != 0)
        return -1;
    out->n_parents = 2;
    out->parents[0] = in->parent_id;
    out->parents[1] = in->other_id;
    return 0;
}

/* Another seed of the parent's problem, drawn from the first non-empty
 * group of: the target cell's seeds (when that is not the pattern's own
 * cell), the other cells' seeds, any other seed. */
static const kv_seed *sibling_of(const kv_tpl_in *in, int own_cell, kv_rng *rng)
{
    int pick[256], n = 0;
    for (int pass = 0; pass < 3 && n == 0; pass++)
        for (int i = 0; i < in->lib->n && n < 256; i++) {
            const kv_seed *s = &in->lib->seeds[i];
            if (strcmp(s->name, in->pattern) == 0)
                continue;
            int cell = s->meta.cell;
            if (pass == 0   ? cell == in->target_cell && cell != own_cell
                : pass == 1 ? cell != own_cell
                            : 1)
                pick[n++] = i;
        }
    return n ? &in->lib->seeds[pick[kv_rng_below(rng, (uint64_t)n)]] : NULL;
}

/* The sibling seed with the parent's values of the parameters both declare
 * (where the sibling allows them); the note lists those that differ from
 * the sibling seed's own values. */
static int sibling(const kv_tpl_in *in, const kv_pattern_meta *pm, int own_cell, kv_rng *rng,
                   kv_proposal *out, kv_err *err)
{
    const kv_seed *s = sibling_of(in, own_cell, rng);
    if (!s) {
        kv_err_set(err, "pattern %s has no sibling seed", in->pattern);
        return 1;
    }
    char *src = copy_src(s->src, s->len);
    size_t len = s->len;
    if (!src)
        return kv_err_set(err, "out of memory");
    char changed[sizeof out->note] = "";
    for (int j = 0; j < s->meta.n_params; j++) {
        const kv_pattern_param *sp = &s->meta.params[j];
        for (int i = 0; i < pm->n_params; i++) {
            const kv_pattern_param *p = &pm->params[i];
            if (strcmp(p->name, sp->name) != 0 || p->value == sp->value)
                continue;
            int rc = set_param(&src, &len, p->name, p->value, err);
            if (rc < 0) {
                free(src);
                return -1;
            }
            if (rc == 0)
                note_add(changed, sizeof changed, p->name, sp->value, p->value);
        }
    }
    snprintf(out->note, sizeof out->note, "from %s", in->pattern);
    append(out->note, sizeof out->note, changed[0] ? ": " : "", changed);
    out->src = src;
    out->len = len;
    snprintf(out->model, sizeof out->model, "%s", s->name);
    out->n_parents = 1;
    out->parents[0] = in->parent_id;
    return 0;
}

static int apply(kv_tpl_op op, const kv_tpl_in *in, const kv_pattern_meta *pm, int own_cell,
                 kv_rng *rng, kv_proposal *out, kv_err *err)
{
    out->note[0] = 0;
    snprintf(out->model, sizeof out->model, "%s", in->pattern);
    int rc = op == KV_TPL_SIBLING     ? sibling(in, pm, own_cell, rng, out, err)
             : op == KV_TPL_RECOMBINE ? recombine(in, pm, rng, out, err)
             : op == KV_TPL_JUMP      ? jump(in, pm, rng, out, err)
                                      : perturb(in, pm, rng, out, err);
    if (rc == 0)
        snprintf(out->op, sizeof out->op, "%s", op_name(op));
    return rc;
}

int kv_template_propose(const kv_tpl_in *in, kv_rng *rng, kv_proposal *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    kv_schedule sched;
    if (kv_sched_from_source(in->parent_src, in->parent_len, &sched, NULL) == 1)
        return kv_template_sched_propose(in, &sched, rng, out, err); /* structural moves */
    kv_pattern_meta pm;
    if (kv_pattern_parse(in->parent_src, in->parent_len, in->pattern, &pm, err) != 0)
        return 1; /* not a pattern's child (an LLM's rewrite, say): nothing to tune */
    const kv_seed *own = kv_library_find(in->lib, in->pattern);
    int own_cell = own ? own->meta.cell : pm.cell;
    int has_target_seed = 0;
    for (int i = 0; i < in->lib->n; i++)
        has_target_seed |= in->target_cell >= 0 && in->target_cell != own_cell &&
                           in->lib->seeds[i].meta.cell == in->target_cell &&
                           strcmp(in->lib->seeds[i].name, in->pattern) != 0;
    if (in->op != KV_TPL_ANY) {
        int rc = apply(in->op, in, &pm, own_cell, rng, out, err);
        if (rc != 0)
            kv_proposal_free(out);
        return rc;
    }
    /* the mutator's own choice, then the fallbacks: perturb, then a sibling */
    kv_tpl_op order[3] = {KV_TPL_PERTURB, KV_TPL_PERTURB, KV_TPL_SIBLING};
    if (has_target_seed && kv_rng_double(rng) < 0.8)
        order[0] = KV_TPL_SIBLING;
    else if (in->other_src && kv_rng_double(rng) < 0.3)
        order[0] = KV_TPL_RECOMBINE;
    int rc = 1;
    char why[sizeof err->msg] = ""; /* every operator's reason for no move */
    for (int k = 0; k < 3 && rc == 1; k++) {
        if (k > 0 && order[k] == order[0])
            continue; /* tried already */
        rc = apply(order[k], in, &pm, own_cell, rng, out, err);
        if (rc == 1 && err)
            append(why, sizeof why, why[0] ? "; " : "", err->msg);
    }
    if (rc == 1)
        kv_err_set(err, "%s", why);
    if (rc != 0)
        kv_proposal_free(out);
    return rc;
}
