/* test_pattern.c — the pattern library on the CPU:
 *  - the annotation parser (mutate/pattern.h) on hand-written sources: what it
 *    accepts, each error with its line, and rewriting a parameter;
 *  - every seed under patterns/<problem>/: its annotations parse, its
 *    problem exists, its #define lines hold the defaults, it compiles with
 *    the evaluator's flags, and the evidence of the compiled object (SASS,
 *    PTX, imports) agrees with the cell it claims, and it never reads
 *    ctx->call_index (ABI 2: epochs and buffer parity come from the device,
 *    or a call replayed from a CUDA graph repeats them). Nothing runs: nvcc
 *    needs no GPU. (The captured launch graph, which decides a copy-engine
 *    seed's transport for good, exists only on the GPUs.)
 *
 *   test_pattern [problem ...]   only the seeds of these problems */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/checks/classify.h"
#include "evaluator/evaluator.h"
#include "common/fsutil.h"
#include "mutate/pattern.h"
#include "problem/problem.h"
#include "test.h"
#include "test_util.h"

static const char good[] = "// seed.cu — a test seed\n"
                           "// kevo:pattern problem=allreduce transport=tma fusion=fused\n"
                           "// kevo:param CTAS default=4 range=1..8\n"
                           "// kevo:param STAGES default=2 values=1,2,4\n"
                           "#include \"kevo/kernel.h\"\n"
                           "#define CTAS 4\n"
                           "  #  define STAGES 2 // pipeline depth\n"
                           "#define OTHER 7\n";

static void parse_fails(const char *src, const char *want)
{
    kv_pattern_meta m;
    kv_err err = {{0}};
    int rc = kv_pattern_parse(src, strlen(src), "p.cu", &m, &err);
    KV_CHECKF(rc == -1, "accepted:\n%s", src);
    KV_CHECKF(strstr(err.msg, want) != NULL, "got  %s\nwant %s", err.msg, want);
}

