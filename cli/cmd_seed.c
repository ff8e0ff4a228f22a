/* cmd_seed.c — kevo seed: evaluate the pattern library's seed kernels and
 * store them in a run's archive, in the cells their measured behaviour puts
 * them in. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "common/datadir.h"
#include "common/json_out.h"
#include "cli.h"
#include "eval_report.h"
#include "eval_setup.h"
#include "archive/archive.h"
#include "search/config.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "mutate/pattern.h"
#include "mutate/library.h"
#include "mutate/schedule.h"
#include "search/store.h"

static const char usage[] =
    "usage: kevo seed [--problem P] [--run DIR] [options]\n"
    "\n"
    "Evaluates every seed kernel of patterns/<problem>/ (all problems that have\n"
    "seeds, or only P) with the full protocol beside the problem's NCCL\n"
    "reference, and stores each in the run's archive: the program, its result,\n"
    "an attempt (stage seed) and, when it is correct, an elite offer to every\n"
    "island in the cell its measured behaviour gives. Prints a line per seed and\n"
    "a table per problem: the reference and the best seed at every size.\n"
    "\n"
    "  --problem P        only this problem\n"
    "  --run DIR          the run directory (default $KEVO_RUN, else the default\n"
    "                     configuration's run_dir); created if missing\n"
    "  --islands K        offer elites to islands 0..K-1 (default: the default\n"
    "                     configuration's islands)\n"
    "  --patterns DIR     the seeds are DIR/<problem>/*.cu (default: the patterns/\n"
    "                     folder of $KEVO_HOME or the source tree); bench/schedule_sweep.sh\n"
    "                     points it at generated schedules\n"
    "  --seeds FROM       patterns (default: the seeds of the patterns folder),\n"
    "                     schedules (for a collective, the seeds generated from\n"
    "                     schedules: sched_default, one per reachable cell and sched_sm_ll,\n"
    "                     docs/config.md `seeds`) or both; without --problem,\n"
    "                     schedules seeds the six collectives\n"
    "  --world W, --devices 0,1, --sizes a,b, --screen, --trials N, --warmup N,\n"
    "  --iters N, --timeout S, --timing MODE, --allow-runtime-lookups,\n"
    "  --allow-unconfined\n"
    "                     as for kevo eval\n"
    "  --json             one JSON object per seed, one per line\n"
    "\n"
    "Exit status: 0 every seed is correct, 4 some seed was rejected, 1 kevo\n"
    "itself failed, 2 usage error.\n";

static const struct option long_opts[] = {
    {"problem", required_argument, NULL, 'p'},
    {"world", required_argument, NULL, 'w'},
    {"devices", required_argument, NULL, 'd'},
    {"sizes", required_argument, NULL, 's'},
    {"screen", no_argument, NULL, 'S'},
    {"trials", required_argument, NULL, 't'},
    {"warmup", required_argument, NULL, 'W'},
    {"iters", required_argument, NULL, 'i'},
    {"timeout", required_argument, NULL, 'T'},
    {"json", no_argument, NULL, 'j'},
    {"run", required_argument, NULL, 'r'},
    {"islands", required_argument, NULL, 'I'},
    {"allow-runtime-lookups", no_argument, NULL, 'L'},
    {"allow-unconfined", no_argument, NULL, 'U'},
    {"timing", required_argument, NULL, 'G'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct {
    char names[64][256];
    int n;
} name_list;

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* The folders of dir (the problems that have seeds), sorted. Returns the
 * count, or -1 when dir cannot be read. */
static int list_dirs(const char *dir, name_list *out, kv_err *err)
{
    out->n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return kv_err_errno(err, errno, "open %s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && out->n < 64) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof out->names[0])
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!is_dir(path))
            continue;
        snprintf(out->names[out->n++], sizeof out->names[0], "%s", de->d_name);
    }
    closedir(d);
    qsort(out->names, (size_t)out->n, sizeof out->names[0], by_name);
    return out->n;
}

/* The reference's times (from the first report that timed them) and the
 * best correct seed per size, for the summary table. */
typedef struct {
    int n;
    char name[KV_JOB_MAX_SIZES][64];
    int timed[KV_JOB_MAX_SIZES];
    double ref_us[KV_JOB_MAX_SIZES], roof_us[KV_JOB_MAX_SIZES];
    double us[KV_JOB_MAX_SIZES];
    char who[KV_JOB_MAX_SIZES][128];
} best_table;

