/* test_problem.c — problem files (problem/problem.h): the shipped
 * problems/allreduce (load, shapes at W = 2, 4, 8, roofline), the fixture
 * tree tests/fixtures/problems (good problems load; every bad one fails with
 * the message listed in its EXPECTED file, naming the file and the JSON
 * path; kv_problems_load_all still loads the good ones), and variants of a
 * small problem written to a temporary folder for the remaining rules.
 *
 * Files are found below $KEVO_SOURCE_DIR (set by ctest), or "." without it. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/machine.h"
#include "problem/problem.h"
#include "test.h"
#include "test_util.h"

static const char *src_dir(void)
{
    const char *d = getenv("KEVO_SOURCE_DIR");
    return d && *d ? d : ".";
}

static void src_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", src_dir(), rel);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- problems/allreduce --------------------------------------------------- */

static void test_allreduce_loads(void)
{
    char dir[PATH_MAX];
    src_path(dir, sizeof dir, "problems/allreduce");
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    int rc = kv_problem_load(dir, p, &err);
    KV_CHECKF(rc == KV_OK, "%s", err.msg);
    if (rc != KV_OK) {
        free(p);
        return;
    }
    KV_CHECK(strcmp(p->name, "allreduce") == 0);
    KV_CHECK(strcmp(p->category, "collective") == 0);
    KV_CHECK(p->n_worlds == 3 && p->worlds[0] == 2 && p->worlds[1] == 4 && p->worlds[2] == 8);
    KV_CHECK(kv_problem_supports_world(p, 2) && kv_problem_supports_world(p, 8));
    KV_CHECK(!kv_problem_supports_world(p, 3) && !kv_problem_supports_world(p, 16));
    KV_CHECK(p->n_params == 1 && strcmp(p->param_names[0], "N") == 0);

    /* sizes: 64 KiB .. 256 MiB per rank, then one odd validation size */
    static const char *const names[] = {"64KiB", "1MiB", "16MiB", "256MiB"};
    static const int64_t bytes[] = {64 << 10, 1 << 20, 16 << 20, 256 << 20};
    KV_CHECK(p->n_sizes == 5);
    int n_valid = 0;
    for (int i = 0; i < p->n_sizes; i++)
        n_valid += p->sizes[i].validation;
    KV_CHECK(n_valid == 1);
    for (int i = 0; i < 4; i++) {
        int s = kv_problem_find_size(p, names[i]);
        KV_CHECKF(s >= 0, "size %s", names[i]);
        if (s < 0)
            continue;
        KV_CHECK(!p->sizes[s].validation);
        KV_CHECK(p->sizes[s].values[0] * 2 == bytes[i]);
    }
    int v = kv_problem_find_size(p, "validation");
    KV_CHECK(v >= 0 && p->sizes[v].validation);
    if (v >= 0) {
        KV_CHECK(p->sizes[v].values[0] % 2 == 1);
        KV_CHECK(p->sizes[v].values[0] % 8 != 0);
    }
    KV_CHECK(kv_problem_find_size(p, "nope") == -1);

    KV_CHECK(p->n_inputs == 1 && p->n_outputs == 1);
    KV_CHECK(p->inputs[0].dtype == KEVO_BF16 && p->outputs[0].dtype == KEVO_BF16);
    KV_CHECK(p->inputs[0].init == KV_INIT_NORMAL);
    KV_CHECK(p->inputs[0].init_a == 0 && p->inputs[0].init_b == 1);
    KV_CHECK(p->outputs[0].atol > 0 && p->outputs[0].rtol > 0);
    KV_CHECK(p->outputs[0].valid_rows_from[0] == '\0');
    KV_CHECK(p->tolerance_reason[0] != '\0');
    KV_CHECK(p->description && strlen(p->description) > 200);
    KV_CHECK_STR_CONTAINS(p->description, "read-only");
    KV_CHECK_STR_CONTAINS(p->description, "kevo_epoch_begin");
    KV_CHECK_STR_CONTAINS(p->description, "W is 2, 4 or 8");
    KV_CHECK(strstr(p->reference, "problems/allreduce/reference.cu") != NULL);
    KV_CHECK(p->inputs_hook[0] == '\0');
    KV_CHECK(strstr(p->check, "problems/allreduce/check.c") != NULL); /* the host check */
    struct stat st;
    KV_CHECK(stat(p->reference, &st) == 0);
    kv_problem_free(p);
    kv_problem_free(p); /* twice is harmless */
    free(p);
}

