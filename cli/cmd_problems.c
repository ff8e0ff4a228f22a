/* cmd_problems.c — kevo problems: list the problems under a root with their
 * category, sizes (per-rank input bytes) and the roofline of each size at a
 * world size. Problems that fail to load are reported on stderr, after the
 * good ones are listed, and make the command exit 1. kevo problems check P
 * is cmd_problems_check.c's. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "common/json.h"
#include "common/json_out.h"
#include "common/text.h"
#include "problem/problem.h"
#include "common/suggest.h"

static const char usage[] =
    "usage: kevo problems [--root DIR] [--world W] [--json]\n"
    "       kevo problems check P [--world W] [--devices 0,1] [--no-cache] [--json]\n"
    "                             [--timeout S]\n"
    "\n"
    "Lists the problems (folders with a problem.json) under DIR: category, world\n"
    "sizes, and for each size its parameters, the bytes of its inputs per rank and\n"
    "its roofline at W GPUs (the time no kernel can beat, from the problem's cost\n"
    "model and the machine's link, compute and memory ceilings), and where the\n"
    "reference runs at W: in the symmetric window, or on plain memory where NCCL's\n"
    "symmetric kernels would be wrong (docs/problems.md, \"NCCL on the window\").\n"
    "\n"
    "options:\n"
    "  --root DIR   the problems folder; default $KEVO_PROBLEMS, else\n"
    "               <folder of kevo>/../problems if it exists, else ./problems\n"
    "  --world W    world size for the rooflines (2..8; default 2)\n"
    "  --json       one JSON object on stdout instead of the table\n"
    "\n"
    "Every problem is validated as a search would load it; those that fail are\n"
    "reported on stderr with the file and JSON path at fault.\n"
    "exit status: 0 all problems load, 1 some failed (or DIR cannot be read),\n"
    "2 usage error. docs/problems.md documents the format.\n"
    "\n"
    "kevo problems check P checks P's NCCL reference on W GPUs against itself and,\n"
    "where P ships check.c, against its host check (at the sizes whose tensors\n"
    "total at most 256 MiB over all ranks), and keeps the verdict for kevo run\n"
    "(kevo problems check --help).\n";

typedef struct {
    int n, failed; /* messages kept, problems that failed */
    char **msgs;
} error_list;

static void collect(const char *msg, void *ctx)
{
    error_list *l = ctx;
    l->failed++;
    char **m = realloc(l->msgs, (size_t)(l->n + 1) * sizeof *m);
    if (!m)
        return;
    l->msgs = m;
    if ((m[l->n] = strdup(msg)) != NULL)
        l->n++;
}

