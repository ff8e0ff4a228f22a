/* cmd_archive.c — kevo archive: read-only views of a run's archive (list,
 * show, best, lineage, attempts, stats, export). Every view opens the archive
 * read-only and reads one snapshot, so it works while a run writes.
 * The formatting lives in archive_views.c; this file parses arguments and
 * reads the archive. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_views.h"
#include "cli.h"
#include "kevo/archive.h"
#include "kevo/cell.h"
#include "kevo/clock.h"
#include "kevo/fsutil.h"
#include "kevo/suggest.h"

/* ---- usage texts ----------------------------------------------------------- */

static const char usage[] =
    "usage: kevo archive [--run DIR] <view> [options]\n"
    "\n"
    "Read-only views of a run's archive; safe while the run writes (each view reads\n"
    "one consistent snapshot). DIR defaults to $KEVO_RUN, else the run_dir of the\n"
    "default configuration; --run may also follow the view's name.\n"
    "\n"
    "views:\n"
    "  list                      problems: programs, attempts, ok, best, coverage\n"
    "  show PROBLEM              the behaviour grids (per island and merged)\n"
    "  best PROBLEM              the best program's source, with a header\n"
    "  lineage ID                ancestors and descendants of a program\n"
    "  attempts                  the attempt log (every proposal and evaluation)\n"
    "  stats                     counters, verdicts, coverage and QD score\n"
    "  export                    every program record as JSON or CSV\n"
    "\n"
    "'kevo archive <view> --help' describes a view.\n";

static const char usage_list[] =
    "usage: kevo archive list [--run DIR] [--json]\n"
    "\n"
    "One line per problem: programs, attempts, ok attempts, the best program\n"
    "(speedup and id) and coverage (occupied cells of the grid merged over islands,\n"
    "out of 8). --json prints {\"archive\", \"problems\": [{\"problem\", \"programs\",\n"
    "\"attempts\", \"ok\", \"best\": {\"program\", \"speedup\"} or null, \"coverage\",\n"
    "\"cells\"}]}.\n";

static const char usage_show[] =
    "usage: kevo archive show PROBLEM [--run DIR] [--island N] [--json]\n"
    "\n"
    "The MAP-Elites grids of a problem: rows are transports (ce, sm, tma, nvls),\n"
    "columns fusion (fused, unfused); each cell shows the elite's speedup and\n"
    "program id (\"2.31x #142\"), '-' (or '\xc2\xb7' on a UTF-8 terminal) when empty. One\n"
    "grid per island, then the grid merged over islands (best fitness per cell),\n"
    "with coverage and QD score (sum of the elites' fitness). --island N shows\n"
    "that island only. --json gives the same data: {\"problem\", \"cells\",\n"
    "\"islands\": [{\"island\", \"coverage\", \"qd_score\", \"grid\"}], \"merged\"}.\n";

static const char usage_best[] =
    "usage: kevo archive best PROBLEM [--run DIR] [--cell CELL] [--out FILE.cu]\n"
    "\n"
    "Prints the source of the problem's best ok program (highest speedup), or of\n"
    "the best elite of CELL over all islands (e.g. --cell tma/fused), after a\n"
    "comment header: problem, id, speedup and per-size times, cell and evidence,\n"
    "operator and model, parents, evaluation date. --out writes it to FILE\n"
    "atomically instead of stdout.\n";

static const char usage_lineage[] =
    "usage: kevo archive lineage ID [--run DIR] [--depth N]\n"
    "\n"
    "The ancestors of program ID (its parents, recursively) and its descendants\n"
    "(children, recursively), N levels each way (default 10), as indented trees:\n"
    "id, operator, verdict, speedup, cell. A program reached twice is shown once.\n";

static const char usage_attempts[] =
    "usage: kevo archive attempts [--run DIR] [--problem P] [--verdict V] [--stage S]\n"
    "                             [--limit N] [--from SEQ] [--json]\n"
    "\n"
    "One line per attempt: sequence, time (UTC), problem, island, stage, verdict,\n"
    "program, speedup, wall seconds, tokens, cost (USD), first line of the detail.\n"
    "--from SEQ starts at that sequence number and --limit N then stops after N\n"
    "matching attempts; without --from, --limit N shows the last N that match.\n"
    "--json prints a JSON array, one attempt object per line (full detail).\n"
    "verdicts: none, ok, mismatch, compile_error, runtime_error, hang, crash,\n"
    "          nvls_refused, duplicate, proposal_error\n"
    "stages:   proposal, screen, full, remeasure, seed\n";

static const char usage_stats[] =
    "usage: kevo archive stats [--run DIR] [--json]\n"
    "\n"
    "Counters (programs, attempts, elites), attempts by verdict, and per problem the\n"
    "coverage of the merged grid, its QD score (sum over occupied cells of the best\n"
    "fitness) and the best speedup; then the total QD score over problems.\n";

static const char usage_export[] =
    "usage: kevo archive export [--run DIR] [--format json|csv] [--problem P]\n"
    "                           [--with-source] [--out FILE]\n"
    "\n"
    "Every program record (id, problem, parents, island, op, model, verdict,\n"
    "speedup, roofline, cell, created, evaluated, per-size times), in id order.\n"
    "json (the default): an array, one object per line. csv: a header row, then one\n"
    "row per program, sizes flattened as \"name:ref_us:cand_us;...\", fields quoted\n"
    "as RFC 4180 says. --with-source adds each program's source. --out writes FILE\n"
    "atomically instead of stdout.\n";

/* ---- options ---------------------------------------------------------------- */

enum {
    OPT_RUN = 1,
    OPT_JSON,
    OPT_ISLAND,
    OPT_CELL,
    OPT_OUT,
    OPT_DEPTH,
    OPT_PROBLEM,
    OPT_VERDICT,
    OPT_STAGE,
    OPT_LIMIT,
    OPT_FROM,
    OPT_FORMAT,
    OPT_WITH_SOURCE,
    OPT_HELP,
    OPT_COUNT
};

#define BIT(o) (1u << (o))
/* getopt_long's value for option id (clear of 1, which '-' mode returns for
 * positional arguments, and of the short options '?', ':' and 'h') */
#define OPT_VAL_BASE 256
#define MAX_POS 4

static const struct {
    const char *name;
    int has_arg;
} opt_table[OPT_COUNT] = {
    [OPT_RUN] = {"run", required_argument},       [OPT_JSON] = {"json", no_argument},
    [OPT_ISLAND] = {"island", required_argument}, [OPT_CELL] = {"cell", required_argument},
    [OPT_OUT] = {"out", required_argument},       [OPT_DEPTH] = {"depth", required_argument},
    [OPT_PROBLEM] = {"problem", required_argument},
    [OPT_VERDICT] = {"verdict", required_argument},
    [OPT_STAGE] = {"stage", required_argument},   [OPT_LIMIT] = {"limit", required_argument},
    [OPT_FROM] = {"from", required_argument},     [OPT_FORMAT] = {"format", required_argument},
    [OPT_WITH_SOURCE] = {"with-source", no_argument},
    [OPT_HELP] = {"help", no_argument},
};