static void test_allreduce_shapes(void)
{
    char dir[PATH_MAX];
    src_path(dir, sizeof dir, "problems/allreduce");
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    if (kv_problem_load(dir, p, &err) != KV_OK) {
        KV_CHECKF(0, "%s", err.msg);
        free(p);
        return;
    }
    static const int worlds[] = {2, 4, 8};
    for (int w = 0; w < 3; w++) {
        for (int s = 0; s < p->n_sizes; s++) {
            kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
            int rc = kv_problem_shapes(p, s, worlds[w], in, out, &err);
            KV_CHECKF(rc == KV_OK, "%s", err.msg);
            int64_t n = p->sizes[s].values[0];
            KV_CHECK(in[0].ndim == 1 && in[0].shape[0] == n && in[0].numel == n);
            KV_CHECK(in[0].bytes == (size_t)n * 2);
            KV_CHECK(out[0].ndim == 1 && out[0].shape[0] == n && out[0].bytes == (size_t)n * 2);
        }
    }
    kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
    KV_CHECK(kv_problem_shapes(p, 0, 3, in, out, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "problem allreduce does not support W=3 (its worlds: 2, 4, 8)");
    KV_CHECK(kv_problem_shapes(p, 7, 2, in, out, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "no size #7");
    kv_problem_free(p);
    free(p);
}

/* Where the reference runs (kv_shapes_ref_plain): allreduce's timed sizes
 * stay in the window at every W, its odd validation size does not;
 * nccl_misaligned's validation size (a 15,022-byte y at W = 2) does not. */
static void test_reference_placement(void)
{
    static const char *const dirs[] = {"problems/allreduce", "tests/gpu_problems/nccl_misaligned"};
    for (int d = 0; d < 2; d++) {
        char dir[PATH_MAX];
        src_path(dir, sizeof dir, dirs[d]);
        kv_problem *p = calloc(1, sizeof *p);
        kv_err err = {{0}};
        KV_REQUIRE(p != NULL);
        if (kv_problem_load(dir, p, &err) != KV_OK) {
            KV_CHECKF(0, "%s", err.msg);
            free(p);
            return;
        }
        for (int w = 2; w <= 8; w *= 2) {
            for (int s = 0; s < p->n_sizes; s++) {
                kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
                KV_REQUIRE(kv_problem_shapes(p, s, w, in, out, &err) == KV_OK);
                int plain = kv_shapes_ref_plain(p, in, out, w);
                KV_CHECKF(plain == p->sizes[s].validation, "%s %s W=%d: plain %d", p->name,
                          p->sizes[s].name, w, plain);
                /* 8 x W bytes off a multiple of 16 x W, and the reference leaves */
                in[0].bytes = 16u * (size_t)w * 1000 + (size_t)w * 8;
                KV_CHECK(kv_shapes_ref_plain(p, in, out, w) == 1);
            }
        }
        kv_problem_free(p);
        free(p);
    }
}

static int near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

/* The floor takes the slowest of link, compute and HBM at the physical
 * ceilings, less the margin. */
static void test_floor(void)
{
    const double m = 1 - KV_FLOOR_MARGIN;
    KV_CHECK(KV_FLOOR_MARGIN == 0.10 && KV_FLOOR_LINK_BYTES_PER_S == 386e9 &&
             KV_FLOOR_HBM_BYTES_PER_S == 4.8e12 && KV_FLOOR_BF16_FLOPS_PER_S == 989e12);
    KV_CHECK(kv_roofline_floor_s(0, 0, 0, 0) == 0);
    /* the larger of send and receive crosses the link */
    KV_CHECK(near(kv_roofline_floor_s(386e6, 1, 0, 0), 1e-3 * m, 1e-12));
    KV_CHECK(near(kv_roofline_floor_s(1, 772e6, 0, 0), 2e-3 * m, 1e-12));
    /* compute bound: 989 GFLOP is 1 ms; HBM bound: 9.6 GB is 2 ms */
    KV_CHECK(near(kv_roofline_floor_s(386e3, 386e3, 989e9, 0), 1e-3 * m, 1e-12));
    KV_CHECK(near(kv_roofline_floor_s(386e3, 386e3, 989e9, 9.6e9), 2e-3 * m, 1e-12));
}

static void test_allreduce_roofline(void)
{
    char dir[PATH_MAX];
    src_path(dir, sizeof dir, "problems/allreduce");
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    if (kv_problem_load(dir, p, &err) != KV_OK) {
        KV_CHECKF(0, "%s", err.msg);
        free(p);
        return;
    }
    int s = kv_problem_find_size(p, "256MiB");
    KV_REQUIRE(s >= 0);
    kv_roofline r;
    KV_CHECKF(kv_problem_roofline(p, s, 2, &r, &err) == KV_OK, "%s", err.msg);
    /* each rank sends and receives half the buffer twice: 256 MiB in all */
    double want = 2 * (1.0 / 2) * 268435456.0 / 478e9;
    KV_CHECKF(near(r.seconds, want, 1e-12), "%.9g s vs %.9g s", r.seconds, want);
    KV_CHECKF(r.seconds > 561e-6 && r.seconds < 562e-6, "%.3f us", r.seconds * 1e6);
    KV_CHECK(r.send_bytes == 268435456.0 && r.recv_bytes == 268435456.0);
    KV_CHECK(r.link_s == r.seconds && r.hbm_s < r.link_s && r.compute_s < r.link_s);
    KV_CHECK(near(r.hbm_s, 4.0 * 134217728 / KV_HBM_BYTES_PER_S, 1e-12));
    KV_CHECK(near(r.compute_s, 134217728.0 / 2 / KV_BF16_FLOPS_PER_S, 1e-12));
    /* the floor: the link's practical ceiling (386 GB/s) less the 10% margin, 626 us */
    KV_CHECKF(near(r.floor_s, 268435456.0 / 386e9 * 0.9, 1e-12), "floor %.3f us", r.floor_s * 1e6);
    KV_CHECK(r.floor_s > r.seconds);

    /* W = 8: 2 * 7/8 of the buffer */
    KV_CHECKF(kv_problem_roofline(p, s, 8, &r, &err) == KV_OK, "%s", err.msg);
    KV_CHECK(near(r.seconds, 2 * (7.0 / 8) * 268435456.0 / 478e9, 1e-12));
    /* 64 KiB at W = 4: 2 * 3/4 * 64 KiB */
    int small = kv_problem_find_size(p, "64KiB");
    KV_CHECKF(kv_problem_roofline(p, small, 4, &r, &err) == KV_OK, "%s", err.msg);
    KV_CHECK(r.send_bytes == 98304.0);
    KV_CHECK(near(r.seconds, 98304.0 / 478e9, 1e-12));

    KV_CHECK(kv_problem_roofline(p, s, 16, &r, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "does not support W=16");
    KV_CHECK(kv_problem_roofline(p, -1, 2, &r, &err) == KV_FAIL);
    kv_problem_free(p);
    free(p);
}

/* ---- the fixture tree --------------------------------------------------------- */

#define MAX_EXPECT 64

typedef struct {
    char folder[64];
    char substring[512];
} expectation;

static int read_expected(expectation *e, int cap)
{
    char path[PATH_MAX];
    src_path(path, sizeof path, "tests/fixtures/problems/EXPECTED");
    char *text = NULL;
    size_t len;
    kv_err err = {{0}};
    if (kv_read_file(path, &text, &len, &err) != KV_OK) {
        KV_CHECKF(0, "%s", err.msg);
        return 0;
    }
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *tab = strchr(line, '\t');
        KV_CHECKF(tab != NULL, "EXPECTED line without a tab: %s", line);
        if (!tab || n == cap)
            continue;
        *tab = '\0';
        snprintf(e[n].folder, sizeof e[n].folder, "%s", line);
        snprintf(e[n].substring, sizeof e[n].substring, "%s", tab + 1);
        n++;
    }
    free(text);
    return n;
}

static void test_fixtures_bad(void)
{
    static expectation exp[MAX_EXPECT];
    int n = read_expected(exp, MAX_EXPECT);
    KV_CHECK(n >= 10);
    kv_problem *p = calloc(1, sizeof *p);
    for (int i = 0; i < n; i++) {
        char rel[128], dir[PATH_MAX];
        snprintf(rel, sizeof rel, "tests/fixtures/problems/%.80s", exp[i].folder);
        src_path(dir, sizeof dir, rel);
        kv_err err = {{0}};
        int rc = kv_problem_load(dir, p, &err);
        KV_CHECKF(rc == KV_FAIL, "%s loaded", exp[i].folder);
        char json[PATH_MAX + 32], ref[PATH_MAX + 32];
        snprintf(json, sizeof json, "%s/problem.json: ", dir);
        snprintf(ref, sizeof ref, "%s/reference.cu: ", dir);
        KV_CHECKF(starts_with(err.msg, json) || starts_with(err.msg, ref),
                  "%s: message does not start with the file: %s", exp[i].folder, err.msg);
        KV_CHECKF(strstr(err.msg, exp[i].substring) != NULL, "%s:\n  got  %s\n  want %s",
                  exp[i].folder, err.msg, exp[i].substring);
        KV_CHECK(p->description == NULL && p->name[0] == '\0'); /* nothing left behind */
    }
    free(p);

    /* every bad_* folder is listed */
    char root[PATH_MAX];
    src_path(root, sizeof root, "tests/fixtures/problems");
    DIR *d = opendir(root);
    KV_REQUIRE(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "bad_", 4) != 0)
            continue;
        int listed = 0;
        for (int i = 0; i < n && !listed; i++)
            listed = strcmp(exp[i].folder, de->d_name) == 0;
        KV_CHECKF(listed, "%s is not in EXPECTED", de->d_name);
    }
    closedir(d);
}