static void human_bytes(double b, char *out, size_t cap)
{
    if (b < 1024)
        snprintf(out, cap, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(out, cap, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(out, cap, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(out, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

static const char *bound_name(const kv_roofline *r)
{
    if (r->seconds <= 0)
        return "-";
    if (r->seconds == r->link_s)
        return "link";
    if (r->seconds == r->compute_s)
        return "compute";
    return "hbm";
}

/* One size: its input and output bytes per rank, its roofline and where
 * the reference runs (kv_shapes_ref_plain). */
typedef struct {
    size_t in_bytes, out_bytes;
    kv_roofline r;
    int ref_plain;
} size_info;

static int size_info_of(const kv_problem *p, int s, int world, size_info *si, kv_err *err)
{
    kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
    if (kv_problem_shapes(p, s, world, in, out, err) ||
        kv_problem_roofline(p, s, world, &si->r, err))
        return KV_FAIL;
    si->in_bytes = si->out_bytes = 0;
    for (int i = 0; i < p->n_inputs; i++)
        si->in_bytes += in[i].bytes;
    for (int i = 0; i < p->n_outputs; i++)
        si->out_bytes += out[i].bytes;
    si->ref_plain = kv_shapes_ref_plain(p, in, out, world);
    return KV_OK;
}

static void worlds_text(const kv_problem *p, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n_worlds && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? ", " : "", p->worlds[i]);
}

static void params_text(const kv_problem *p, int s, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n_params && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s=%lld", i ? " " : "", p->param_names[i],
                              (long long)p->sizes[s].values[i]);
}

static int print_table(const char *root, int world, const kv_problem *v, int n)
{
    int rc = KV_EXIT_OK;
    char shown[4096], shown2[1024];
    printf("problems in %s (roofline at W=%d)\n", KV_TERM(shown, root), world);
    if (n == 0)
        printf("\n  (none)\n");
    for (int k = 0; k < n; k++) {
        const kv_problem *p = &v[k];
        char worlds[64], params[256];
        worlds_text(p, worlds, sizeof worlds);
        printf("\n%s  [%s]  worlds: %s\n", KV_TERM(shown, p->name), KV_TERM(shown2, p->category),
               worlds);
        if (!kv_problem_supports_world(p, world)) {
            printf("  (not defined at W=%d)\n", world);
            continue;
        }
        int pw = 6;
        for (int s = 0; s < p->n_sizes; s++) {
            params_text(p, s, params, sizeof params);
            if ((int)strlen(params) > pw)
                pw = (int)strlen(params);
        }
        /* "roofline (µs)" is 13 columns wide (14 bytes): no printf width */
        printf("  %-12s %-*s %12s %s  %-7s  %s\n", "size", pw, "params", "inputs/rank",
               "roofline (µs)", "bound", "reference");
        int any_validation = 0;
        for (int s = 0; s < p->n_sizes; s++) {
            size_info si;
            kv_err err = {{0}};
            params_text(p, s, params, sizeof params);
            char name[KV_PROBLEM_NAME_MAX + 2];
            snprintf(name, sizeof name, "%s%s", p->sizes[s].name,
                     p->sizes[s].validation ? "*" : "");
            any_validation |= p->sizes[s].validation;
            if (size_info_of(p, s, world, &si, &err)) {
                printf("  %-12s %-*s  (error)\n", KV_TERM(shown2, name), pw, params);
                fprintf(stderr, "kevo: %s\n", KV_TERM(shown, err.msg));
                rc = KV_EXIT_FAIL;
                continue;
            }
            char bytes[32];
            human_bytes((double)si.in_bytes, bytes, sizeof bytes);
            printf("  %-12s %-*s %12s %13.2f  %-7s  %s\n", name, pw, params, bytes,
                   si.r.seconds * 1e6, bound_name(&si.r), si.ref_plain ? "plain" : "window");
        }
        if (any_validation)
            printf("  * the validation size, never shown to mutators; reference: where the\n"
                   "    reference runs (plain: off the window, "
                   "docs/problems.md#nccl-on-the-window)\n");
    }
    return rc;
}

/* Adds v to obj under key; 0, or -1 when out of memory (v is freed). */
static int add(cJSON *obj, const char *key, cJSON *v)
{
    if (!v)
        return -1;
    if (!cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

static cJSON *problem_json(const kv_problem *p, int world, int *rc)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int bad = add(o, "name", cJSON_CreateString(p->name)) ||
              add(o, "category", cJSON_CreateString(p->category)) ||
              add(o, "worlds", cJSON_CreateIntArray(p->worlds, p->n_worlds));
    cJSON *params = cJSON_CreateArray();
    bad = bad || add(o, "params", params);
    for (int i = 0; !bad && i < p->n_params; i++)
        bad = !cJSON_AddItemToArray(params, cJSON_CreateString(p->param_names[i]));
    int supported = kv_problem_supports_world(p, world);
    bad = bad || add(o, "supported", cJSON_CreateBool(supported));
    cJSON *sizes = cJSON_CreateArray();
    bad = bad || add(o, "sizes", sizes);
    for (int s = 0; !bad && s < p->n_sizes; s++) {
        cJSON *so = cJSON_CreateObject();
        bad = !so || !cJSON_AddItemToArray(sizes, so);
        if (bad) {
            cJSON_Delete(so);
            break;
        }
        cJSON *pv = cJSON_CreateObject();
        bad = add(so, "name", cJSON_CreateString(p->sizes[s].name)) ||
              add(so, "validation", cJSON_CreateBool(p->sizes[s].validation)) ||
              add(so, "params", pv);
        for (int i = 0; !bad && i < p->n_params; i++)
            bad = add(pv, p->param_names[i], cJSON_CreateNumber((double)p->sizes[s].values[i]));
        if (bad || !supported)
            continue;
        size_info si;
        kv_err err = {{0}};
        if (size_info_of(p, s, world, &si, &err)) {
            char shown[4096];
            fprintf(stderr, "kevo: %s\n", KV_TERM(shown, err.msg));
            *rc = KV_EXIT_FAIL;
            bad = add(so, "error", cJSON_CreateString(err.msg));
            continue;
        }
        bad = add(so, "input_bytes", cJSON_CreateNumber((double)si.in_bytes)) ||
              add(so, "output_bytes", cJSON_CreateNumber((double)si.out_bytes)) ||
              add(so, "send_bytes", cJSON_CreateNumber(si.r.send_bytes)) ||
              add(so, "recv_bytes", cJSON_CreateNumber(si.r.recv_bytes)) ||
              add(so, "flops", cJSON_CreateNumber(si.r.flops)) ||
              add(so, "hbm_bytes", cJSON_CreateNumber(si.r.hbm_bytes)) ||
              add(so, "roofline_us", cJSON_CreateNumber(si.r.seconds * 1e6)) ||
              add(so, "link_us", cJSON_CreateNumber(si.r.link_s * 1e6)) ||
              add(so, "compute_us", cJSON_CreateNumber(si.r.compute_s * 1e6)) ||
              add(so, "hbm_us", cJSON_CreateNumber(si.r.hbm_s * 1e6)) ||
              add(so, "bound", cJSON_CreateString(bound_name(&si.r))) ||
              add(so, "reference_memory", cJSON_CreateString(si.ref_plain ? "plain" : "window"));
    }
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int print_json(const char *root, int world, const kv_problem *v, int n,
                      const error_list *errs)
{
    int rc = KV_EXIT_OK;
    cJSON *top = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    cJSON *earr = cJSON_CreateArray();
    int bad = !top || add(top, "root", cJSON_CreateString(root)) ||
              add(top, "world", cJSON_CreateNumber(world)) || add(top, "problems", arr);
    if (!bad)
        bad = add(top, "errors", earr);
    else
        cJSON_Delete(earr);
    for (int k = 0; !bad && k < n; k++) {
        cJSON *o = problem_json(&v[k], world, &rc);
        bad = !o || !cJSON_AddItemToArray(arr, o);
    }
    for (int i = 0; !bad && i < errs->n; i++)
        bad = !cJSON_AddItemToArray(earr, cJSON_CreateString(errs->msgs[i]));
    if (!bad)
        bad = kv_json_exact_numbers(top) != 0; /* 2^53-1, not 9.00719925474099e+15 */
    char *text = bad ? NULL : kv_json_print(top, 1, NULL);
    cJSON_Delete(top);
    if (!text) {
        fprintf(stderr, "kevo: out of memory\n");
        return KV_EXIT_FAIL;
    }
    printf("%s\n", text);
    free(text);
    return rc;
}

/* "--name VALUE" or "--name=VALUE"; returns the value or NULL (not this
 * option), and sets *missing when the value is absent. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): argv[*i], *i < argc, is a string
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int run(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "check") == 0)
        return kv_cli_problems_check(argc - 1, argv + 1);
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    const char *root = NULL;
    int world = 2, json = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *val;
        if ((val = opt_value(argc, argv, &i, "--root", &missing)) != NULL) {
            if (!*val)
                return kv_cli_usage("problems", usage, "--root needs a folder");
            root = val;
        } else if (missing) {
            return kv_cli_usage("problems", usage, "%s needs a value", argv[i]);
        } else if ((val = opt_value(argc, argv, &i, "--world", &missing)) != NULL) {
            long long w;
            if (kv_cli_parse_int(val, 2, KEVO_MAX_RANKS, &w) != 0)
                return kv_cli_usage("problems", usage,
                                    "--world must be an integer in 2..%d, "
                                    "not '%s'",
                                    KEVO_MAX_RANKS, val);
            world = (int)w;
        } else if (missing) {
            return kv_cli_usage("problems", usage, "%s needs a value", argv[i]);
            // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): i < argc
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-') {
            static const char *const opts[] = {"--root", "--world", "--json"};
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)strcspn(argv[i], "="), argv[i]);
            const char *near = kv_suggest(word, opts, 3);
            if (near)
                return kv_cli_usage("problems", usage, "unknown option '%s'; did you mean '%s'?",
                                    argv[i], near);
            return kv_cli_usage("problems", usage, "unknown option '%s'", argv[i]);
        } else {
            return kv_cli_usage("problems", usage, "unexpected argument '%s'", argv[i]);
        }
    }
    char def[PATH_MAX];
    if (!root)
        root = kv_problems_default_root(def, sizeof def);

    error_list errs = {0, 0, NULL};
    kv_problem *v = NULL;
    kv_err err = {{0}};
    int n = kv_problems_load_all(root, &v, collect, &errs, &err);
    if (n < 0) {
        char shown[4096];
        fprintf(stderr, "kevo: %s (set --root or $KEVO_PROBLEMS)\n", KV_TERM(shown, err.msg));
        return KV_EXIT_FAIL;
    }
    int rc = json ? print_json(root, world, v, n, &errs) : print_table(root, world, v, n);
    kv_cli_flush_stdout(); /* before the messages; main reports a failure */
    char shown[4096];
    for (int i = 0; i < errs.n; i++) {
        fprintf(stderr, "kevo: %s\n", KV_TERM(shown, errs.msgs[i]));
        free(errs.msgs[i]);
    }
    if (errs.failed > 0) {
        fprintf(stderr, "kevo: %d problem%s in %s failed to load\n", errs.failed,
                errs.failed == 1 ? "" : "s", KV_TERM(shown, root));
        rc = KV_EXIT_FAIL;
    }
    free(errs.msgs);
    kv_problems_free(v, n);
    return rc;
}

const kv_command kv_cmd_problems = {
    .name = "problems",
    .summary = "list the problems with their sizes and rooflines; check a reference",
    .usage = usage,
    .run = run,
};