typedef struct {
    const char *run_dir;
    int json;
    int has_island;
    int32_t island;
    int cell;                /* -1: none */
    const char *out;
    int depth;
    const char *problem;
    int has_verdict;
    kv_verdict verdict;
    int has_stage;
    kv_stage stage;
    long long limit;         /* 0: none */
    uint64_t from;           /* 0: none */
    int csv;
    int with_source;
    int help;
    const char *pos[MAX_POS];
    int n_pos;
} view_opts;

typedef struct view view;
struct view {
    const char *name;
    const char *usage;
    unsigned opts;           /* BIT(OPT_...) accepted besides --run and --help */
    int min_pos, max_pos;
    const char *pos_name;    /* what the positional argument is, for messages */
    int (*run)(const view *v, const view_opts *o);
};

static int view_usage(const view *v, const char *fmt, const char *a, const char *b)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "archive %s", v->name);
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b ? b : "");
    return kv_cli_usage(cmd, v->usage, "%s", msg);
}

static void list_cells(char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < KV_CELL_COUNT && used < cap; i++) {
        char name[KV_CELL_NAME_MAX];
        kv_cell_name(i, name);
        int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void list_verdicts(char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < KV_VERDICT_COUNT && used < cap; i++) {
        int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", kv_verdict_name(i));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void list_stages(char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < KV_STAGE_COUNT && used < cap; i++) {
        int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", kv_stage_name(i));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Applies one option value; returns 0 or a usage error's exit code. */
static int apply_opt(const view *v, view_opts *o, int id, const char *arg)
{
    long long n;
    char valid[512];
    switch (id) {
    case OPT_RUN:
        if (!*arg)
            return view_usage(v, "--run needs a directory%s", "", NULL);
        o->run_dir = arg;
        return 0;
    case OPT_JSON:
        o->json = 1;
        return 0;
    case OPT_ISLAND:
        if (kv_cli_parse_int(arg, INT32_MIN, INT32_MAX, &n) != 0)
            return view_usage(v, "--island: '%s' is not an island number%s", arg, NULL);
        o->has_island = 1;
        o->island = (int32_t)n;
        return 0;
    case OPT_CELL:
        o->cell = kv_cell_parse(arg);
        if (o->cell < 0) {
            list_cells(valid, sizeof valid);
            return view_usage(v, "--cell: unknown cell '%s'; valid cells: %s", arg, valid);
        }
        return 0;
    case OPT_OUT:
        if (!*arg)
            return view_usage(v, "--out needs a file name%s", "", NULL);
        o->out = arg;
        return 0;
    case OPT_DEPTH:
        if (kv_cli_parse_int(arg, 0, 1000000, &n) != 0)
            return view_usage(v, "--depth: '%s' is not a depth (0 or more)%s", arg, NULL);
        o->depth = (int)n;
        return 0;
    case OPT_PROBLEM:
        if (!*arg)
            return view_usage(v, "--problem needs a name%s", "", NULL);
        o->problem = arg;
        return 0;
    case OPT_VERDICT:
        if (kv_verdict_parse(arg, &o->verdict) != 0) {
            list_verdicts(valid, sizeof valid);
            return view_usage(v, "--verdict: unknown verdict '%s'; valid verdicts: %s", arg, valid);
        }
        o->has_verdict = 1;
        return 0;
    case OPT_STAGE:
        if (kv_stage_parse(arg, &o->stage) != 0) {
            list_stages(valid, sizeof valid);
            return view_usage(v, "--stage: unknown stage '%s'; valid stages: %s", arg, valid);
        }
        o->has_stage = 1;
        return 0;
    case OPT_LIMIT:
        if (kv_cli_parse_int(arg, 1, LLONG_MAX, &n) != 0)
            return view_usage(v, "--limit: '%s' is not a count (1 or more)%s", arg, NULL);
        o->limit = n;
        return 0;
    case OPT_FROM:
        if (kv_cli_parse_int(arg, 1, LLONG_MAX, &n) != 0)
            return view_usage(v, "--from: '%s' is not a sequence number (1 or more)%s", arg, NULL);
        o->from = (uint64_t)n;
        return 0;
    case OPT_FORMAT:
        if (strcmp(arg, "json") != 0 && strcmp(arg, "csv") != 0)
            return view_usage(v, "--format: unknown format '%s'; valid formats: json, csv%s", arg,
                              NULL);
        o->csv = strcmp(arg, "csv") == 0;
        return 0;
    case OPT_WITH_SOURCE:
        o->with_source = 1;
        return 0;
    case OPT_HELP:
        o->help = 1;
        return 0;
    }
    return view_usage(v, "internal error: option %s%s", "?", NULL);
}

static int add_positional(const view *v, view_opts *o, const char *arg)
{
    if (o->n_pos >= v->max_pos) {
        if (v->max_pos == 0)
            return view_usage(v, "unexpected argument '%s' (this view takes none)%s", arg, NULL);
        return view_usage(v, "unexpected extra argument '%s'%s", arg, NULL);
    }
    o->pos[o->n_pos++] = arg;
    return 0;
}

/* Parses argv (argv[0] is the view's name) into o with getopt_long: options
 * may come before or after the positional arguments; "--" ends options.
 * Returns 0 or the exit code of a usage error (already reported). */
static int parse_view_args(const view *v, int argc, char **argv, view_opts *o)
{
    struct option longopts[OPT_COUNT + 1];
    int n = 0;
    unsigned allowed = v->opts | BIT(OPT_RUN) | BIT(OPT_HELP);
    for (int id = 1; id < OPT_COUNT; id++) {
        if (!(allowed & BIT(id)))
            continue;
        longopts[n++] = (struct option){opt_table[id].name, opt_table[id].has_arg, NULL,
                                        OPT_VAL_BASE + id};
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};

    optind = 0; /* glibc: a full re-initialisation */
    opterr = 0;
    int rc = 0, c;
    /* '-': positional arguments come back in order as option 1; ':': report a
     * missing value as ':' rather than '?'. */
    while ((c = getopt_long(argc, argv, "-:h", longopts, NULL)) != -1) {
        const char *bad = argv[optind - 1];
        if (c == 1)
            rc = add_positional(v, o, optarg);
        else if (c == 'h')
            rc = apply_opt(v, o, OPT_HELP, NULL);
        else if (c == ':')
            rc = view_usage(v, "option '%s' needs a value%s", bad, NULL);
        else if (c == '?' && optopt && optopt != '-')
            rc = view_usage(v, "unknown option '-%s'%s", (char[]){(char)optopt, 0}, NULL);
        else if (c == '?')
            rc = view_usage(v, "unknown option '%s'%s", bad, NULL);
        else
            rc = apply_opt(v, o, c - OPT_VAL_BASE, optarg);
        if (rc != 0)
            return rc;
    }
    for (int i = optind; i < argc; i++) /* after "--" */
        if ((rc = add_positional(v, o, argv[i])) != 0)
            return rc;
    if (o->help)
        return 0;
    if (o->n_pos < v->min_pos)
        return view_usage(v, "missing %s%s", v->pos_name, NULL);
    return 0;
}

/* ---- the archive snapshot ------------------------------------------------------ */

typedef struct {
    kv_archive *a;
    kv_txn *t;
} snapshot;

static int snapshot_open(const char *dir, snapshot *s, kv_err *err)
{
    kv_archive_opts opts = {.readonly = 1};
    s->a = NULL;
    s->t = NULL;
    if (kv_archive_open(dir, &opts, &s->a, err) != 0)
        return -1;
    if (kv_read_begin(s->a, &s->t, err) != 0) {
        kv_archive_close(s->a);
        s->a = NULL;
        return -1;
    }
    return 0;
}

static void snapshot_close(snapshot *s)
{
    if (s->t)
        kv_txn_abort(s->t);
    kv_archive_close(s->a);
    s->a = NULL;
    s->t = NULL;
}

/* ---- problems ------------------------------------------------------------------- */

typedef struct {
    kv_problem_stats *v;
    size_t n, cap;
} problem_list;

static int collect_problem(const kv_problem_stats *s, void *ctx, kv_err *err)
{
    problem_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        kv_problem_stats *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *s;
    return 0;
}

static int load_problems(kv_txn *t, problem_list *l, kv_err *err)
{
    memset(l, 0, sizeof *l);
    if (kv_each_problem(t, collect_problem, l, err) != 0) {
        free(l->v);
        memset(l, 0, sizeof *l);
        return -1;
    }
    return 0;
}

static int stop_at_first(const kv_elite *e, void *ctx, kv_err *err)
{
    (void)e;
    (void)err;
    *(int *)ctx = 1;
    return 1;
}

/* 0 when the archive knows the problem; otherwise -1 with a message that
 * lists the problems it knows (and suggests the nearest). */
static int require_problem(const snapshot *s, const char *problem, kv_err *err)
{
    kv_problem_stats st;
    int rc = kv_get_problem_stats(s->t, problem, &st, err);
    if (rc <= 0)
        return rc;
    int has_elites = 0;
    if (kv_each_elite(s->t, problem, -1, stop_at_first, &has_elites, err) != 0)
        return -1;
    if (has_elites)
        return 0;
    problem_list l;
    if (load_problems(s->t, &l, err) != 0)
        return -1;
    const char *path = kv_archive_path(s->a);
    if (l.n == 0) {
        free(l.v);
        return kv_err_set(err, "unknown problem '%s': %s has no problems yet", problem, path);
    }
    const char **names = malloc(l.n * sizeof *names);
    char known[768];
    size_t used = 0;
    known[0] = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (names)
            names[i] = l.v[i].problem;
        if (used < sizeof known) {
            int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                             l.v[i].problem);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    const char *near = names ? kv_suggest(problem, names, l.n) : NULL;
    if (near)
        kv_err_set(err, "unknown problem '%s' in %s; did you mean '%s'? known problems: %s",
                   problem, path, near, known);
    else
        kv_err_set(err, "unknown problem '%s' in %s; known problems: %s", problem, path, known);
    free(names);
    free(l.v);
    return -1;
}

/* ---- grids ------------------------------------------------------------------------ */

typedef struct {
    int32_t island;
    kv_grid grid;
} island_grid;

typedef struct {
    island_grid *v;
    size_t n, cap;
    kv_grid merged;
} problem_grids;

static int collect_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    problem_grids *g = ctx;
    /* elites come sorted by island: a new island starts a new grid */
    if (g->n == 0 || g->v[g->n - 1].island != e->island) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 8;
            island_grid *v = realloc(g->v, cap * sizeof *v);
            if (!v)
                return kv_err_set(err, "out of memory");
            g->v = v;
            g->cap = cap;
        }
        g->v[g->n].island = e->island;
        kv_grid_init(&g->v[g->n].grid);
        g->n++;
    }
    kv_grid_offer(&g->v[g->n - 1].grid, e);
    return 0;
}

