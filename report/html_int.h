/* html_int.h — what the files of the HTML report share: the state of one
 * report being written, the escaping function and the sections. Internal to
 * report/. */
#ifndef KEVO_REPORT_HTML_INT_H
#define KEVO_REPORT_HTML_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/err.h"

/* One `result` event of events.jsonl (docs/search.md). */
typedef struct {
    double t; /* seconds since the first event of the file */
    uint64_t evaluations;
    uint32_t problem; /* index in kv_rp_events.problems */
    int32_t island;   /* -1: seeds and references */
    int seed;         /* stage "seed" */
    kv_verdict verdict;
    double speedup;
} kv_rp_result;

/* One process of the run, from its `start` or `resume` event (or the file's
 * first line) to its last event read. */
typedef struct {
    double t;      /* seconds since the first event, of its first event */
    double t_last; /* of its last event */
    double active; /* the active time before it: the spans of the processes before */
    double wall_s; /* the run's wall time spent before it (its start event's
                            * `wall_s`), or -1 when unknown */
    int groups;    /* GPU groups (its start event's `groups`), 0 if unknown */
    int ended;     /* its `stop` or `error` event was read */
} kv_rp_proc;

/* One `llm` event: a model call and what it cost. */
typedef struct {
    double t;        /* seconds since the first event */
    uint64_t tokens; /* tokens_in + tokens_out */
    double cost_usd;
} kv_rp_call;

typedef struct {
    int present; /* events.jsonl exists */
    kv_rp_result *v;
    size_t n, cap;
    char (*problems)[KV_NAME_MAX];
    size_t n_problems, cap_problems;
    kv_rp_proc *procs; /* in the order of the file; at least one when lines > 0 */
    size_t n_procs, cap_procs;
    kv_rp_call *calls;
    size_t n_calls, cap_calls;
    double t_end;     /* seconds since the first event, of the last event */
    uint64_t lines;   /* complete lines read */
    uint64_t skipped; /* lines that did not parse */
    /* GPU busy: the time results held a GPU group (`group_s`), against the
     * group-seconds the processes had (each process's groups times its span) */
    double group_s;
    double capacity_s;
} kv_rp_events;

/* Reads <run_dir>/events.jsonl up to its last complete line (a line being
 * written is left out). A missing file is no error (present 0). 0, or -1
 * with err naming the file. */
int kv_rp_events_load(const char *run_dir, kv_rp_events *ev, kv_err *err);
void kv_rp_events_free(kv_rp_events *ev);
/* The run's active time at t (seconds since the first event): the spans of
 * the processes before t's and the time since its own start, so the hours
 * between a stopped process and its resume are left out. Every wall-time
 * axis of the page goes through it. t itself when no event was read. */
double kv_rp_active(const kv_rp_events *ev, double t);
/* The index of problem in ev->problems, or -1. */
int kv_rp_events_problem(const kv_rp_events *ev, const char *problem);

/* The ids the page shows the source of (elites, best programs per size),
 * sorted, without repeats. */
typedef struct {
    uint64_t *v;
    size_t n, cap;
} kv_rp_ids;

int kv_rp_ids_add(kv_rp_ids *s, uint64_t id);       /* 0, or -1 when out of memory */
int kv_rp_ids_has(const kv_rp_ids *s, uint64_t id); /* after kv_rp_ids_sort */
void kv_rp_ids_sort(kv_rp_ids *s);

/* A report being written. */
typedef struct {
    FILE *f;
    kv_txn *t;
    const char *run_dir;
    cJSON *config;         /* the stored configuration, or NULL */
    int world;             /* the run's W (config "world"), 0 if unknown */
    double link_gbps;      /* the link's ceiling per direction, GB/s (> 0) */
    const char *link_from; /* where link_gbps came from, for the page */
    kv_rp_events ev;
    kv_rp_ids shown; /* programs whose source the page shows */
} kv_rp;

/* The one escaping function: n bytes of s as HTML text (also fit for an
 * attribute value in double quotes). & < > " ' become entities; control
 * characters but LF and TAB become visible escapes (ESC "\x1b", C1 controls
 * "\u009b"); bytes that are not valid UTF-8 become U+FFFD. */
void kv_html_text(FILE *f, const char *s, size_t n);
void kv_html_str(FILE *f, const char *s); /* s NUL-terminated; NULL writes nothing */

/* The colour class of a speedup ("s0".."s5", "sn" for none): the page's
 * fixed scale (html_page.c), also used by the legend. */
const char *kv_rp_speedup_class(double speedup);
/* The legend of that scale. */
void kv_rp_speedup_legend(FILE *f);

/* The limit config.budget.<key> sets (html_run.c), 0 when none; config may
 * be NULL. */
double kv_rp_budget(const cJSON *config, const char *key);

/* The sections; each writes its own <section id=...>. 0, or -1 with err. */
int kv_rp_run(kv_rp *r, kv_err *err);                          /* id="run" */
int kv_rp_models(kv_rp *r, kv_err *err);                       /* id="models" */
int kv_rp_grid(kv_rp *r, const char *problem, kv_err *err);    /* id="grid-<p>" */
int kv_rp_sizes(kv_rp *r, const char *problem, kv_err *err);   /* id="sizes-<p>" */
int kv_rp_anytime(kv_rp *r, const char *problem, kv_err *err); /* id="anytime-<p>" */
int kv_rp_lineage(kv_rp *r, const char *problem, kv_err *err); /* id="lineage-<p>" */
int kv_rp_sources(kv_rp *r, kv_err *err);                      /* id="elite-<id>" each */
int kv_rp_verdicts(kv_rp *r, kv_err *err);                     /* id="verdicts" */
/* Inside the run section, id="budgets": each budget spent against active
 * time, as a percentage of its limit, or in its own units where it has none
 * (html_curves.c). */
int kv_rp_budget_chart(kv_rp *r, kv_err *err);

/* The line diff of a against b (html_lineage.c), written as <pre> lines
 * prefixed "+ ", "- ", "  ", escaped; at most max_lines lines shown. */
void kv_rp_diff(FILE *f, const char *a, const char *b, int max_lines);

#endif