/* good with `from` replaced by `to` */
static const char *variant(const char *from, const char *to)
{
    static char buf[2048];
    const char *at = strstr(good, from);
    if (!at) {
        fprintf(stderr, "test bug: %s\n", from);
        abort();
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    return buf;
}

static void test_parser(void)
{
    kv_pattern_meta m;
    kv_err err = {{0}};
    KV_REQUIRE(kv_pattern_parse(good, strlen(good), "p.cu", &m, &err) == 0);
    KV_CHECK(strcmp(m.problem, "allreduce") == 0);
    KV_CHECK(m.transport == KV_TRANSPORT_TMA && m.fusion == KV_FUSION_FUSED);
    KV_CHECK(m.cell == kv_cell_index(KV_TRANSPORT_TMA, KV_FUSION_FUSED));
    KV_REQUIRE(m.n_params == 2);
    KV_CHECK(strcmp(m.params[0].name, "CTAS") == 0 && m.params[0].def == 4 &&
             m.params[0].has_range && m.params[0].lo == 1 && m.params[0].hi == 8);
    KV_CHECK(strcmp(m.params[1].name, "STAGES") == 0 && m.params[1].n_values == 3 &&
             m.params[1].values[2] == 4 && m.params[1].value == 2 && m.params[1].line == 4);
    KV_CHECK(kv_pattern_param_allows(&m.params[1], 4) && !kv_pattern_param_allows(&m.params[1], 3));

    /* a generated candidate (mutate/schedule.h): its kevo:schedule line, no
     * kevo:param: a seed without parameters (kevo seed --patterns loads it) */
    static const char generated[] =
        "// kevo:pattern problem=allgather transport=sm fusion=fused\n"
        "// kevo:schedule allgather threads=512 ctas=2 launch=fused ll_max=256K; ag algo=direct\n"
        "#include \"kevo/kernel.h\"\n";
    KV_CHECKF(kv_pattern_parse(generated, strlen(generated), "g.cu", &m, &err) == 0, "%s", err.msg);
    KV_CHECK(m.n_params == 0 && strcmp(m.problem, "allgather") == 0);
    KV_REQUIRE(kv_pattern_parse(good, strlen(good), "p.cu", &m, &err) == 0);

    /* rewriting a parameter touches its #define line only, and parses again */
    char *out = NULL;
    size_t n = 0;
    KV_REQUIRE(kv_pattern_with_param(good, strlen(good), &m, 1, 4, &out, &n, &err) == 0);
    KV_CHECK(strstr(out, "#define STAGES 4\n#define OTHER 7\n") != NULL);
    KV_CHECK(strstr(out, "#define CTAS 4\n") != NULL && strlen(out) == n);
    kv_pattern_meta m2;
    KV_CHECKF(kv_pattern_parse(out, n, "p.cu", &m2, &err) == 0, "%s", err.msg);
    KV_CHECK(m2.params[1].value == 4 && m2.params[1].def == 2);
    free(out);
    KV_CHECK(kv_pattern_with_param(good, strlen(good), &m, 1, 3, &out, &n, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "3 is not an allowed value of STAGES");
    KV_CHECK(kv_pattern_with_param(good, strlen(good), &m, 0, 9, &out, &n, &err) == -1);

    parse_fails("#define X 1\n", "p.cu: no kevo:pattern line");
    parse_fails(variant("transport=tma", "transport=tmx"), "p.cu:2: unknown transport \"tmx\"");
    parse_fails(variant("fusion=fused", "fusion=fuse"), "p.cu:2: unknown fusion \"fuse\"");
    parse_fails(variant("fusion=fused", "fusion=fused cell=x"), "p.cu:2: unknown key \"cell\"");
    parse_fails(variant(" fusion=fused", ""), "p.cu:2: kevo:pattern needs problem=");
    parse_fails(variant("// kevo:param CTAS", "// kevo:parm CTAS"),
                "p.cu:3: unknown annotation kevo:parm");
    parse_fails(variant("CTAS default", "ctas default"), "p.cu:3: kevo:param needs a NAME");
    parse_fails(variant("default=4 range", "default=9 range"),
                "p.cu:3: the default of CTAS is not among its allowed values");
    parse_fails(variant("range=1..8", "range=8..1"), "p.cu:3: range \"8..1\" is not LO..HI");
    parse_fails(variant("range=1..8", "range=1..8 values=1"),
                "p.cu:3: parameter CTAS needs exactly one of range= and values=");
    parse_fails(variant("values=1,2,4", "values=1,2,2"), "p.cu:4: value 2 listed twice");
    parse_fails(variant("#define CTAS 4\n", ""),
                "p.cu:3: parameter CTAS has no \"#define CTAS <default>\" line");
    parse_fails(variant("#define CTAS 4", "#define CTAS 4\n#define CTAS 4"),
                "p.cu:7: #define CTAS appears twice");
    parse_fails(variant("#define CTAS 4", "#define CTAS 9"),
                "p.cu:6: #define CTAS: 9 is not an allowed value");
    parse_fails(variant("#define CTAS 4", "#define CTAS (4)"),
                "p.cu:6: #define CTAS must be an integer literal");
    parse_fails(variant("#define CTAS 4", "#define CTAS 4 + 1"),
                "p.cu:6: #define CTAS: only a // comment may follow its value");
    parse_fails(variant("// kevo:param STAGES", "// kevo:param CTAS"),
                "p.cu:4: parameter CTAS is declared twice");
    parse_fails(variant("// kevo:pattern", "// kevo:pattern problem=a transport=sm fusion=fused\n"
                                           "// kevo:pattern"),
                "p.cu:3: a second kevo:pattern line");
}

/* ---- the shipped seeds ------------------------------------------------------------- */

typedef struct {
    char path[4096];
    char *src;
    size_t len;
    kv_pattern_meta meta;
    uint64_t ticket;
} seed;

static int contains_line_with(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}

static void check_seed_result(const seed *s, const kv_compile_result *r)
{
    KV_CHECKF(r->status == KV_COMPILE_OK, "%s does not compile:\n%s", s->path,
              kv_test_str(r->errors));
    if (r->status != KV_COMPILE_OK)
        return;
    KV_CHECKF(!contains_line_with(r->report, "warning"), "%s: compiler warnings:\n%s", s->path,
              r->report);
    kv_evidence ev = {0};
    ev.sass = r->sass;
    ev.ptx = r->ptx;
    ev.imports = r->imports;
    ev.source = s->src;
    kv_class c;
    kv_err err = {{0}};
    KV_REQUIRE(kv_classify(&ev, &c, &err) == 0);
    char claimed[KV_CELL_NAME_MAX], got[KV_CELL_NAME_MAX];
    kv_cell_name(s->meta.cell, claimed);
    kv_cell_name(kv_cell_index(c.transport, c.fusion), got);
    if (s->meta.transport == KV_TRANSPORT_CE) {
        /* copies to peers show in the captured graph; statically, the copies must be there */
        KV_CHECKF(c.uses_copy_engine, "%s claims %s but imports no cudaMemcpy*: %s", s->path,
                  claimed, c.evidence_json);
        KV_CHECKF(!c.uses_tma && !c.uses_nvls, "%s claims %s; evidence %s", s->path, claimed,
                  c.evidence_json);
        KV_CHECKF(c.fusion == s->meta.fusion, "%s claims %s, compiled fusion %s", s->path, claimed,
                  kv_fusion_name(c.fusion));
    } else {
        KV_CHECKF(strcmp(claimed, got) == 0, "%s claims %s, its compiled evidence says %s: %s",
                  s->path, claimed, got, c.evidence_json);
    }
    printf("%-48s claims %-12s compiled %-12s %5.1f s\n", s->path, claimed, got, r->seconds);
    kv_class_free(&c);
}

static int wanted(const char *problem, int argc, char **argv)
{
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], problem) == 0)
            return 1;
    return argc < 2;
}