static kv_problem *load_fixture(const char *name)
{
    char rel[128], dir[PATH_MAX];
    snprintf(rel, sizeof rel, "tests/fixtures/problems/%s", name);
    src_path(dir, sizeof dir, rel);
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    if (kv_problem_load(dir, p, &err) != KV_OK) {
        KV_CHECKF(0, "%s: %s", name, err.msg);
        free(p);
        return NULL;
    }
    return p;
}

static void test_fixtures_good(void)
{
    kv_problem *p = load_fixture("good_basic");
    KV_REQUIRE(p != NULL);
    KV_CHECK(strcmp(p->category, "tensor-parallel") == 0);
    KV_CHECK(p->n_params == 2 && strcmp(p->param_names[1], "H") == 0);
    KV_CHECK(strcmp(p->outputs[0].valid_rows_from, "count") == 0);
    KV_CHECK(p->outputs[1].dtype == KEVO_I32 && p->outputs[1].atol == 0);
    KV_CHECK(strcmp(p->outputs[1].shape[0], "1") == 0); /* a number, kept as text */
    KV_CHECK(p->tolerance_reason[0] == '\0');           /* not needed at atol = rtol = 0 */
    KV_CHECK(p->cost_hbm_bytes[0] == '\0');
    kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
    kv_err err = {{0}};
    int v = kv_problem_find_size(p, "validation");
    KV_CHECK(kv_problem_shapes(p, v, 8, in, out, &err) == KV_OK);
    KV_CHECK(in[0].ndim == 2 && in[0].shape[0] == 17 && in[0].shape[1] == 72);
    KV_CHECK(in[0].numel == 17 * 72 && in[0].bytes == 17 * 72 * 2);
    KV_CHECK(out[0].shape[0] == 136 && out[1].numel == 1 && out[1].bytes == 4);
    kv_roofline r;
    KV_CHECK(kv_problem_roofline(p, v, 8, &r, &err) == KV_OK);
    KV_CHECK(r.send_bytes == 7 * 17 * 72 * 2 && r.hbm_s == 0 && r.compute_s == 0);
    kv_problem_free(p);
    free(p);

    p = load_fixture("good_hook");
    KV_REQUIRE(p != NULL);
    KV_CHECK(strcmp(p->description, "Fixture with an inputs.cu hook:\nrouting targets agree on "
                                    "all ranks.") == 0);
    KV_CHECK(strstr(p->inputs_hook, "good_hook/inputs.cu") != NULL);
    KV_CHECK(p->inputs[0].init == KV_INIT_UNIFORM && p->inputs[0].init_a == -1 &&
             p->inputs[0].init_b == 1);
    KV_CHECK(p->inputs[1].init == KV_INIT_INT_RANGE && strcmp(p->inputs[1].init_high, "8") == 0);
    KV_CHECK(p->inputs[1].same_on_all_ranks && !p->inputs[0].same_on_all_ranks);
    KV_CHECK(p->inputs[2].init == KV_INIT_HOOK && p->inputs[3].init == KV_INIT_ZEROS);
    KV_CHECK(p->inputs[3].dtype == KEVO_FP8_E4M3);
    KV_CHECK(p->outputs[0].dtype == KEVO_F16);
    int c = kv_problem_find_size(p, "c");
    KV_CHECK(kv_problem_shapes(p, c, 8, in, out, &err) == KV_OK);
    KV_CHECK(in[3].shape[0] == 512 && in[3].bytes == 512);
    KV_CHECK(out[0].shape[0] == 4096 && out[0].shape[1] == 64); /* min(4096*4, 4096) */
    int vs = kv_problem_find_size(p, "v");
    KV_CHECK(kv_problem_shapes(p, vs, 8, in, out, &err) == KV_OK);
    KV_CHECK(in[3].shape[0] == 25 && out[0].shape[0] == 400);
    kv_problem_free(p);
    free(p);
}