static void grids_free(problem_grids *g)
{
    free(g->v);
    memset(g, 0, sizeof *g);
}

/* Reads the elites of a problem into one grid per island and the merged grid;
 * with speedups, reads each elite's program for its speedup too. */
static int load_grids(kv_txn *t, const char *problem, int speedups, problem_grids *g, kv_err *err)
{
    memset(g, 0, sizeof *g);
    kv_grid_init(&g->merged);
    if (kv_each_elite(t, problem, -1, collect_elite, g, err) != 0) {
        grids_free(g);
        return -1;
    }
    for (size_t i = 0; i < g->n; i++)
        kv_grid_merge(&g->merged, &g->v[i].grid);
    if (!speedups)
        return 0;
    for (size_t i = 0; i < g->n; i++) {
        for (int c = 0; c < KV_CELL_COUNT; c++) {
            kv_grid_cell *cell = &g->v[i].grid.cell[c];
            if (!cell->occupied || !isnan(cell->speedup))
                continue; /* empty, or already filled from another grid */
            kv_program p;
            int rc = kv_get_program(t, cell->program_id, &p, err);
            if (rc < 0) {
                grids_free(g);
                return -1;
            }
            if (rc == KV_NOTFOUND) /* an elite without its program: show its fitness */
                continue;
            for (size_t j = 0; j < g->n; j++)
                kv_grid_set_speedup(&g->v[j].grid, p.id, p.speedup);
            kv_grid_set_speedup(&g->merged, p.id, p.speedup);
            kv_program_clear(&p);
        }
    }
    return 0;
}

/* ---- output helpers ---------------------------------------------------------------- */

static int finish_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kevo: writing to standard output: %s\n", strerror(errno));
        return KV_EXIT_FAIL;
    }
    return KV_EXIT_OK;
}

static int print_json(cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "kevo: out of memory formatting JSON\n");
        return KV_EXIT_FAIL;
    }
    puts(text);
    free(text);
    return finish_stdout();
}

/* An output file written through a temporary file in the same directory and
 * renamed into place when complete: readers never see half of it. */
typedef struct {
    FILE *f;
    char tmp[PATH_MAX];
    const char *path;
} atomic_out;

static int atomic_open(atomic_out *o, const char *path, kv_err *err)
{
    o->path = path;
    o->f = NULL;
    if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof o->tmp)
        return kv_err_set(err, "%s: path too long", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0)
        return kv_err_errno(err, errno, "%s: cannot create a temporary file", path);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        return kv_err_errno(err, e, "%s: fdopen", o->tmp);
    }
    return 0;
}

