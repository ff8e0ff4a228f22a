/* cmd_archive.c — kevo archive: read-only views of a run's archive (list,
 * show, best, lineage, attempts, stats, export). Every view opens the archive
 * read-only and reads one snapshot, so it works while a run writes; and
 * restore, which puts a snapshot file back (archive_restore.c), and upgrade,
 * which converts an archive of an older schema (archive_upgrade.c).
 * This file holds the command: its usage, the dispatch to the views, the
 * parsing of their options, and the output helpers that the views share
 * (archive_cmd.h). Each view group has its own file (archive_list.c,
 * archive_show.c, archive_lineage.c, archive_attempts.c, archive_export.c);
 * the snapshot, the grids and the formatting live in report/ (snapshot.h,
 * views.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json_out.h"
#include "archive_cmd.h"
#include "cli.h"
#include "common/cell.h"
#include "common/suggest.h"

/* ---- usage texts ----------------------------------------------------------- */

static const char usage[] =
    "usage: kevo archive [--run DIR] <view> [options]\n"
    "\n"
    "Read-only views of a run's archive; safe while the run writes (each view reads\n"
    "one consistent snapshot). DIR defaults to $KEVO_RUN, else the run_dir of the\n"
    "default configuration when it holds an archive, else the most recent run\n"
    "beside it (said on stderr); --run may also follow the view's name.\n"
    "\n"
    "views:\n"
    "  list                      problems: programs, attempts, ok, best, coverage\n"
    "  show PROBLEM              the behaviour grids (per island and merged)\n"
    "  best PROBLEM              the best program's source, with a header;\n"
    "                            --per-size: the best program at each size\n"
    "  lineage ID                ancestors and descendants of a program\n"
    "  attempts                  the attempt log (every proposal and evaluation)\n"
    "  stats                     counters, verdicts, coverage and QD score\n"
    "  export                    every program record as JSON, or one row per\n"
    "                            program and size as CSV or JSON lines\n"
    "  history                   the best speedup over time per problem and size\n"
    "                            (from the run's events.jsonl)\n"
    "\n"
    "'kevo archive <view> --help' describes a view.\n"
    "\n"
    "kevo archive restore DIR [--snapshot FILE] puts a snapshot of the archive back\n"
    "(the newest good one in DIR/snapshots); the archive it replaces is kept aside.\n"
    "kevo archive verify [--run DIR] walks and decodes every record, and names what\n"
    "is damaged.\n"
    "kevo archive upgrade DIR converts an archive of an older schema to this kevo's;\n"
    "the old file is kept aside.\n";

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
    OPT_PER_SIZE,
    OPT_HELP,
    OPT_COUNT
};

#define BIT(o) (1u << (o))
/* getopt_long's value for option id (clear of 1, which '-' mode returns for
 * positional arguments, and of the short options '?', ':' and 'h') */
#define OPT_VAL_BASE 256

static const struct {
    const char *name;
    int has_arg;
} opt_table[OPT_COUNT] = {
    [OPT_RUN] = {"run", required_argument},
    [OPT_JSON] = {"json", no_argument},
    [OPT_ISLAND] = {"island", required_argument},
    [OPT_CELL] = {"cell", required_argument},
    [OPT_OUT] = {"out", required_argument},
    [OPT_DEPTH] = {"depth", required_argument},
    [OPT_PROBLEM] = {"problem", required_argument},
    [OPT_VERDICT] = {"verdict", required_argument},
    [OPT_STAGE] = {"stage", required_argument},
    [OPT_LIMIT] = {"limit", required_argument},
    [OPT_FROM] = {"from", required_argument},
    [OPT_FORMAT] = {"format", required_argument},
    [OPT_WITH_SOURCE] = {"with-source", no_argument},
    [OPT_PER_SIZE] = {"per-size", no_argument},
    [OPT_HELP] = {"help", no_argument},
};

int kv_view_usage(const view *v, const char *fmt, ...)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "archive %s", v->name);
    va_list ap;
    va_start(ap, fmt);
    int rc = kv_cli_vusage(cmd, v->usage, fmt, ap);
    va_end(ap);
    return rc;
}

/* The valid values of an option, for its error message: "a, b, c". */
typedef const char *name_fn(int i, char buf[KV_CELL_NAME_MAX]);

static const char *cell_name(int i, char buf[KV_CELL_NAME_MAX])
{
    kv_cell_name(i, buf);
    return buf;
}

static const char *verdict_name(int i, char buf[KV_CELL_NAME_MAX])
{
    (void)buf;
    return kv_verdict_name(i);
}

static const char *stage_name(int i, char buf[KV_CELL_NAME_MAX])
{
    (void)buf;
    return kv_stage_name(i);
}