typedef struct {
    int n;
    char msgs[32][1024];
} error_list;

static void collect(const char *msg, void *ctx)
{
    error_list *l = ctx;
    if (l->n < 32)
        snprintf(l->msgs[l->n], sizeof l->msgs[l->n], "%s", msg);
    l->n++;
}

static void test_load_all(void)
{
    char root[PATH_MAX];
    src_path(root, sizeof root, "tests/fixtures/problems");
    static error_list errs;
    memset(&errs, 0, sizeof errs);
    kv_problem *v = NULL;
    kv_err err = {{0}};
    int n = kv_problems_load_all(root, &v, collect, &errs, &err);
    KV_CHECKF(n == 2, "loaded %d: %s", n, err.msg);
    if (n == 2) {
        KV_CHECK(strcmp(v[0].name, "good_basic") == 0); /* name order */
        KV_CHECK(strcmp(v[1].name, "good_hook") == 0);
    }
    kv_problems_free(v, n);

    /* one message per bad_* folder, in name order; not_a_problem is skipped */
    int bad = 0;
    DIR *d = opendir(root);
    KV_REQUIRE(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        bad += strncmp(de->d_name, "bad_", 4) == 0;
    closedir(d);
    KV_CHECKF(errs.n == bad, "%d errors for %d bad problems", errs.n, bad);
    char prefix[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s/bad_", root);
    for (int i = 0; i < errs.n && i < 32; i++) {
        KV_CHECKF(starts_with(errs.msgs[i], prefix), "%s", errs.msgs[i]);
        if (i > 0)
            KV_CHECK(strcmp(errs.msgs[i - 1], errs.msgs[i]) < 0);
        KV_CHECK(strstr(errs.msgs[i], "not_a_problem") == NULL);
    }

    /* without a callback, failures are skipped quietly */
    n = kv_problems_load_all(root, &v, NULL, NULL, &err);
    KV_CHECK(n == 2);
    kv_problems_free(v, n);

    /* the shipped problems all load */
    src_path(root, sizeof root, "problems");
    memset(&errs, 0, sizeof errs);
    n = kv_problems_load_all(root, &v, collect, &errs, &err);
    KV_CHECKF(n >= 1 && errs.n == 0, "%d loaded; first error: %s", n, errs.msgs[0]);
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= strcmp(v[i].name, "allreduce") == 0;
    KV_CHECK(found);
    kv_problems_free(v, n);

    /* a root that cannot be read */
    v = (kv_problem *)&err; /* must be reset */
    n = kv_problems_load_all("/nonexistent/kevo-problems", &v, collect, &errs, &err);
    KV_CHECK(n == -1 && v == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "open problems folder /nonexistent/kevo-problems: ");

    /* an empty root */
    char empty[PATH_MAX];
    kv_test_fresh_dir(empty, sizeof empty, "problems-empty");
    n = kv_problems_load_all(empty, &v, collect, &errs, &err);
    KV_CHECK(n == 0 && v == NULL);
}

/* ---- rules, through variants of one small problem -------------------------- */

static const char base_json[] =
    "{\n"
    "  \"name\": \"tp\",\n"
    "  \"category\": \"collective\",\n"
    "  \"description\": \"y = x\",\n"
    "  \"worlds\": [2, 4],\n"
    "  \"params\": [\"N\"],\n"
    "  \"sizes\": [\n"
    "    {\"name\": \"a\", \"N\": 16}, {\"name\": \"b\", \"N\": 32}, {\"name\": \"c\", \"N\": "
    "64},\n"
    "    {\"name\": \"v\", \"N\": 24, \"validation\": true}\n"
    "  ],\n"
    "  \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"],\n"
    "              \"init\": {\"kind\": \"normal\", \"mean\": 0, \"std\": 1}}],\n"
    "  \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"atol\": 0, "
    "\"rtol\": 0}],\n"
    "  \"cost\": {\"send_bytes\": \"4 * N\", \"recv_bytes\": \"4 * N\", \"flops\": \"0\"}\n"
    "}\n";

static char tmp_root[PATH_MAX];

/* Writes base_json with the first `from` replaced by `to` as <tmp>/tp and
 * loads it. */
static int load_variant(const char *from, const char *to, kv_problem *p, kv_err *err)
{
    if (!tmp_root[0])
        kv_test_fresh_dir(tmp_root, sizeof tmp_root, "problem");
    char dir[PATH_MAX + 8], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/tp", tmp_root);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/reference.cu", dir);
    if (kv_write_file_atomic(path, "// ref\n", 7, err))
        return KV_FAIL;
    static char text[8192];
    const char *at = from ? strstr(base_json, from) : NULL;
    if (from && !at) {
        fprintf(stderr, "test bug: \"%s\" is not in the base problem\n", from);
        return kv_err_set(err, "test bug");
    }
    if (at)
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - base_json), base_json, to,
                 at + strlen(from));
    else
        snprintf(text, sizeof text, "%s", base_json);
    snprintf(path, sizeof path, "%s/problem.json", dir);
    if (kv_write_file_atomic(path, text, strlen(text), err))
        return KV_FAIL;
    return kv_problem_load(dir, p, err);
}