static void atomic_abandon(atomic_out *o)
{
    if (o->f) {
        fclose(o->f);
        unlink(o->tmp);
        o->f = NULL;
    }
}

static int atomic_commit(atomic_out *o, kv_err *err)
{
    int rc = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        rc = kv_err_errno(err, errno ? errno : EIO, "%s: write", o->tmp);
    else if (fchmod(fileno(o->f), 0644) != 0 || fsync(fileno(o->f)) != 0)
        rc = kv_err_errno(err, errno, "%s: fsync", o->tmp);
    if (fclose(o->f) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "%s: close", o->tmp);
    o->f = NULL;
    if (rc == 0 && rename(o->tmp, o->path) != 0)
        rc = kv_err_errno(err, errno, "%s: rename from %s", o->path, o->tmp);
    if (rc != 0)
        unlink(o->tmp);
    return rc;
}

/* ---- list ------------------------------------------------------------------------------ */

typedef struct {
    kv_problem_stats st;
    int has_best;
    uint64_t best_id;
    double best;
    int coverage;
    double qd;
} problem_summary;

static int summarize(kv_txn *t, const kv_problem_stats *st, problem_summary *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->st = *st;
    int n = kv_top_k(t, st->problem, 1, &out->best_id, &out->best, err);
    if (n < 0)
        return -1;
    out->has_best = n > 0;
    problem_grids g;
    if (load_grids(t, st->problem, 0, &g, err) != 0)
        return -1;
    out->coverage = kv_grid_coverage(&g.merged);
    out->qd = kv_grid_qd_score(&g.merged);
    grids_free(&g);
    return 0;
}

static cJSON *summary_to_json(const problem_summary *s, int with_qd)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok = cJSON_AddStringToObject(o, "problem", s->st.problem) &&
             cJSON_AddNumberToObject(o, "programs", (double)s->st.programs) &&
             cJSON_AddNumberToObject(o, "attempts", (double)s->st.attempts) &&
             cJSON_AddNumberToObject(o, "ok", (double)s->st.ok);
    if (ok && s->has_best) {
        cJSON *b = cJSON_AddObjectToObject(o, "best");
        ok = b && cJSON_AddNumberToObject(b, "program", (double)s->best_id) &&
             cJSON_AddNumberToObject(b, "speedup", s->best);
    } else if (ok) {
        ok = cJSON_AddNullToObject(o, "best") != NULL;
    }
    ok = ok && cJSON_AddNumberToObject(o, "coverage", s->coverage) &&
         cJSON_AddNumberToObject(o, "cells", KV_CELL_COUNT) &&
         (!with_qd || cJSON_AddNumberToObject(o, "qd_score", s->qd));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static void fmt_best(const problem_summary *s, char *out, size_t cap)
{
    if (!s->has_best) {
        snprintf(out, cap, "-");
        return;
    }
    char sp[32];
    kv_fmt_speedup(s->best, sp, sizeof sp);
    snprintf(out, cap, "%s #%" PRIu64, sp, s->best_id);
}

/* Summaries of every problem, in name order. */
static int load_summaries(kv_txn *t, problem_summary **out, size_t *n, kv_err *err)
{
    problem_list l;
    *out = NULL;
    *n = 0;
    if (load_problems(t, &l, err) != 0)
        return -1;
    problem_summary *v = calloc(l.n ? l.n : 1, sizeof *v);
    if (!v) {
        free(l.v);
        return kv_err_set(err, "out of memory");
    }
    for (size_t i = 0; i < l.n; i++) {
        if (summarize(t, &l.v[i], &v[i], err) != 0) {
            free(v);
            free(l.v);
            return -1;
        }
    }
    free(l.v);
    *out = v;
    *n = l.n;
    return 0;
}

static int run_list(const view *v, const view_opts *o)
{
    (void)v;
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    problem_summary *sum;
    size_t n;
    if (load_summaries(s.t, &sum, &n, &err) != 0) {
        snapshot_close(&s);
        return kv_cli_fail(&err);
    }
    int rc = KV_EXIT_OK;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        int ok = root && cJSON_AddStringToObject(root, "archive", kv_archive_path(s.a));
        cJSON *arr = ok ? cJSON_AddArrayToObject(root, "problems") : NULL;
        ok = arr != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            cJSON *p = summary_to_json(&sum[i], 0);
            ok = p && cJSON_AddItemToArray(arr, p);
        }
        if (!ok) {
            cJSON_Delete(root);
            root = NULL;
        }
        rc = print_json(root);
    } else if (n == 0) {
        printf("no problems yet in %s\n", kv_archive_path(s.a));
        rc = finish_stdout();
    } else {
        printf("%-24s %10s %10s %10s  %-18s %s\n", "problem", "programs", "attempts", "ok", "best",
               "coverage");
        for (size_t i = 0; i < n; i++) {
            char best[64];
            fmt_best(&sum[i], best, sizeof best);
            printf("%-24s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %-18s %d/%d\n",
                   sum[i].st.problem, sum[i].st.programs, sum[i].st.attempts, sum[i].st.ok, best,
                   sum[i].coverage, KV_CELL_COUNT);
        }
        rc = finish_stdout();
    }
    free(sum);
    snapshot_close(&s);
    return rc;
}

/* ---- show ---------------------------------------------------------------------------- */