static void test_seeds(const char *root, int argc, char **argv)
{
    char pdir[4200];
    snprintf(pdir, sizeof pdir, "%s/patterns", root);
    static seed seeds[128];
    int n = 0;
    DIR *d = opendir(pdir);
    KV_REQUIRE(d != NULL);
    struct dirent *de;
    kv_err err = {{0}};
    while ((de = readdir(d)) != NULL && n < 128) {
        if (de->d_name[0] == '.' || !wanted(de->d_name, argc, argv))
            continue;
        char sub[4600];
        snprintf(sub, sizeof sub, "%s/%s", pdir, de->d_name);
        DIR *sd = opendir(sub);
        if (!sd)
            continue; /* a header */
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL && n < 128) {
            size_t l = strlen(fe->d_name);
            if (l < 4 || strcmp(fe->d_name + l - 3, ".cu") != 0)
                continue;
            seed *s = &seeds[n];
            snprintf(s->path, sizeof s->path, "patterns/%s/%s", de->d_name, fe->d_name);
            char full[9400];
            snprintf(full, sizeof full, "%s/%s", sub, fe->d_name);
            KV_REQUIRE(kv_read_file(full, &s->src, &s->len, &err) == 0);
            int rc = kv_pattern_parse(s->src, s->len, s->path, &s->meta, &err);
            KV_CHECKF(rc == 0, "%s", err.msg);
            if (rc != 0) {
                free(s->src);
                continue;
            }
            KV_CHECKF(strcmp(s->meta.problem, de->d_name) == 0, "%s: problem=%s, folder %s",
                      s->path, s->meta.problem, de->d_name);
            for (int i = 0; i < s->meta.n_params; i++)
                KV_CHECKF(s->meta.params[i].value == s->meta.params[i].def,
                          "%s: #define %s is not the default", s->path, s->meta.params[i].name);
            KV_CHECKF(s->meta.n_params >= 1, "%s declares no tunable parameter", s->path);
            KV_CHECKF(strstr(s->src, "call_index") == NULL,
                      "%s reads ctx->call_index: a CUDA graph replays it unchanged (ABI 2 takes "
                      "epochs and parity from the device, patterns/kevo_sync.cuh)",
                      s->path);
            char prob[4400];
            snprintf(prob, sizeof prob, "%s/problems/%s", root, s->meta.problem);
            kv_problem p;
            int loaded = kv_problem_load(prob, &p, &err) == 0;
            KV_CHECKF(loaded, "%s: problem %s: %s", s->path, s->meta.problem, err.msg);
            if (loaded)
                kv_problem_free(&p);
            n++;
        }
        closedir(sd);
    }
    closedir(d);
    printf("%d seeds\n", n);
    KV_CHECK(n > 0);

    kv_compile_opts o;
    kv_compile_defaults(&o, root);
    kv_test_fresh_dir(o.cache_dir, sizeof o.cache_dir, "seed-cache");
    o.jobs = 2;
    o.timeout_s = 300;
    kv_compile_pool *pool;
    KV_REQUIRE(kv_compile_pool_new(&o, &pool, &err) == 0);
    for (int i = 0; i < n; i++)
        KV_REQUIRE(kv_compile_submit(pool, seeds[i].src, seeds[i].len, &seeds[i].ticket, &err) ==
                   0);
    KV_CHECKF(kv_compile_wait_all(pool, &err) == 0, "%s", err.msg);
    uint64_t t;
    kv_compile_result r;
    while (kv_compile_take(pool, &t, &r) == 0) {
        for (int i = 0; i < n; i++)
            if (seeds[i].ticket == t)
                check_seed_result(&seeds[i], &r);
        kv_compile_result_free(&r);
    }
    kv_compile_pool_free(pool);
    for (int i = 0; i < n; i++)
        free(seeds[i].src);
}

int main(int argc, char **argv)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    test_parser();
    test_seeds(src ? src : ".", argc, argv);
    return kv_test_summary();
}