static void list_names(char *out, size_t cap, int count, name_fn *name)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < count && used < cap; i++) {
        char buf[KV_CELL_NAME_MAX];
        int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", name(i, buf));
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
            return kv_view_usage(v, "--run needs a directory");
        o->run_dir = arg;
        return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_ISLAND:
        if (kv_cli_parse_int(arg, INT32_MIN, INT32_MAX, &n) != 0)
            return kv_view_usage(v, "--island: '%s' is not an island number", arg);
        o->has_island = 1;
        o->island = (int32_t)n;
        return 0;
    case OPT_CELL:
        o->cell = kv_cell_parse(arg);
        if (o->cell < 0) {
            list_names(valid, sizeof valid, KV_CELL_COUNT, cell_name);
            return kv_view_usage(v, "--cell: unknown cell '%s'; valid cells: %s", arg, valid);
        }
        return 0;
    case OPT_OUT:
        if (!*arg)
            return kv_view_usage(v, "--out needs a file name");
        o->out = arg;
        return 0;
    case OPT_DEPTH:
        if (kv_cli_parse_int(arg, 0, 1000000, &n) != 0)
            return kv_view_usage(v, "--depth: '%s' is not a depth (0 or more)", arg);
        o->depth = (int)n;
        return 0;
    case OPT_PROBLEM:
        if (!*arg)
            return kv_view_usage(v, "--problem needs a name");
        o->problem = arg;
        return 0;
    case OPT_VERDICT:
        if (kv_verdict_parse(arg, &o->verdict) != 0) {
            list_names(valid, sizeof valid, KV_VERDICT_COUNT, verdict_name);
            return kv_view_usage(v, "--verdict: unknown verdict '%s'; valid verdicts: %s", arg,
                                 valid);
        }
        o->has_verdict = 1;
        return 0;
    case OPT_STAGE:
        if (kv_stage_parse(arg, &o->stage) != 0) {
            list_names(valid, sizeof valid, KV_STAGE_COUNT, stage_name);
            return kv_view_usage(v, "--stage: unknown stage '%s'; valid stages: %s", arg, valid);
        }
        o->has_stage = 1;
        return 0;
    case OPT_LIMIT:
        if (kv_cli_parse_int(arg, 1, LLONG_MAX, &n) != 0)
            return kv_view_usage(v, "--limit: '%s' is not a count (1 or more)", arg);
        o->limit = n;
        return 0;
    case OPT_FROM:
        if (kv_cli_parse_int(arg, 1, LLONG_MAX, &n) != 0)
            return kv_view_usage(v, "--from: '%s' is not a sequence number (1 or more)", arg);
        o->from = (uint64_t)n;
        return 0;
    case OPT_FORMAT:
        if (strcmp(arg, "json") != 0 && strcmp(arg, "csv") != 0 && strcmp(arg, "jsonl") != 0)
            return kv_view_usage(v,
                                 "--format: unknown format '%s'; valid formats: json, csv, "
                                 "jsonl",
                                 arg);
        o->csv = strcmp(arg, "csv") == 0;
        o->jsonl = strcmp(arg, "jsonl") == 0;
        return 0;
    case OPT_WITH_SOURCE: o->with_source = 1; return 0;
    case OPT_PER_SIZE: o->per_size = 1; return 0;
    case OPT_HELP: o->help = 1; return 0;
    }
    return kv_view_usage(v, "internal error: option %s", "?");
}