static void variant_fails(const char *from, const char *to, const char *want)
{
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    int rc = load_variant(from, to, p, &err);
    KV_CHECKF(rc == KV_FAIL, "\"%s\" -> \"%s\" loaded", from, to);
    KV_CHECKF(strstr(err.msg, want) != NULL, "\"%s\" -> \"%s\":\n  got  %s\n  want %s", from, to,
              err.msg, want);
    KV_CHECKF(strstr(err.msg, "/tp/problem.json: ") != NULL, "no file in: %s", err.msg);
    kv_problem_free(p);
    free(p);
}

static void test_rules(void)
{
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    KV_CHECKF(load_variant(NULL, NULL, p, &err) == KV_OK, "%s", err.msg);
    kv_problem_free(p);
    /* a byte-order mark is fine */
    KV_CHECKF(load_variant("{\n  \"name\"", "\xEF\xBB\xBF{\n  \"name\"", p, &err) == KV_OK, "%s",
              err.msg);
    kv_problem_free(p);
    free(p);

    /* the document */
    variant_fails("{\n  \"name\"", "[{\n  \"name\"", "invalid JSON at line");
    variant_fails(base_json, "", "empty file; expected a JSON object");
    variant_fails(base_json, "[1, 2]", "$: expected an object, got an array");
    variant_fails("\"cost\": {", "\"cost\": {\"cost\": 1, ", "$.cost.cost: unknown key");
    variant_fails("\"worlds\"", "\"name\": \"tp\", \"worlds\"", "$.name: duplicate key");
    variant_fails("\"params\"", "\"extra\": 1, \"params\"",
                  "$.extra: unknown key (valid keys here: name, category, description");
    variant_fails("\"description\": \"y = x\",\n", "", "$.description: required key is missing");
    variant_fails("\"cost\": {\"send_bytes\": \"4 * N\", ", "\"cost\": {",
                  "$.cost.send_bytes: required key is missing");
    /* a NUL character (\u0000) anywhere is refused with its path, not cut at */
    variant_fails("\"name\": \"tp\"", "\"name\": \"tp\\u0000x\"",
                  "$.name: contains a NUL character (\\u0000)");
    variant_fails("\"shape\": [\"N\"]", "\"shape\": [\"N\\u0000+1\"]",
                  "$.inputs[0].shape[0]: contains a NUL character (\\u0000)");
    variant_fails("\"description\": \"y = x\"", "\"description\": [\"y\", \"\\u0000\"]",
                  "$.description[1]: contains a NUL character (\\u0000)");
    variant_fails("\"cost\": {", "\"cost\": {\"x\\u0000\": 1, ", "$.cost: a key contains a NUL");
    /* nesting deeper than the strict readers allow says so */
    {
        static char deep[2 * 1001 + 32];
        int o = snprintf(deep, sizeof deep, "\"scratch_bytes\": ");
        memset(deep + o, '[', 1001);
        memset(deep + o + 1001, ']', 1001);
        memcpy(deep + o + 2002, ", \"worlds\"", 11);
        variant_fails("\"worlds\"", deep,
                      "nested too deep (more than 64 levels) at line 5, column");
    }
    /* values */
    variant_fails("\"name\": \"tp\"", "\"name\": 7", "$.name: expected a string, got a number");
    variant_fails("\"description\": \"y = x\"", "\"description\": \"  \"",
                  "$.description: must not be empty");
    variant_fails("\"description\": \"y = x\"", "\"description\": [\"a\", 2]",
                  "$.description[1]: expected a string (one line of text), got a number");
    variant_fails("\"worlds\": [2, 4]", "\"worlds\": [4, 2]",
                  "$.worlds[1]: world sizes must be listed once each, in increasing order");
    variant_fails("\"worlds\": [2, 4]", "\"worlds\": [2, 16]",
                  "$.worlds[1]: 16 is out of range (2..8)");
    variant_fails("\"worlds\": [2, 4]", "\"worlds\": [2.5]",
                  "$.worlds[0]: expected an integer, "
                  "got 2.5");
    variant_fails("\"worlds\": [2, 4]", "\"worlds\": []", "$.worlds: must list at least one");
    variant_fails("\"params\": [\"N\"]", "\"params\": [\"N\", \"W\"]",
                  "$.params[1]: \"W\" is the world size");
    variant_fails("\"params\": [\"N\"]", "\"params\": [\"N\", \"N\"]",
                  "$.params[1]: parameter \"N\" is listed twice");
    variant_fails("\"params\": [\"N\"]", "\"params\": [\"2N\"]",
                  "$.params[0]: \"2N\" is not a valid parameter name");
    variant_fails("\"params\": [\"N\"]", "\"params\": [\"max\"]",
                  "$.params[0]: \"max\" is a function of expressions");
    variant_fails("{\"name\": \"a\", \"N\": 16}", "{\"name\": \"a\", \"n\": 16}",
                  "$.sizes[0].n: unknown key; did you mean \"N\"?");
    variant_fails("{\"name\": \"a\", \"N\": 16}", "{\"name\": \"a\", \"N\": -16}",
                  "$.sizes[0].N: -16 is out of range (0..2^53-1)");
    variant_fails("{\"name\": \"b\", \"N\": 32}", "{\"name\": \"a\", \"N\": 32}",
                  "$.sizes[1]: size name \"a\" is used twice");
    variant_fails("{\"name\": \"b\", \"N\": 32}", "{\"name\": \"b c\", \"N\": 32}",
                  "$.sizes[1].name: \"b c\" is not a valid size name");
    variant_fails("\"validation\": true", "\"validation\": 1",
                  "$.sizes[3].validation: expected true or false, got a number");
    variant_fails("\"dtype\": \"f32\", \"shape\": [\"N\"],\n",
                  "\"dtype\": \"f32\", \"shape\": "
                  "[],\n",
                  "$.inputs[0].shape: must have at least one dimension");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [\"N\", 1, 1, 1, 1],\n",
                  "$.inputs[0].shape[4]: too many dimensions (at most 4)");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [true],\n",
                  "$.inputs[0].shape[0]: expected an expression (a string such as \"N/W\") or an "
                  "integer, got a boolean");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [\"N +\"],\n",
                  "$.inputs[0].shape[0]: expected a number, a name or '(', found end of "
                  "expression in \"N +\" (column 4)");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [\"N - 20\"],\n",
                  "$.inputs[0].shape[0]: size \"a\" at W=2: \"N - 20\" is -4; every dimension "
                  "must be positive");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [\"N * 4611686018427387904\"],\n",
                  "$.inputs[0].shape[0]: size \"a\" at W=2: 64-bit overflow in multiplication");
    variant_fails("\"shape\": [\"N\"],\n", "\"shape\": [\"N * 288230376151711744\", 8],\n",
                  "$.inputs[0]: size \"a\" at W=2: the element count overflows 64 bits");
    variant_fails("\"mean\": 0, \"std\": 1", "\"mean\": 0, \"std\": 0",
                  "$.inputs[0].init.std: must be positive");
    variant_fails("\"mean\": 0, \"std\": 1", "\"mean\": 0",
                  "$.inputs[0].init.std: required key "
                  "is missing");
    variant_fails("\"mean\": 0, \"std\": 1", "\"mean\": 0, \"std\": 1, \"low\": 0",
                  "$.inputs[0].init.low: unknown key (valid keys here: kind, mean, std)");
    variant_fails("\"kind\": \"normal\", \"mean\": 0, \"std\": 1",
                  "\"kind\": \"uniform\", \"low\": 1, \"high\": 1",
                  "$.inputs[0].init.high: must be greater than low");
    variant_fails("\"kind\": \"normal\", \"mean\": 0, \"std\": 1", "\"kind\": \"gauss\"",
                  "$.inputs[0].init.kind: unknown init kind \"gauss\"; expected one of normal, "
                  "uniform, int_range, zeros, hook");
    variant_fails("\"kind\": \"normal\", \"mean\": 0, \"std\": 1",
                  "\"kind\": \"int_range\", \"low\": 0, \"high\": 4",
                  "$.inputs[0].init.kind: \"int_range\" fills integer tensors (i32, i64); this one "
                  "is f32");
    variant_fails("\"dtype\": \"f32\", \"shape\": [\"N\"],\n              \"init\": {\"kind\": "
                  "\"normal\", \"mean\": 0, \"std\": 1}",
                  "\"dtype\": \"i32\", \"shape\": [\"N\"],\n              \"init\": {\"kind\": "
                  "\"int_range\", \"low\": 0, \"high\": 2147483649}",
                  "$.inputs[0].init.high: 2147483649 is out of range (-2147483648..2147483648)");
    variant_fails("\"init\"", "\"same_on_all_ranks\": \"yes\", \"init\"",
                  "$.inputs[0].same_on_all_ranks: expected true or false, got a string");
    variant_fails("\"atol\": 0, ", "", "$.outputs[0].atol: required key is missing");
    variant_fails("\"atol\": 0, ", "\"atol\": -1, ", "$.outputs[0].atol: must be >= 0");
    variant_fails("\"atol\": 0, ", "\"atol\": 0, \"init\": {}, ",
                  "$.outputs[0].init: unknown key (valid keys here: name, dtype, shape, atol, "
                  "rtol, valid_rows_from)");
    variant_fails("\"name\": \"y\"", "\"name\": \"x\"",
                  "$.outputs[0].name: \"x\" is already the name of $.inputs[0]");
    variant_fails("\"rtol\": 0}", "\"rtol\": 0, \"valid_rows_from\": \"z\"}",
                  "$.outputs[0].valid_rows_from: unknown output \"z\"; expected one of y");
    variant_fails("\"rtol\": 0}", "\"rtol\": 0, \"valid_rows_from\": \"y\"}",
                  "$.outputs[0].valid_rows_from: \"y\" names this output itself");
    variant_fails("\"rtol\": 0}", "\"rtol\": 0.5}", "$.tolerance_reason: required key is missing");
    variant_fails("\"flops\": \"0\"", "\"flops\": \"N - 100\"",
                  "$.cost.flops: size \"a\" at W=2: \"N - 100\" is -84; it cannot be negative");
    variant_fails("\"flops\": \"0\"", "\"flops\": \"N / (W - 2)\"",
                  "$.cost.flops: size \"a\" at W=2: division by zero in \"N / (W - 2)\"");
    variant_fails("\"category\": \"collective\"", "\"category\": \"Collective\"",
                  "(did you mean \"collective\"?)");
    variant_fails("\"atol\": 0, ", "\"atol\": {\"2\": 0}, ",
                  "$.outputs[0].atol: no value for W=4, one of the problem's worlds");
    variant_fails("\"atol\": 0, ", "\"atol\": {\"2\": 0, \"4\": 0, \"8\": 0}, ",
                  "$.outputs[0].atol: a value for W=8, which is not one of the problem's worlds");
    variant_fails("\"atol\": 0, ", "\"atol\": {\"two\": 0}, ",
                  "$.outputs[0].atol.two: expected a world size (2..8) as the key");
    variant_fails("\"atol\": 0, ", "\"atol\": {\"2\": 0, \"4\": -1}, ",
                  "$.outputs[0].atol[\"4\"]: must be >= 0");

    /* accepted forms: numbers as expressions, description lines, cost division
     * that is not exact (costs need not divide evenly) */
    p = calloc(1, sizeof *p);
    KV_CHECKF(load_variant("\"flops\": \"0\"", "\"flops\": \"N / 3\", \"hbm_bytes\": 1000", p,
                           &err) == KV_OK,
              "%s", err.msg);
    KV_CHECK(strcmp(p->cost_hbm_bytes, "1000") == 0);
    kv_roofline r;
    KV_CHECK(kv_problem_roofline(p, 0, 2, &r, &err) == KV_OK && r.flops == 5 &&
             r.hbm_bytes == 1000);
    kv_problem_free(p);
    KV_CHECKF(load_variant("\"rtol\": 0}",
                           "\"rtol\": 0.5}], \"tolerance_reason\": [\"one\", "
                           "\"two\"], \"outputs2\": [0",
                           p, &err) == KV_FAIL,
              "loaded");
    KV_CHECK_STR_CONTAINS(err.msg, "$.outputs2: unknown key; did you mean \"outputs\"?");
    KV_CHECKF(load_variant("\"rtol\": 0}]",
                           "\"rtol\": 0.5}], \"tolerance_reason\": [\"one\", "
                           "\"two\"]",
                           p, &err) == KV_OK,
              "%s", err.msg);
    KV_CHECK(strcmp(p->tolerance_reason, "one\ntwo") == 0);
    kv_problem_free(p);

    /* tolerances per world: exact at W=2, loose at W=4 */
    KV_CHECKF(load_variant("\"atol\": 0, \"rtol\": 0}]",
                           "\"atol\": {\"4\": 0.5, \"2\": 0}, \"rtol\": 0.25}], "
                           "\"tolerance_reason\": \"order\"",
                           p, &err) == KV_OK,
              "%s", err.msg);
    double atol = -1, rtol = -1;
    kv_tensor_tolerance(&p->outputs[0], 2, &atol, &rtol);
    KV_CHECK(atol == 0 && rtol == 0.25);
    kv_tensor_tolerance(&p->outputs[0], 4, &atol, &rtol);
    KV_CHECK(atol == 0.5 && rtol == 0.25);
    KV_CHECK(p->outputs[0].atol == 0.5); /* the largest */
    kv_problem_free(p);

    /* the scratch a problem asks for: none by default, else its expression */
    int64_t scratch = -1;
    KV_CHECKF(load_variant(NULL, NULL, p, &err) == KV_OK, "%s", err.msg);
    KV_CHECK(kv_problem_scratch_bytes(p, 1, 4, &scratch, &err) == KV_OK && scratch == 0);
    kv_problem_free(p);
    KV_CHECKF(load_variant("\"cost\": {", "\"scratch_bytes\": \"4 * N * W\", \"cost\": {", p,
                           &err) == KV_OK,
              "%s", err.msg);
    KV_CHECK(kv_problem_scratch_bytes(p, 1, 4, &scratch, &err) == KV_OK && scratch == 4 * 32 * 4);
    KV_CHECK(kv_problem_scratch_bytes(p, 1, 8, &scratch, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "W=8");
    kv_problem_free(p);
    free(p);
    variant_fails("\"cost\": {", "\"scratch_bytes\": \"N - 20\", \"cost\": {",
                  "$.scratch_bytes: size \"a\" at W=2: \"N - 20\" is -4; it cannot be negative");
    variant_fails("\"cost\": {", "\"scratch_bytes\": \"4 * M\", \"cost\": {", "$.scratch_bytes: ");
}

