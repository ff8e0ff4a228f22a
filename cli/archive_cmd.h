/* archive_cmd.h — what the files of `kevo archive` share; internal to the
 * command. cmd_archive.c parses the arguments, dispatches to a view and
 * holds the helpers below; each view group has its own file: archive_list.c
 * (list, stats), archive_show.c (show, best; archive_sizes.c best
 * --per-size), archive_lineage.c, archive_attempts.c and archive_export.c;
 * archive_restore.c is the one command that writes. The views' data is
 * report/'s (views.h, rows.h, history.h, snapshot.h); archive_print.c and
 * export_rows.c print what it does not. */
#ifndef KEVO_ARCHIVE_CMD_H
#define KEVO_ARCHIVE_CMD_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/err.h"
#include "report/snapshot.h"
#include "report/views.h"

/* ---- the archive snapshot ------------------------------------------------------ */

/* ---- views and their options ---------------------------------------------------- */

#define MAX_POS 4

typedef struct {
    const char *run_dir;
    int json;
    int has_island;
    int32_t island;
    int cell; /* -1: none */
    const char *out;
    int depth;
    const char *problem;
    int has_verdict;
    kv_verdict verdict;
    int has_stage;
    kv_stage stage;
    long long limit; /* 0: none */
    uint64_t from;   /* 0: none */
    int csv;         /* export --format csv */
    int jsonl;       /* export --format jsonl */
    int with_source;
    int per_size;
    int help;
    const char *pos[MAX_POS];
    int n_pos;
    uint64_t id; /* lineage: pos[0], read by kv_view_lineage_check */
} view_opts;

/* One view. The command parses its options, calls check, opens the snapshot
 * and calls run; then it reports run's error (after what run printed) or a
 * failure to write stdout, and closes the snapshot. */
typedef struct view view;
struct view {
    const char *name;
    const char *usage;
    unsigned opts; /* BIT(OPT_...) accepted besides --run and --help */
    int min_pos, max_pos;
    const char *pos_name; /* what the positional argument is, for messages */
    /* Checks the arguments before the archive is opened (NULL: nothing to
     * check); 0 or the exit code of a usage error (already reported). */
    int (*check)(const view *v, view_opts *o);
    /* Prints the view of snapshot s to stdout: 0, or -1 with err set. */
    int (*run)(const view_opts *o, const kv_report_snapshot *s, kv_err *err);
};

/* Reports a usage error of view v, the message formatted as by printf.
 * Returns KV_EXIT_USAGE. */
int kv_view_usage(const view *v, const char *fmt, ...) KV_PRINTF(2, 3);

/* The views: each one's usage text, check and run function. */
extern const char kv_view_list_usage[], kv_view_stats_usage[];
int kv_view_list(const view_opts *o, const kv_report_snapshot *s, kv_err *err);
int kv_view_stats(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

extern const char kv_view_show_usage[], kv_view_best_usage[];
int kv_view_show(const view_opts *o, const kv_report_snapshot *s, kv_err *err);
int kv_view_best_check(const view *v, view_opts *o);
int kv_view_best(const view_opts *o, const kv_report_snapshot *s, kv_err *err);
/* archive_sizes.c: best --per-size */
int kv_view_best_sizes(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

extern const char kv_view_lineage_usage[];
int kv_view_lineage_check(const view *v, view_opts *o);
int kv_view_lineage(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

extern const char kv_view_attempts_usage[];
int kv_view_attempts(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

extern const char kv_view_export_usage[];
int kv_view_export(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

/* archive_history.c: the best over time, from the run's events.jsonl */
extern const char kv_view_history_usage[];
int kv_view_history(const view_opts *o, const kv_report_snapshot *s, kv_err *err);

/* kevo archive restore (archive_restore.c): not a view, it writes; argv[0]
 * is "restore", run_dir the --run given before it (or NULL). Returns the
 * exit code. */
extern const char kv_cli_archive_restore_usage[];
int kv_cli_archive_restore(int argc, char **argv, const char *run_dir);
/* archive_upgrade.c: kevo archive upgrade, the same way */
extern const char kv_cli_archive_upgrade_usage[];
int kv_cli_archive_upgrade(int argc, char **argv, const char *run_dir);
/* archive_verify.c: kevo archive verify */
extern const char kv_cli_archive_verify_usage[];
int kv_cli_archive_verify(int argc, char **argv, const char *run_dir);

/* ---- problems ------------------------------------------------------------------- */

/* report/snapshot.h's, under the names the views use. */
typedef kv_report_problems problem_list;

static inline int load_problems(kv_txn *t, problem_list *l, kv_err *err)
{
    return kv_report_problems_load(t, l, err);
}

static inline int require_problem(const kv_report_snapshot *s, const char *problem, kv_err *err)
{
    return kv_report_require_problem(s, problem, err);
}

/* ---- grids ------------------------------------------------------------------------ */

/* ---- output and memory ------------------------------------------------------------ */

/* Prints root as formatted JSON and frees it; -1 when root is NULL or
 * formatting runs out of memory. */
int kv_cli_print_json(cJSON *root, kv_err *err);

#endif