static int add_positional(const view *v, view_opts *o, const char *arg)
{
    if (o->n_pos >= v->max_pos) {
        if (v->max_pos == 0)
            return kv_view_usage(v, "unexpected argument '%s' (this view takes none)", arg);
        return kv_view_usage(v, "unexpected extra argument '%s'", arg);
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
        longopts[n++] =
            (struct option){opt_table[id].name, opt_table[id].has_arg, NULL, OPT_VAL_BASE + id};
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
            rc = kv_view_usage(v, "option '%s' needs a value", bad);
        else if (c == '?' && optopt && optopt != '-')
            rc = kv_view_usage(v, "unknown option '-%s'", (char[]){(char)optopt, 0});
        else if (c == '?')
            rc = kv_view_usage(v, "unknown option '%s'", bad);
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
        return kv_view_usage(v, "missing %s", v->pos_name);
    return 0;
}

/* ---- output and memory ------------------------------------------------------------ */

int kv_cli_print_json(cJSON *root, kv_err *err)
{
    char *text = root ? kv_json_print(root, 1, NULL) : NULL;
    cJSON_Delete(root);
    if (!text)
        return kv_err_set(err, "out of memory formatting JSON");
    puts(text);
    free(text);
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------- */

static const view views[] = {
    {"list", kv_view_list_usage, BIT(OPT_JSON), 0, 0, "", NULL, kv_view_list},
    {"show", kv_view_show_usage, BIT(OPT_ISLAND) | BIT(OPT_JSON), 1, 1, "PROBLEM", NULL,
     kv_view_show},
    {"best", kv_view_best_usage,
     BIT(OPT_CELL) | BIT(OPT_OUT) | BIT(OPT_PER_SIZE) | BIT(OPT_PROBLEM) | BIT(OPT_JSON), 0, 1,
     "PROBLEM", kv_view_best_check, kv_view_best},
    {"lineage", kv_view_lineage_usage, BIT(OPT_DEPTH), 1, 1, "program ID", kv_view_lineage_check,
     kv_view_lineage},
    {"attempts", kv_view_attempts_usage,
     BIT(OPT_PROBLEM) | BIT(OPT_VERDICT) | BIT(OPT_STAGE) | BIT(OPT_LIMIT) | BIT(OPT_FROM) |
         BIT(OPT_JSON),
     0, 0, "", NULL, kv_view_attempts},
    {"stats", kv_view_stats_usage, BIT(OPT_JSON), 0, 0, "", NULL, kv_view_stats},
    {"export", kv_view_export_usage,
     BIT(OPT_FORMAT) | BIT(OPT_PROBLEM) | BIT(OPT_WITH_SOURCE) | BIT(OPT_OUT), 0, 0, "", NULL,
     kv_view_export},
    {"history", kv_view_history_usage, BIT(OPT_PROBLEM) | BIT(OPT_JSON), 0, 0, "", NULL,
     kv_view_history},
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

/* Runs view v on one snapshot of the archive, in this process; returns the
 * exit code. */
static int view_here(const view *v, const view_opts *o)
{
    kv_err err = {{0}};
    kv_report_snapshot s;
    if (kv_report_snapshot_open(o->run_dir, &s, &err) != 0)
        return kv_cli_fail(&err);
    int rc = KV_EXIT_OK;
    if (v->run(o, &s, &err) != 0) {
        kv_cli_flush_stdout();        /* what the view printed comes before the message */
        if (kv_cli_stdout_closed()) { /* it stopped writing for a reader that has gone */
            kv_report_snapshot_close(&s);
            return KV_EXIT_OK;
        }
        rc = kv_cli_fail(&err);
        /* a record the view could not read: the full walk says whether the
         * archive is damaged, and where */
        kv_err why = {{0}};
        kv_walk_info walked;
        if (kv_archive_walk(o->run_dir, NULL, 1, NULL, &walked, &why) != 0)
            kv_cli_fail(&why);
    }
    kv_report_snapshot_close(&s);
    return rc;
}

/* Runs view v in a child process and returns its exit code. LMDB trusts its
 * pages: a damaged one can crash a read (SIGSEGV, or an assertion's abort).
 * Then the child dies, and this process walks every record (in a child of
 * its own, kv_archive_walk) to name the damage. A view costs one fork: a
 * walk of the whole archive before every view made `show` linear in the
 * archive's size (0.6 s at a million programs). */
static int run_view(const view *v, const view_opts *o)
{
    kv_err err = {{0}};
    if (kv_cli_flush_stdout() != 0)
        return kv_cli_finish_stdout(KV_EXIT_FAIL);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        kv_err_errno(&err, errno, "archive view '%s': fork", v->name);
        return kv_cli_fail(&err);
    }
    if (pid == 0) {                 /* stdout is checked here: the parent writes nothing to it */
        kv_archive_crash_default(); /* a crash is this process's to name */
        exit(kv_cli_finish_stdout(view_here(v, o)));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            kv_err_errno(&err, errno, "archive view '%s': waitpid", v->name);
            return kv_cli_fail(&err);
        }
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    kv_walk_info walked;
    if (kv_archive_walk(o->run_dir, NULL, 1, NULL, &walked, &err) != 0)
        return kv_cli_fail(&err);
    kv_err_set(&err,
               "archive view '%s' stopped on signal %d (%s), and a walk of every record "
               "of %s found no damage: a bug in kevo",
               v->name, sig, strsignal(sig), o->run_dir);
    return kv_cli_fail(&err);
}

/* kevo archive help [VIEW] */
static int run_help(int argc, char **argv)
{
    if (argc < 2)
        return kv_cli_help(usage);
    if (argc > 2)
        return kv_cli_usage("archive", usage, "'help' takes at most one view name");
    if (strcmp(argv[1], "restore") == 0)
        return kv_cli_help(kv_cli_archive_restore_usage);
    if (strcmp(argv[1], "verify") == 0)
        return kv_cli_help(kv_cli_archive_verify_usage);
    if (strcmp(argv[1], "upgrade") == 0)
        return kv_cli_help(kv_cli_archive_upgrade_usage);
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
        return kv_cli_usage("archive", usage,
                            "missing view (list, show, best, lineage, "
                            "attempts, stats, export or history)");
    if (strcmp(argv[i], "help") == 0)
        return run_help(argc - i, argv + i);
    if (strcmp(argv[i], "restore") == 0)
        return kv_cli_archive_restore(argc - i, argv + i, run_dir);
    if (strcmp(argv[i], "verify") == 0)
        return kv_cli_archive_verify(argc - i, argv + i, run_dir);
    if (strcmp(argv[i], "upgrade") == 0)
        return kv_cli_archive_upgrade(argc - i, argv + i, run_dir);
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
        o.run_dir = kv_cli_reader_run_dir();
    if (v->check && (rc = v->check(v, &o)) != 0)
        return rc;
    return run_view(v, &o);
}

const kv_command kv_cmd_archive = {
    .name = "archive",
    .summary = "inspect a run's archive: grids, best kernels, lineage, attempts",
    .usage = usage,
    .run = run,
};