static void best_add(best_table *b, const char *seed, const kv_eval_report *r)
{
    if (b->n == 0) {
        for (int i = 0; i < r->n_sizes && i < KV_JOB_MAX_SIZES; i++) {
            snprintf(b->name[i], sizeof b->name[i], "%s", r->sizes[i].name);
            b->timed[i] = r->sizes[i].timed;
            b->ref_us[i] = r->sizes[i].ref.median;
            b->roof_us[i] = r->sizes[i].roofline_us;
        }
        b->n = r->n_sizes < KV_JOB_MAX_SIZES ? r->n_sizes : KV_JOB_MAX_SIZES;
    }
    if (r->verdict != KV_VERDICT_OK)
        return;
    for (int i = 0; i < b->n && i < r->n_sizes; i++)
        if (r->sizes[i].timed && (b->us[i] <= 0 || r->sizes[i].cand.median < b->us[i])) {
            b->us[i] = r->sizes[i].cand.median;
            char cell[KV_CELL_NAME_MAX];
            snprintf(b->who[i], sizeof b->who[i], "%.60s (%.32s)", seed,
                     kv_eval_cell_name(r, cell));
        }
}

static void print_summary(const char *problem, const best_table *b)
{
    char shown[4 * sizeof b->who[0]], name[4 * sizeof b->name[0]];
    printf("\n%s: the best seed per size\n", KV_TERM(shown, problem));
    printf("%-14s %12s %12s %8s %9s  %s\n", "size", "NCCL us", "best us", "speedup", "roofline",
           "seed (cell)");
    for (int i = 0; i < b->n; i++) {
        if (!b->timed[i])
            continue;
        if (b->us[i] <= 0) {
            printf("%-14s %12.2f %12s %8s %9s  (no correct seed)\n", KV_TERM(name, b->name[i]),
                   b->ref_us[i], "-", "-", "-");
            continue;
        }
        printf("%-14s %12.2f %12.2f %7.2fx %8.1f%%  %s\n", KV_TERM(name, b->name[i]), b->ref_us[i],
               b->us[i], b->ref_us[i] / b->us[i], 100 * b->roof_us[i] / b->us[i],
               KV_TERM(shown, b->who[i]));
    }
}

/* One line of --json output: the seed, the cell it was written for, and
 * its report. Names are file names, so they go through cJSON's escaping. */
static void print_json_line(const char *problem, const char *seed, const char *claimed,
                            const kv_eval_report *r)
{
    char *report = kv_eval_report_json(r);
    cJSON *o = cJSON_CreateObject();
    char *line = NULL;
    if (o && cJSON_AddStringToObject(o, "problem", problem) &&
        cJSON_AddStringToObject(o, "seed", seed) &&
        cJSON_AddStringToObject(o, "claimed_cell", claimed) &&
        cJSON_AddRawToObject(o, "report", report ? report : "null"))
        line = kv_json_print(o, 0, NULL);
    if (line)
        printf("%s\n", line);
    else
        fprintf(stderr, "kevo: out of memory printing the report of a seed\n");
    free(line);
    cJSON_Delete(o);
    free(report);
}

/* Evaluates and stores every seed of one problem. Returns 0 all ok, 1 some
 * rejected, -1 kevo failed. */
static void seed_error(const char *msg, void *ctx)
{
    char shown[2048];
    fprintf(stderr, "kevo: %s\n", KV_TERM(shown, msg)); /* a bad seed costs its line only */
    *(int *)ctx = 1;
}

/* Compiles every seed of lib through a pool of o->jobs compilations into the
 * cache that kv_evaluate reads; the results themselves are not kept (a
 * compile error is reported by the evaluation that meets it). */
static int warm_compile_cache(const kv_compile_opts *o, const kv_library *lib, kv_err *err)
{
    kv_compile_pool *pool = NULL;
    if (kv_compile_pool_new(o, &pool, err) != 0)
        return -1;
    int rc = 0;
    for (int f = 0; f < lib->n && rc == 0; f++) {
        uint64_t ticket;
        rc = kv_compile_submit(pool, lib->seeds[f].src, lib->seeds[f].len, &ticket, err);
    }
    if (rc == 0)
        rc = kv_compile_wait_all(pool, err);
    kv_compile_result r;
    uint64_t ticket;
    while (rc == 0 && kv_compile_take(pool, &ticket, &r) == 0)
        kv_compile_result_free(&r);
    kv_compile_pool_free(pool);
    return rc;
}

