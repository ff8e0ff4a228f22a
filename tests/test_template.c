/* test_template.c — the pattern library loader and the template mutator:
 * every child parses and carries allowed values, perturbation changes one or
 * two parameters and never gives the parent back, recombination takes each
 * value from one of its parents, a sibling reaches the target cell, the
 * random state decides everything, and patterns without parameters give
 * "no move", not an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kevo/fsutil.h"
#include "kevo/pattern.h"
#include "mutate/library.h"
#include "mutate/template.h"
#include "test.h"
#include "test_util.h"

static char root[4096];

static void count_error(const char *msg, void *ctx)
{
    (void)msg;
    (*(int *)ctx)++;
}

static int values_of(const char *src, size_t len, kv_pattern_meta *m)
{
    kv_err err;
    return kv_pattern_parse(src, len, "child", m, &err);
}

/* Parameters whose values differ between two parsed sources. */
static int differences(const kv_pattern_meta *a, const kv_pattern_meta *b)
{
    int n = 0;
    for (int i = 0; i < a->n_params; i++)
        for (int j = 0; j < b->n_params; j++)
            if (strcmp(a->params[i].name, b->params[j].name) == 0)
                n += a->params[i].value != b->params[j].value;
    return n;
}

static int all_allowed(const kv_pattern_meta *m)
{
    for (int i = 0; i < m->n_params; i++)
        if (!kv_pattern_param_allows(&m->params[i], m->params[i].value))
            return 0;
    return 1;
}

static void test_library(void)
{
    kv_library lib;
    kv_err err = {{0}};
    int errors = 0;
    KV_CHECKF(kv_library_load(root, "allreduce", &lib, count_error, &errors, &err) == 0, "%s",
              err.msg);
    KV_CHECK(lib.n >= 4 && errors == 0);
    for (int i = 1; i < lib.n; i++)
        KV_CHECK(strcmp(lib.seeds[i - 1].name, lib.seeds[i].name) < 0);
    KV_CHECK(kv_library_find(&lib, "twoshot_sm") != NULL && kv_library_find(&lib, "nope") == NULL);
    kv_library_free(&lib);
    KV_CHECK(kv_library_load(root, "no_such_problem", &lib, NULL, NULL, &err) == 0 && lib.n == 0);

    /* a seed with broken annotations costs only itself */
    char dir[4096], sub[4200], path[4300];
    kv_test_fresh_dir(dir, sizeof dir, "library");
    snprintf(sub, sizeof sub, "%s/p", dir);
    KV_CHECK(kv_mkdir_p(sub, 0755, &err) == 0);
    const char good[] = "// kevo:pattern problem=p transport=sm fusion=fused\n"
                        "// kevo:param A default=2 values=1,2,4\n#define A 2\n";
    const char bad[] = "// kevo:pattern problem=p transport=warp fusion=fused\n";
    snprintf(path, sizeof path, "%s/good.cu", sub);
    KV_CHECK(kv_write_file_atomic(path, good, strlen(good), &err) == 0);
    snprintf(path, sizeof path, "%s/bad.cu", sub);
    KV_CHECK(kv_write_file_atomic(path, bad, strlen(bad), &err) == 0);
    errors = 0;
    KV_CHECK(kv_library_load(dir, "p", &lib, count_error, &errors, &err) == 0);
    KV_CHECK(lib.n == 1 && errors == 1 && strcmp(lib.seeds[0].name, "good") == 0);
    kv_library_free(&lib);
}

static void test_perturb(void)
{
    const char *problems[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                              "moe_dispatch"};
    kv_rng rng;
    kv_rng_seed(&rng, 9);
    int one = 0, two = 0;
    for (size_t p = 0; p < sizeof problems / sizeof problems[0]; p++) {
        kv_library lib;
        kv_err err = {{0}};
        KV_CHECK(kv_library_load(root, problems[p], &lib, NULL, NULL, &err) == 0);
        for (int s = 0; s < lib.n; s++) {
            const kv_seed *seed = &lib.seeds[s];
            for (int k = 0; k < 30; k++) {
                kv_tpl_in in = {.lib = &lib, .pattern = seed->name, .parent_src = seed->src,
                                .parent_len = seed->len, .parent_id = 5, .target_cell = -1,
                                .op = KV_TPL_PERTURB};
                kv_proposal out;
                int rc = kv_template_propose(&in, &rng, &out, &err);
                if (seed->meta.n_params == 0) {
                    KV_CHECK(rc == 1);
                    break;
                }
                KV_CHECKF(rc == 0, "%s: %s", seed->name, err.msg);
                if (rc != 0)
                    break;
                kv_pattern_meta m;
                KV_CHECK(values_of(out.src, out.len, &m) == 0 && all_allowed(&m));
                int d = differences(&seed->meta, &m);
                KV_CHECKF(d == 1 || d == 2, "%s: %d parameters changed (%s)", seed->name, d,
                          out.note);
                one += d == 1;
                two += d == 2;
                KV_CHECK(strcmp(out.op, "perturb") == 0 && strcmp(out.model, seed->name) == 0);
                KV_CHECK(out.n_parents == 1 && out.parents[0] == 5 && out.note[0]);
                KV_CHECK(m.cell == seed->meta.cell);
                kv_proposal_free(&out);
            }
        }
        kv_library_free(&lib);
    }
    KV_CHECKF(one > 100 && two > 20, "one %d two %d", one, two);
}