static void test_names(void)
{
    static const char *const names[] = {"bf16", "f16", "f32", "i32", "i64", "fp8_e4m3"};
    for (int i = 0; i < KEVO_DTYPE_COUNT; i++) {
        kevo_dtype t;
        KV_CHECK(strcmp(kv_dtype_name((kevo_dtype)i), names[i]) == 0);
        KV_CHECK(kv_dtype_parse(names[i], &t) == 0 && t == (kevo_dtype)i);
    }
    kevo_dtype t = KEVO_F32;
    KV_CHECK(kv_dtype_parse("bf17", &t) == -1 && t == KEVO_F32);
    KV_CHECK(kv_dtype_parse("BF16", &t) == -1);
    KV_CHECK(strcmp(kv_dtype_name(KEVO_DTYPE_COUNT), "?") == 0);
    KV_CHECK(strcmp(kv_init_name(KV_INIT_INT_RANGE), "int_range") == 0);
    KV_CHECK(strcmp(kv_init_name((kv_init_kind)99), "?") == 0);
}

static void test_default_root(void)
{
    char buf[PATH_MAX];
    setenv("KEVO_PROBLEMS", "/some/where", 1);
    KV_CHECK(strcmp(kv_problems_default_root(buf, sizeof buf), "/some/where") == 0);
    unsetenv("KEVO_PROBLEMS");
    kv_problems_default_root(buf, sizeof buf);
    KV_CHECK(strstr(buf, "problems") != NULL);
}