static int seed_problem(const kv_cli_eval_args *a, const char *problem, const char *root,
                        kv_seeds_from from, const char *run_dir, kv_archive *ar, int islands,
                        kv_err *err)
{
    kv_problem p;
    if (kv_cli_load_problem(problem, &p, err) != 0)
        return -1;
    kv_library lib = {0};
    kv_eval_opts o;
    kv_evaluator *ev = NULL;
    int rc = 0, bad_seed = 0;
    const char **first_seed = NULL;
    best_table best;
    memset(&best, 0, sizeof best);
    if (kv_library_load_from(root, problem, from, &lib, seed_error, &bad_seed, err) != 0 ||
        kv_cli_eval_opts(a, &p, &o, err) != 0) {
        rc = -1;
        goto out;
    }
    snprintf(o.private_dir, sizeof o.private_dir, "%s", run_dir); /* the workers never reach it */
    if (kv_evaluator_new(&o, &ev, err) != 0) {
        rc = -1;
        goto out;
    }
    /* first_seed[n - 1]: the seed whose text kv_evaluate numbered n */
    first_seed = calloc((size_t)(lib.n > 0 ? lib.n : 1), sizeof *first_seed);
    if (!first_seed) {
        rc = kv_err_set(err, "out of memory");
        goto out;
    }
    /* every seed compiled at once (the cache keeps them), so the loop below
     * evaluates without waiting for nvcc: a folder of generated schedules
     * compiles on every core instead of one */
    if (lib.n > 1 && warm_compile_cache(&o.compile, &lib, err) != 0) {
        rc = -1;
        goto out;
    }
    rc = bad_seed;
    for (int f = 0; f < lib.n; f++) {
        const kv_seed *seed = &lib.seeds[f];
        kv_eval_report r;
        if (kv_evaluate(ev, &p, seed->src, seed->len, &r, err) != 0) {
            rc = -1;
            goto out;
        }
        /* a duplicate names the seed it repeats, not the evaluator's number */
        if (r.program >= 1 && r.program <= (uint64_t)lib.n && !first_seed[r.program - 1])
            first_seed[r.program - 1] = seed->name;
        if (r.verdict == KV_VERDICT_DUPLICATE && r.duplicate_of >= 1 &&
            r.duplicate_of <= (uint64_t)lib.n && first_seed[r.duplicate_of - 1])
            snprintf(r.message, sizeof r.message,
                     "the same compiled code (SASS and host code) as seed %s: not evaluated again",
                     first_seed[r.duplicate_of - 1]);
        char claimed[KV_CELL_NAME_MAX];
        kv_cell_name(seed->meta.cell, claimed);
        kv_store_what w = {.problem = p.name,
                           .op = KV_OP_SEED,
                           .model = seed->name,
                           .stage = KV_STAGE_SEED,
                           .screen = a->screen,
                           .island = -1,
                           .n_islands = islands};
        kv_store_outcome so;
        int stored = kv_store_evaluation(ar, &w, seed->src, seed->len, &r, &so, err);
        if (a->json) {
            print_json_line(p.name, seed->name, claimed, &r);
        } else {
            char what[320];
            snprintf(what, sizeof what, "seed %s (written for %s)", seed->name, claimed);
            kv_cli_print_report(stdout, p.name, what, a->world, &r);
            if (stored == 0)
                printf("archive: program %llu%s, entered %d of %d islands\n\n",
                       (unsigned long long)so.program_id, so.existed ? " (already stored)" : "",
                       so.elites_taken, islands);
        }
        best_add(&best, seed->name, &r);
        if (r.verdict != KV_VERDICT_OK)
            rc = rc < 0 ? rc : 1;
        kv_eval_report_free(&r);
        if (stored != 0) {
            rc = -1;
            goto out;
        }
    }
    if (!a->json && best.n > 0)
        print_summary(p.name, &best);
out:
    free(first_seed);
    kv_evaluator_free(ev);
    kv_library_free(&lib);
    kv_problem_free(&p);
    return rc;
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    kv_cli_eval_args a;
    kv_cli_eval_args_init(&a);
    const char *problem = NULL;
    int islands = -1;
    const char *patterns = NULL;
    kv_seeds_from from = KV_SEEDS_PATTERNS;
    /* --islands and --patterns are this command's own: take them out before
     * the shared parser */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) {
        kv_err e = {{0}};
        kv_err_set(&e, "out of memory");
        return kv_cli_fail(&e);
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--islands") == 0 && i + 1 < argc)
            v = argv[++i];
        else if (strncmp(argv[i], "--islands=", 10) == 0)
            v = argv[i] + 10;
        if (strcmp(argv[i], "--patterns") == 0 && i + 1 < argc) {
            patterns = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--patterns=", 11) == 0) {
            patterns = argv[i] + 11;
            continue;
        }
        const char *sv = NULL;
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            sv = argv[++i];
        else if (strncmp(argv[i], "--seeds=", 8) == 0)
            sv = argv[i] + 8;
        if (sv) {
            int k = 0;
            while (kv_seeds_names[k] && strcmp(kv_seeds_names[k], sv) != 0)
                k++;
            if (!kv_seeds_names[k]) {
                free(args);
                return kv_cli_usage("seed", usage,
                                    "--seeds: expected patterns, schedules or both, got '%s'", sv);
            }
            from = (kv_seeds_from)k;
            continue;
        }
        if (v) {
            long long k;
            if (kv_cli_parse_int(v, 1, 1024, &k) != 0) {
                free(args);
                return kv_cli_usage("seed", usage, "--islands: expected 1 to 1024, got '%s'", v);
            }
            islands = (int)k;
            continue;
        }
        args[n++] = argv[i];
    }
    int first = kv_cli_eval_parse(n, args, "seed", usage, long_opts, 0, &a, &problem);
    free(args);
    if (first < 0)
        return KV_EXIT_USAGE;
    if (first != n)
        return kv_cli_usage("seed", usage, "unexpected argument");

    kv_config cfg;
    kv_config_defaults(&cfg);
    if (islands < 0)
        islands = cfg.islands;
    const char *run_dir = a.run_dir ? a.run_dir : kv_cli_default_run_dir();
    kv_err err = {{0}};
    char root[PATH_MAX];
    if (patterns) {
        if (!*patterns || strlen(patterns) >= sizeof root)
            return kv_cli_usage("seed", usage, "--patterns: expected a folder");
        snprintf(root, sizeof root, "%s", patterns);
    } else if (kv_path_join(root, sizeof root, kv_data_root(), "patterns", &err) != 0) {
        return kv_cli_fail(&err);
    }
    name_list problems;
    if (problem) {
        problems.n = 1;
        snprintf(problems.names[0], sizeof problems.names[0], "%s", problem);
    } else if (from == KV_SEEDS_SCHEDULES) { /* the collectives: their seeds are generated */
        problems.n = 0;
        for (int c = 0; c < KV_SC_COUNT; c++)
            snprintf(problems.names[problems.n++], sizeof problems.names[0], "%s",
                     kv_sched_coll_name((kv_sched_coll)c));
    } else if (list_dirs(root, &problems, &err) < 0) {
        return kv_cli_fail(&err);
    }
    kv_archive_opts ao = {.create = 1};
    kv_archive *ar = NULL;
    if (kv_archive_open(run_dir, &ao, &ar, &err) != 0)
        return kv_cli_fail(&err);
    int worst = 0;
    for (int i = 0; i < problems.n; i++) {
        char pdir[PATH_MAX + 256];
        snprintf(pdir, sizeof pdir, "%s/%s", root, problems.names[i]);
        if (from == KV_SEEDS_SCHEDULES && kv_sched_coll_parse(problems.names[i]) < 0) {
            kv_err_set(&err,
                       "problem %s is not a collective: no seeds are generated for it "
                       "(--seeds patterns or both)",
                       problems.names[i]);
            worst = -1;
            break;
        }
        /* a collective's generated seeds need no folder */
        int generated = from != KV_SEEDS_PATTERNS && kv_sched_coll_parse(problems.names[i]) >= 0;
        if (!generated && !is_dir(pdir)) {
            kv_err_set(&err, "no seeds for problem %s (no folder %s)", problems.names[i], pdir);
            worst = -1;
            break;
        }
        int rc = seed_problem(&a, problems.names[i], root, from, run_dir, ar, islands, &err);
        if (rc < 0) {
            worst = -1;
            break;
        }
        if (rc > worst)
            worst = rc;
    }
    kv_archive_close(ar);
    if (worst < 0)
        return kv_cli_fail(&err);
    return worst ? 4 : KV_EXIT_OK;
}

const kv_command kv_cmd_seed = {
    .name = "seed",
    .summary = "evaluate the pattern library's seeds into a run's archive",
    .usage = usage,
    .run = run,
};
