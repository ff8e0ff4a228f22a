/* eval_setup.h — what kevo eval, baseline and doctor share: where kevo's
 * files are, loading a problem by name, and the evaluator options that come
 * from the command line. */
#ifndef KEVO_CLI_EVAL_SETUP_H
#define KEVO_CLI_EVAL_SETUP_H

#include <stddef.h>

#include "evaluator/evaluator.h"
#include "search/config.h"
#include "problem/problem.h"

/* The kevo-worker next to the running kevo binary. */
int kv_cli_worker_path(char *out, size_t cap, kv_err *err);
/* Loads problems/<name>; an unknown name gets the nearest known one
 * suggested, or the known ones listed. */
int kv_cli_load_problem(const char *name, kv_problem *p, kv_err *err);
/* Loads every problem cfg names, from the problems root as kevo run does,
 * and checks it is defined for cfg->world; the first that fails is the
 * error ("quick.json: $.problems[1]: no problem "allreduc" in ROOT; did you
 * mean "allreduce"?"). Cheap and GPU-free: kevo config check and kevo run,
 * before any GPU work. origin names the configuration in messages. */
int kv_cli_check_problems(const kv_config *cfg, const char *origin, kv_err *err);

/* Options shared by eval and baseline. */
typedef struct {
    int world;
    const char *devices;             /* "0,1" */
    const char *sizes;               /* "64KiB,1MiB" */
    int screen;                      /* the screening protocol instead of the full one */
    long long trials, warmup, iters; /* -1: the protocol's */
    double timeout_s;                /* 0: default */
    int timing;                      /* kv_timing_mode, or -1: the default (graph) */
    int allow_nvls;
    int allow_runtime_lookups;
    int allow_unconfined;
    int json;
    const char *dump_dir; /* --dump DIR */
    const char *run_dir;  /* --run DIR (kevo seed) */
    int no_cache;         /* --no-cache (kevo problems check) */
} kv_cli_eval_args;

void kv_cli_eval_args_init(kv_cli_eval_args *a);
/* Handles one option of the shared set; returns 1 if it was one, 0 if not,
 * -1 (usage error printed) if its value is bad. */
int kv_cli_eval_option(kv_cli_eval_args *a, const char *cmd, const char *usage, int opt,
                       const char *arg);
struct option;
/* Parses argv[1..] with getopt_long and long_opts (a subset of the shared
 * options plus --problem, 'p', required when need_problem). Returns the
 * index of the first positional argument, or -1 after printing a usage
 * error. */
int kv_cli_eval_parse(int argc, char **argv, const char *cmd, const char *usage,
                      const struct option *long_opts, int need_problem, kv_cli_eval_args *a,
                      const char **problem);

/* Turns the arguments into evaluator options (log directory under $TMPDIR). */
int kv_cli_eval_opts(const kv_cli_eval_args *a, const kv_problem *p, kv_eval_opts *o, kv_err *err);

#endif