static cJSON *grid_section(const kv_grid *g, int32_t island, int is_merged)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *grid = kv_grid_to_json(g, is_merged);
    if (!o || !grid) {
        cJSON_Delete(o);
        cJSON_Delete(grid);
        return NULL;
    }
    int ok = (is_merged || cJSON_AddNumberToObject(o, "island", island)) &&
             cJSON_AddNumberToObject(o, "coverage", kv_grid_coverage(g)) &&
             cJSON_AddNumberToObject(o, "qd_score", kv_grid_qd_score(g));
    if (!ok || !cJSON_AddItemToObject(o, "grid", grid)) {
        cJSON_Delete(grid);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *show_json(const char *problem, const problem_grids *g, const island_grid *only,
                        int one_island)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "problem", problem);
    cJSON *cells = ok ? cJSON_AddArrayToObject(root, "cells") : NULL;
    cJSON *islands = cells ? cJSON_AddArrayToObject(root, "islands") : NULL;
    ok = islands != NULL;
    for (int i = 0; ok && i < KV_CELL_COUNT; i++) {
        char name[KV_CELL_NAME_MAX];
        kv_cell_name(i, name);
        cJSON *c = cJSON_CreateString(name);
        ok = c && cJSON_AddItemToArray(cells, c);
    }
    if (one_island) {
        cJSON *sec = ok ? grid_section(&only->grid, only->island, 0) : NULL;
        ok = sec && cJSON_AddItemToArray(islands, sec);
    } else {
        for (size_t i = 0; ok && i < g->n; i++) {
            cJSON *sec = grid_section(&g->v[i].grid, g->v[i].island, 0);
            ok = sec && cJSON_AddItemToArray(islands, sec);
        }
        cJSON *m = ok ? grid_section(&g->merged, 0, 1) : NULL;
        ok = m && cJSON_AddItemToObject(root, "merged", m);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void show_text(const char *problem, const problem_grids *g, const island_grid *only,
                      int one_island)
{
    const char *empty = kv_grid_empty_glyph(stdout);
    if (one_island) {
        const kv_grid *grid = &only->grid;
        printf("%s, island %d: coverage %d/%d, QD score %.4f\n\n", problem, (int)only->island,
               kv_grid_coverage(grid), KV_CELL_COUNT, kv_grid_qd_score(grid));
        kv_grid_print(stdout, grid, "  ", empty);
        if (kv_grid_coverage(grid) == 0) {
            printf("\nno elites on island %d; islands with elites:", (int)only->island);
            for (size_t i = 0; i < g->n; i++)
                printf("%s %d", i ? "," : "", (int)g->v[i].island);
            printf("%s\n", g->n ? "" : " none");
        }
        return;
    }
    printf("%s: %zu island%s, coverage %d/%d, QD score %.4f\n", problem, g->n,
           g->n == 1 ? "" : "s", kv_grid_coverage(&g->merged), KV_CELL_COUNT,
           kv_grid_qd_score(&g->merged));
    for (size_t i = 0; i < g->n; i++) {
        const kv_grid *grid = &g->v[i].grid;
        printf("\nisland %d: coverage %d/%d, QD score %.4f\n", (int)g->v[i].island,
               kv_grid_coverage(grid), KV_CELL_COUNT, kv_grid_qd_score(grid));
        kv_grid_print(stdout, grid, "  ", empty);
    }
    printf("\nmerged (best over islands): coverage %d/%d, QD score %.4f\n",
           kv_grid_coverage(&g->merged), KV_CELL_COUNT, kv_grid_qd_score(&g->merged));
    kv_grid_print(stdout, &g->merged, "  ", empty);
}

static int run_show(const view *v, const view_opts *o)
{
    (void)v;
    const char *problem = o->pos[0];
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    problem_grids g;
    if (require_problem(&s, problem, &err) != 0 || load_grids(s.t, problem, 1, &g, &err) != 0) {
        snapshot_close(&s);
        return kv_cli_fail(&err);
    }
    island_grid only = {.island = o->island};
    kv_grid_init(&only.grid);
    for (size_t i = 0; o->has_island && i < g.n; i++)
        if (g.v[i].island == o->island)
            only = g.v[i];
    int rc;
    if (o->json) {
        rc = print_json(show_json(problem, &g, &only, o->has_island));
    } else {
        show_text(problem, &g, &only, o->has_island);
        rc = finish_stdout();
    }
    grids_free(&g);
    snapshot_close(&s);
    return rc;
}

/* ---- best ---------------------------------------------------------------------------- */

/* The id of the best program: overall (ranking) or of one cell (merged grid). */
static int find_best(const snapshot *s, const char *problem, int cell, uint64_t *id, kv_err *err)
{
    if (cell < 0) {
        double sp;
        int n = kv_top_k(s->t, problem, 1, id, &sp, err);
        if (n < 0)
            return -1;
        if (n == 0)
            return kv_err_set(err, "problem '%s' has no ok program yet in %s", problem,
                              kv_archive_path(s->a));
        return 0;
    }
    problem_grids g;
    if (load_grids(s->t, problem, 0, &g, err) != 0)
        return -1;
    const kv_grid_cell *c = &g.merged.cell[cell];
    int occupied = c->occupied;
    *id = c->program_id;
    char name[KV_CELL_NAME_MAX], occ[256];
    kv_cell_name(cell, name);
    size_t used = 0;
    occ[0] = 0;
    for (int i = 0; !occupied && i < KV_CELL_COUNT; i++) {
        if (!g.merged.cell[i].occupied)
            continue;
        char other[KV_CELL_NAME_MAX];
        kv_cell_name(i, other);
        int n = snprintf(occ + used, sizeof occ - used, "%s%s", used ? ", " : "", other);
        used += n > 0 ? (size_t)n : 0;
    }
    grids_free(&g);
    if (!occupied)
        return kv_err_set(err, "problem '%s' has no elite in cell %s in %s (occupied cells: %s)",
                          problem, name, kv_archive_path(s->a), used ? occ : "none");
    return 0;
}

/* Header + source, malloc'ed. */
static char *export_text(const kv_program *p, const char *src, size_t len, size_t *out_len)
{
    char now[64];
    kv_format_utc(kv_wall_ns(), now, sizeof now);
    char *header = kv_export_header(p, now);
    if (!header)
        return NULL;
    size_t hl = strlen(header);
    char *text = malloc(hl + len + 1);
    if (text) {
        memcpy(text, header, hl);
        memcpy(text + hl, src, len);
        text[hl + len] = 0;
        *out_len = hl + len;
    }
    free(header);
    return text;
}

static int run_best(const view *v, const view_opts *o)
{
    (void)v;
    const char *problem = o->pos[0];
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    uint64_t id = 0;
    kv_program p;
    memset(&p, 0, sizeof p);
    char *src = NULL, *text = NULL;
    size_t len = 0, text_len = 0;
    int rc = require_problem(&s, problem, &err);
    if (rc == 0)
        rc = find_best(&s, problem, o->cell, &id, &err);
    if (rc == 0) {
        rc = kv_get_program(s.t, id, &p, &err);
        if (rc == KV_NOTFOUND)
            rc = kv_err_set(&err, "%s: elite program #%" PRIu64 " of '%s' is missing",
                            kv_archive_path(s.a), id, problem);
    }
    if (rc == 0) {
        rc = kv_get_source(s.t, p.source_hash, &src, &len, &err);
        if (rc == KV_NOTFOUND)
            rc = kv_err_set(&err, "%s: the source of program #%" PRIu64 " is missing",
                            kv_archive_path(s.a), id);
    }
    if (rc == 0 && !(text = export_text(&p, src, len, &text_len)))
        rc = kv_err_set(&err, "out of memory");
    if (rc == 0 && o->out) {
        rc = kv_write_file_atomic(o->out, text, text_len, &err);
        if (rc == 0) {
            char sp[32];
            kv_fmt_speedup(p.speedup, sp, sizeof sp);
            printf("wrote %s: program #%" PRIu64 " of %s, %s\n", o->out, p.id, p.problem, sp);
        }
    } else if (rc == 0) {
        fwrite(text, 1, text_len, stdout);
    }
    free(text);
    free(src);
    kv_program_clear(&p);
    snapshot_close(&s);
    if (rc != 0)
        return kv_cli_fail(&err);
    return finish_stdout();
}

/* ---- lineage ----------------------------------------------------------------------- */

/* A set of program ids (open addressing; 0 is the empty slot). */
typedef struct {
    uint64_t *slot;
    size_t cap, n;
} id_set;

static size_t id_hash(uint64_t id, size_t cap)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* 1 when added, 0 when already there, -1 when out of memory. */
static int id_set_add(id_set *s, uint64_t id)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t j = id_hash(s->slot[i], cap);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t j = id_hash(id, s->cap);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (s->slot[j] == id)
            return 0;
    s->slot[j] = id;
    s->n++;
    return 1;
}