static void test_determinism_and_recombine(void)
{
    kv_library lib;
    kv_err err = {{0}};
    KV_CHECK(kv_library_load(root, "allgather", &lib, NULL, NULL, &err) == 0);
    const kv_seed *seed = kv_library_find(&lib, "pull_sm");
    KV_CHECK(seed != NULL);
    if (!seed)
        return;
    /* the same random state, the same child */
    kv_rng a, b;
    kv_rng_seed(&a, 3);
    kv_rng_seed(&b, 3);
    kv_tpl_in in = {.lib = &lib, .pattern = "pull_sm", .parent_src = seed->src,
                    .parent_len = seed->len, .parent_id = 1, .target_cell = -1,
                    .op = KV_TPL_ANY};
    for (int k = 0; k < 20; k++) {
        kv_proposal x, y;
        KV_CHECK(kv_template_propose(&in, &a, &x, &err) == 0);
        KV_CHECK(kv_template_propose(&in, &b, &y, &err) == 0);
        KV_CHECK(x.len == y.len && memcmp(x.src, y.src, x.len) == 0);
        kv_proposal_free(&x);
        kv_proposal_free(&y);
    }
    /* a second parent two steps away: every child value comes from one of them */
    kv_proposal p1, p2;
    in.op = KV_TPL_PERTURB;
    KV_CHECK(kv_template_propose(&in, &a, &p1, &err) == 0);
    kv_tpl_in in2 = in;
    in2.parent_src = p1.src;
    in2.parent_len = p1.len;
    KV_CHECK(kv_template_propose(&in2, &a, &p2, &err) == 0);
    kv_pattern_meta m0, m2;
    KV_CHECK(values_of(seed->src, seed->len, &m0) == 0 && values_of(p2.src, p2.len, &m2) == 0);
    in.op = KV_TPL_RECOMBINE;
    in.other_src = p2.src;
    in.other_len = p2.len;
    in.other_id = 9;
    int made = 0;
    for (int k = 0; k < 20; k++) {
        kv_proposal c;
        int rc = kv_template_propose(&in, &a, &c, &err);
        if (differences(&m0, &m2) < 2) {
            KV_CHECK(rc == 1); /* nothing to mix */
            break;
        }
        KV_CHECKF(rc == 0, "%s", err.msg);
        if (rc != 0)
            break;
        kv_pattern_meta mc;
        KV_CHECK(values_of(c.src, c.len, &mc) == 0);
        for (int i = 0; i < mc.n_params; i++)
            KV_CHECK(mc.params[i].value == m0.params[i].value ||
                     mc.params[i].value == m2.params[i].value);
        KV_CHECK(differences(&mc, &m0) > 0 && differences(&mc, &m2) > 0);
        KV_CHECK(c.n_parents == 2 && c.parents[0] == 1 && c.parents[1] == 9);
        KV_CHECK(strcmp(c.op, "recombine") == 0);
        made++;
        kv_proposal_free(&c);
    }
    KV_CHECK(made == 20 || differences(&m0, &m2) < 2);
    kv_proposal_free(&p1);
    kv_proposal_free(&p2);
    kv_library_free(&lib);
}

static void test_sibling(void)
{
    kv_library lib;
    kv_err err = {{0}};
    KV_CHECK(kv_library_load(root, "allreduce", &lib, NULL, NULL, &err) == 0);
    const kv_seed *from = kv_library_find(&lib, "twoshot_sm");
    KV_CHECK(from != NULL);
    if (!from)
        return;
    kv_rng rng;
    kv_rng_seed(&rng, 4);
    int tma = kv_cell_parse("tma/fused"), ce = kv_cell_parse("ce/unfused");
    for (int t = 0; t < 2; t++) {
        int target = t ? ce : tma;
        kv_tpl_in in = {.lib = &lib, .pattern = "twoshot_sm", .parent_src = from->src,
                        .parent_len = from->len, .parent_id = 2, .target_cell = target,
                        .op = KV_TPL_SIBLING};
        kv_proposal out;
        KV_CHECKF(kv_template_propose(&in, &rng, &out, &err) == 0, "%s", err.msg);
        const kv_seed *to = kv_library_find(&lib, out.model);
        KV_CHECK(to != NULL && to->meta.cell == target && strcmp(out.op, "sibling") == 0);
        kv_pattern_meta m;
        KV_CHECK(values_of(out.src, out.len, &m) == 0 && all_allowed(&m) && m.cell == target);
        kv_proposal_free(&out);
    }
    /* with KV_TPL_ANY and an empty target cell that a seed is written for, siblings dominate */
    int siblings = 0;
    for (int k = 0; k < 50; k++) {
        kv_tpl_in in = {.lib = &lib, .pattern = "twoshot_sm", .parent_src = from->src,
                        .parent_len = from->len, .parent_id = 2, .target_cell = tma,
                        .op = KV_TPL_ANY};
        kv_proposal out;
        KV_CHECK(kv_template_propose(&in, &rng, &out, &err) == 0);
        siblings += strcmp(out.op, "sibling") == 0;
        kv_proposal_free(&out);
    }
    KV_CHECKF(siblings > 30 && siblings < 50, "%d siblings of 50", siblings);
    kv_library_free(&lib);
}

int main(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    snprintf(root, sizeof root, "%s/patterns", src);
    KV_RUN(test_library);
    KV_RUN(test_perturb);
    KV_RUN(test_determinism_and_recombine);
    KV_RUN(test_sibling);
    return kv_test_summary();
}