/* The GPU test's problem: a permutation input and an inputs.cu hook. */
static void test_permutation_and_hook(void)
{
    char dir[PATH_MAX];
    src_path(dir, sizeof dir, "tests/gpu_problems/gather_hook");
    kv_problem *p = calloc(1, sizeof *p);
    kv_err err = {{0}};
    KV_REQUIRE(p);
    KV_CHECKF(kv_problem_load(dir, p, &err) == 0, "%s", err.msg);
    int64_t lo = -1, hi = -1;
    KV_CHECK(p->inputs[1].init == KV_INIT_PERMUTATION);
    KV_CHECKF(kv_problem_init_range(p, 1, 0, 2, &lo, &hi, &err) == 0, "%s", err.msg);
    KV_CHECKF(lo == 0 && hi == 8, "range [%lld, %lld) of min(8, T)", (long long)lo, (long long)hi);
    KV_CHECK(kv_problem_init_range(p, 0, 0, 2, &lo, &hi, &err) != 0); /* x is normal */
    KV_CHECK(p->inputs[2].init == KV_INIT_HOOK && strstr(p->inputs_hook, "inputs.cu"));
    kv_problem_free(p);
    free(p);
}

int main(void)
{
    KV_RUN(test_allreduce_loads);
    KV_RUN(test_permutation_and_hook);
    KV_RUN(test_allreduce_shapes);
    KV_RUN(test_reference_placement);
    KV_RUN(test_floor);
    KV_RUN(test_allreduce_roofline);
    KV_RUN(test_fixtures_bad);
    KV_RUN(test_fixtures_good);
    KV_RUN(test_load_all);
    KV_RUN(test_rules);
    KV_RUN(test_names);
    KV_RUN(test_default_root);
    return kv_test_summary();
}