typedef struct {
    kv_txn *t;
    id_set seen;
    int max_depth;
    size_t shown;
} lineage_walk;

static void print_node(int level, const char *text, const char *note)
{
    printf("%*s%s%s\n", 2 * level, "", text, note);
}

/* Prints program id at level; 1 when it should be expanded further. */
static int lineage_node(lineage_walk *w, uint64_t id, int level, kv_program *p, kv_err *err)
{
    char text[512];
    int rc = kv_get_program(w->t, id, p, err);
    if (rc < 0)
        return -1;
    if (rc == KV_NOTFOUND) {
        snprintf(text, sizeof text, "#%" PRIu64, id);
        print_node(level, text, "  (not in the archive)");
        return 0;
    }
    kv_program_summary(p, text, sizeof text);
    int added = id_set_add(&w->seen, id);
    if (added < 0) {
        kv_program_clear(p);
        return kv_err_set(err, "out of memory");
    }
    print_node(level, text, added ? "" : "  (shown above)");
    w->shown++;
    if (!added)
        kv_program_clear(p);
    return added;
}

static int walk_ancestors(lineage_walk *w, const kv_program *child, int level, kv_err *err)
{
    if (level > w->max_depth)
        return 0;
    for (uint32_t i = 0; i < child->n_parents && i < KV_MAX_PARENTS; i++) {
        kv_program p;
        int rc = lineage_node(w, child->parents[i], level, &p, err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        rc = walk_ancestors(w, &p, level + 1, err);
        kv_program_clear(&p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

typedef struct {
    uint64_t *v;
    size_t n, cap;
} id_list;

static int collect_id(uint64_t id, void *ctx, kv_err *err)
{
    id_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}

static int walk_descendants(lineage_walk *w, uint64_t parent, int level, kv_err *err)
{
    if (level > w->max_depth)
        return 0;
    id_list kids = {0};
    if (kv_each_child(w->t, parent, collect_id, &kids, err) != 0) {
        free(kids.v);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < kids.n; i++) {
        kv_program p;
        int r = lineage_node(w, kids.v[i], level, &p, err);
        if (r < 0)
            rc = -1;
        if (r <= 0)
            continue;
        kv_program_clear(&p);
        rc = walk_descendants(w, kids.v[i], level + 1, err);
    }
    free(kids.v);
    return rc;
}

static int parse_program_id(const char *s, uint64_t *id)
{
    long long n;
    if (s[0] == '#')
        s++;
    if (kv_cli_parse_int(s, 1, LLONG_MAX, &n) != 0)
        return -1;
    *id = (uint64_t)n;
    return 0;
}

static int lineage_print(kv_txn *t, const char *path, uint64_t id, int depth, kv_err *err)
{
    kv_program root;
    int rc = kv_get_program(t, id, &root, err);
    if (rc == KV_NOTFOUND)
        return kv_err_set(err, "program #%" PRIu64 " not found in %s", id, path);
    if (rc != 0)
        return -1;
    char text[512];
    kv_program_summary(&root, text, sizeof text);
    printf("%s  (problem %s, island %d)\n", text, root.problem, (int)root.island);
    lineage_walk w = {.t = t, .max_depth = depth};
    rc = id_set_add(&w.seen, id) < 0 ? kv_err_set(err, "out of memory") : 0;
    if (rc == 0) {
        printf("\nancestors (up to %d generation%s):\n", depth, depth == 1 ? "" : "s");
        rc = walk_ancestors(&w, &root, 1, err);
        if (rc == 0 && w.shown == 0)
            print_node(1, "(none)", "");
    }
    if (rc == 0) {
        free(w.seen.slot);
        memset(&w.seen, 0, sizeof w.seen);
        w.shown = 0;
        rc = id_set_add(&w.seen, id) < 0 ? kv_err_set(err, "out of memory") : 0;
    }
    if (rc == 0) {
        printf("\ndescendants (up to %d generation%s):\n", depth, depth == 1 ? "" : "s");
        rc = walk_descendants(&w, id, 1, err);
        if (rc == 0 && w.shown == 0)
            print_node(1, "(none)", "");
    }
    free(w.seen.slot);
    kv_program_clear(&root);
    return rc;
}

static int run_lineage(const view *v, const view_opts *o)
{
    uint64_t id;
    if (parse_program_id(o->pos[0], &id) != 0)
        return view_usage(v, "'%s' is not a program id%s", o->pos[0], NULL);
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    int rc = lineage_print(s.t, kv_archive_path(s.a), id, o->depth, &err);
    snapshot_close(&s);
    if (rc != 0) {
        fflush(stdout);
        return kv_cli_fail(&err);
    }
    return finish_stdout();
}

/* ---- attempts ------------------------------------------------------------------------ */

typedef struct {
    const view_opts *o;
    long long printed;
    int json;
    /* tail mode: the last `limit` matches, in a ring */
    kv_attempt *ring;
    size_t ring_cap, ring_n, ring_head;
} attempt_walk;

static int attempt_matches(const view_opts *o, const kv_attempt *a)
{
    if (o->problem && strcmp(a->problem, o->problem) != 0)
        return 0;
    if (o->has_verdict && a->verdict != o->verdict)
        return 0;
    if (o->has_stage && a->stage != o->stage)
        return 0;
    return 1;
}

static int emit_attempt(attempt_walk *w, const kv_attempt *a, kv_err *err)
{
    if (!w->json) {
        kv_attempt_print(stdout, a);
        w->printed++;
        return 0;
    }
    cJSON *j = kv_attempt_to_json(a);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text)
        return kv_err_set(err, "out of memory formatting JSON");
    printf("%s%s", w->printed ? ",\n" : "", text);
    free(text);
    w->printed++;
    return 0;
}

static int ring_push(attempt_walk *w, const kv_attempt *a, kv_err *err)
{
    size_t limit = (size_t)w->o->limit;
    if (w->ring_n < limit && w->ring_n == w->ring_cap) {
        size_t cap = w->ring_cap ? 2 * w->ring_cap : 64;
        if (cap > limit)
            cap = limit;
        kv_attempt *r = realloc(w->ring, cap * sizeof *r);
        if (!r)
            return kv_err_set(err, "out of memory");
        w->ring = r;
        w->ring_cap = cap;
    }
    char *detail = a->detail ? strdup(a->detail) : NULL;
    if (a->detail && !detail)
        return kv_err_set(err, "out of memory");
    kv_attempt *slot;
    if (w->ring_n < limit) {
        slot = &w->ring[w->ring_n++]; /* the ring fills in order before it wraps */
    } else {
        slot = &w->ring[w->ring_head];
        kv_attempt_clear(slot);
        w->ring_head = (w->ring_head + 1) % limit;
    }
    *slot = *a;
    slot->detail = detail;
    return 0;
}

static int on_attempt(const kv_attempt *a, void *ctx, kv_err *err)
{
    attempt_walk *w = ctx;
    if (!attempt_matches(w->o, a))
        return 0;
    if (w->o->limit && !w->o->from)
        return ring_push(w, a, err) == 0 ? 0 : -1;
    if (emit_attempt(w, a, err) != 0)
        return -1;
    return w->o->limit && w->printed >= w->o->limit ? 1 : 0;
}

static void ring_free(attempt_walk *w)
{
    for (size_t i = 0; i < w->ring_n; i++)
        kv_attempt_clear(&w->ring[i]);
    free(w->ring);
    w->ring = NULL;
}

static int list_attempts(kv_txn *t, attempt_walk *w, kv_err *err)
{
    const view_opts *o = w->o;
    uint64_t from = o->from ? o->from : 1;
    if (o->limit && !o->from && !o->problem && !o->has_verdict && !o->has_stage) {
        kv_counters c; /* no filter: the tail starts limit before the end */
        if (kv_get_counters(t, &c, err) != 0)
            return -1;
        if (c.next_attempt_seq > (uint64_t)o->limit)
            from = c.next_attempt_seq - (uint64_t)o->limit;
    }
    if (kv_each_attempt(t, from, on_attempt, w, err) != 0)
        return -1;
    size_t n = w->ring_n;
    for (size_t i = 0; i < n; i++)
        if (emit_attempt(w, &w->ring[(w->ring_head + i) % n], err) != 0)
            return -1;
    return 0;
}

static int run_attempts(const view *v, const view_opts *o)
{
    (void)v;
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    attempt_walk w = {.o = o, .json = o->json};
    if (o->json)
        fputs("[\n", stdout);
    else
        kv_attempt_print_header(stdout);
    int rc = list_attempts(s.t, &w, &err);
    if (o->json)
        fputs(w.printed ? "\n]\n" : "]\n", stdout);
    ring_free(&w);
    snapshot_close(&s);
    if (rc != 0) {
        fflush(stdout);
        return kv_cli_fail(&err);
    }
    return finish_stdout();
}

/* ---- stats ----------------------------------------------------------------------------- */

static cJSON *stats_json(const snapshot *s, const kv_counters *c, const kv_run_state *st,
                         int has_state, const problem_summary *sum, size_t n, double total)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    int ok = cJSON_AddStringToObject(root, "archive", kv_archive_path(s->a)) &&
             cJSON_AddNumberToObject(root, "programs", (double)c->programs) &&
             cJSON_AddNumberToObject(root, "attempts", (double)c->attempts) &&
             cJSON_AddNumberToObject(root, "elites", (double)c->elites);
    cJSON *by = ok ? cJSON_AddObjectToObject(root, "attempts_by_verdict") : NULL;
    ok = by != NULL;
    for (int i = 0; ok && i < KV_VERDICT_COUNT; i++)
        ok = cJSON_AddNumberToObject(by, kv_verdict_name(i), (double)c->attempts_by_verdict[i]) !=
             NULL;
    cJSON *arr = ok ? cJSON_AddArrayToObject(root, "problems") : NULL;
    ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *p = summary_to_json(&sum[i], 1);
        ok = p && cJSON_AddItemToArray(arr, p);
    }
    ok = ok && cJSON_AddNumberToObject(root, "qd_score", total);
    if (ok && has_state) {
        char updated[32];
        snprintf(updated, sizeof updated, "%" PRId64, st->updated_ns);
        cJSON *so = cJSON_AddObjectToObject(root, "state");
        ok = so && cJSON_AddNumberToObject(so, "evaluations", (double)st->evaluations) &&
             cJSON_AddNumberToObject(so, "wall_s", st->wall_s) &&
             cJSON_AddNumberToObject(so, "tokens_in", (double)st->tokens_in) &&
             cJSON_AddNumberToObject(so, "tokens_out", (double)st->tokens_out) &&
             cJSON_AddNumberToObject(so, "cost_usd", st->cost_usd) &&
             cJSON_AddRawToObject(so, "updated_ns", updated) != NULL;
    } else if (ok) {
        ok = cJSON_AddNullToObject(root, "state") != NULL;
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void stats_text(const snapshot *s, const kv_counters *c, const kv_run_state *st,
                       int has_state, const problem_summary *sum, size_t n, double total)
{
    printf("archive     %s\n", kv_archive_path(s->a));
    printf("programs    %" PRIu64 "\n", c->programs);
    printf("attempts    %" PRIu64 "\n", c->attempts);
    printf("elites      %" PRIu64 "\n", c->elites);
    if (has_state) {
        char when[64];
        kv_fmt_time(st->updated_ns, when, sizeof when);
        printf("spent       %" PRIu64 " evaluations, %.1f s, %" PRIu64 " tokens, $%.4f (at %s)\n",
               st->evaluations, st->wall_s, st->tokens_in + st->tokens_out, st->cost_usd, when);
    }
    printf("\nattempts by verdict\n");
    for (int i = 0; i < KV_VERDICT_COUNT; i++)
        printf("  %-16s %10" PRIu64 "\n", kv_verdict_name(i), c->attempts_by_verdict[i]);
    printf("\n%-24s %9s %12s  %s\n", "problem", "coverage", "QD score", "best");
    for (size_t i = 0; i < n; i++) {
        char best[64], cov[32];
        fmt_best(&sum[i], best, sizeof best);
        snprintf(cov, sizeof cov, "%d/%d", sum[i].coverage, KV_CELL_COUNT);
        printf("%-24s %9s %12.4f  %s\n", sum[i].st.problem, cov, sum[i].qd, best);
    }
    printf("%-24s %9s %12.4f\n", "total", "", total);
}

static int run_stats(const view *v, const view_opts *o)
{
    (void)v;
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    kv_counters c;
    kv_run_state st;
    problem_summary *sum = NULL;
    size_t n = 0;
    int has_state = 0;
    int rc = kv_get_counters(s.t, &c, &err);
    if (rc == 0) {
        rc = kv_get_state(s.t, &st, &err);
        has_state = rc == 0;
        rc = rc == KV_NOTFOUND ? 0 : rc;
    }
    if (rc == 0)
        rc = load_summaries(s.t, &sum, &n, &err);
    if (rc != 0) {
        snapshot_close(&s);
        return kv_cli_fail(&err);
    }
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += sum[i].qd;
    if (o->json) {
        rc = print_json(stats_json(&s, &c, &st, has_state, sum, n, total));
    } else {
        stats_text(&s, &c, &st, has_state, sum, n, total);
        rc = finish_stdout();
    }
    free(sum);
    snapshot_close(&s);
    return rc;
}

/* ---- export ------------------------------------------------------------------------------ */

typedef struct {
    kv_txn *t;
    const view_opts *o;
    FILE *out;
    uint64_t n;
} export_walk;

static int on_export(const kv_program *p, void *ctx, kv_err *err)
{
    export_walk *w = ctx;
    if (w->o->problem && strcmp(p->problem, w->o->problem) != 0)
        return 0;
    char *src = NULL;
    if (w->o->with_source) {
        int rc = kv_get_source(w->t, p->source_hash, &src, NULL, err);
        if (rc < 0)
            return -1;
        if (rc == KV_NOTFOUND)
            return kv_err_set(err, "the source of program #%" PRIu64 " is missing", p->id);
    }
    int rc = 0;
    if (w->o->csv) {
        rc = kv_csv_program(w->out, p, src) == 0 ? 0 : kv_err_set(err, "out of memory");
    } else {
        cJSON *j = kv_program_to_json(p, src);
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;
        cJSON_Delete(j);
        if (text)
            fprintf(w->out, "%s%s", w->n ? ",\n" : "", text);
        else
            rc = kv_err_set(err, "out of memory formatting JSON");
        free(text);
    }
    free(src);
    if (rc == 0 && ferror(w->out))
        rc = kv_err_errno(err, errno ? errno : EIO, "writing the export");
    w->n++;
    return rc;
}

static int export_programs(kv_txn *t, const view_opts *o, FILE *out, kv_err *err)
{
    export_walk w = {.t = t, .o = o, .out = out};
    if (o->csv)
        kv_csv_program_header(out, o->with_source);
    else
        fputs("[\n", out);
    if (kv_each_program(t, on_export, &w, err) != 0)
        return -1;
    if (!o->csv)
        fputs(w.n ? "\n]\n" : "]\n", out);
    return 0;
}

static int run_export(const view *v, const view_opts *o)
{
    (void)v;
    kv_err err = {{0}};
    snapshot s;
    if (snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    int rc = o->problem ? require_problem(&s, o->problem, &err) : 0;
    atomic_out file = {0};
    if (rc == 0 && o->out)
        rc = atomic_open(&file, o->out, &err);
    if (rc == 0)
        rc = export_programs(s.t, o, o->out ? file.f : stdout, &err);
    if (o->out && file.f) {
        if (rc == 0)
            rc = atomic_commit(&file, &err);
        else
            atomic_abandon(&file);
    }
    snapshot_close(&s);
    if (rc != 0) {
        fflush(stdout);
        return kv_cli_fail(&err);
    }
    return finish_stdout();
}

/* ---- dispatch ------------------------------------------------------------------------- */

static const view views[] = {
    {"list", usage_list, BIT(OPT_JSON), 0, 0, "", run_list},
    {"show", usage_show, BIT(OPT_ISLAND) | BIT(OPT_JSON), 1, 1, "PROBLEM", run_show},
    {"best", usage_best, BIT(OPT_CELL) | BIT(OPT_OUT), 1, 1, "PROBLEM", run_best},
    {"lineage", usage_lineage, BIT(OPT_DEPTH), 1, 1, "program ID", run_lineage},
    {"attempts", usage_attempts,
     BIT(OPT_PROBLEM) | BIT(OPT_VERDICT) | BIT(OPT_STAGE) | BIT(OPT_LIMIT) | BIT(OPT_FROM) |
         BIT(OPT_JSON),
     0, 0, "", run_attempts},
    {"stats", usage_stats, BIT(OPT_JSON), 0, 0, "", run_stats},
    {"export", usage_export, BIT(OPT_FORMAT) | BIT(OPT_PROBLEM) | BIT(OPT_WITH_SOURCE) | BIT(OPT_OUT),
     0, 0, "", run_export},
};
#define N_VIEWS (sizeof views / sizeof views[0])

static const view *find_view(const char *name)
{
    for (size_t i = 0; i < N_VIEWS; i++)
        if (strcmp(views[i].name, name) == 0)
            return &views[i];
    return NULL;
}

static int unknown_view(const char *name)
{
    const char *names[N_VIEWS];
    for (size_t i = 0; i < N_VIEWS; i++)
        names[i] = views[i].name;
    const char *near = kv_suggest(name, names, N_VIEWS);
    if (near)
        return kv_cli_usage("archive", usage, "unknown view '%s'; did you mean '%s'?", name, near);
    return kv_cli_usage("archive", usage, "unknown view '%s'", name);
}

/* kevo archive help [VIEW] */
static int run_help(int argc, char **argv)
{
    if (argc < 2)
        return kv_cli_help(usage);
    if (argc > 2)
        return kv_cli_usage("archive", usage, "'help' takes at most one view name");
    const view *v = find_view(argv[1]);
    return v ? kv_cli_help(v->usage) : unknown_view(argv[1]);
}

static int run(int argc, char **argv)
{
    const char *run_dir = NULL;
    int i = 1;
    /* options before the view: --run DIR, --run=DIR, --help */
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return kv_cli_help(usage);
        if (strcmp(a, "--run") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return kv_cli_usage("archive", usage, "option '--run' needs a directory");
            run_dir = argv[++i];
        } else if (strncmp(a, "--run=", 6) == 0 && a[6]) {
            run_dir = a + 6;
        } else {
            return kv_cli_usage("archive", usage, "unknown option '%s'", a);
        }
    }
    if (i >= argc)
        return kv_cli_usage("archive", usage, "missing view (list, show, best, lineage, "
                                              "attempts, stats or export)");
    if (strcmp(argv[i], "help") == 0)
        return run_help(argc - i, argv + i);
    const view *v = find_view(argv[i]);
    if (!v)
        return unknown_view(argv[i]);
    view_opts o = {.run_dir = run_dir, .cell = -1, .depth = 10};
    int rc = parse_view_args(v, argc - i, argv + i, &o);
    if (rc != 0)
        return rc;
    if (o.help)
        return kv_cli_help(v->usage);
    if (!o.run_dir)
        o.run_dir = kv_cli_default_run_dir();
    return v->run(v, &o);
}

const kv_command kv_cmd_archive = {
    .name = "archive",
    .summary = "inspect a run's archive: grids, best kernels, lineage, attempts",
    .usage = usage,
    .run = run,
};
