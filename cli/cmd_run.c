/* cmd_run.c — kevo run: start or resume a search (search/search.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "eval_setup.h"
#include "evaluator/evaluator.h"
#include "archive/archive.h"
#include "search/config.h"
#include "common/datadir.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "problem/problem.h"
#include "mutate/llm.h"
#include "report/refresh.h"
#include "search/evaluator_setup.h"
#include "search/search.h"

static const char usage[] =
    "usage: kevo run --config FILE [--run DIR] [--quiet]\n"
    "       kevo run DIR [--quiet]\n"
    "\n"
    "Runs the search the configuration describes until a budget or target is\n"
    "reached. The run directory (--run, else the config's run_dir) holds the\n"
    "archive and events.jsonl; when it already holds a run, that run resumes:\n"
    "it must have been started with the same configuration. `kevo run DIR`\n"
    "resumes the run in DIR with the configuration stored there. It writes\n"
    "DIR/report.html (kevo report) every report.interval_min minutes and at\n"
    "exit, unless report.enabled is false.\n"
    "\n"
    "SIGINT or SIGTERM: take no new work, finish the evaluations in flight\n"
    "(LLM requests in flight are abandoned), commit, exit 0; a second SIGINT\n"
    "stops at once (the archive stays consistent).\n"
    "\n"
    "  --config FILE   the run configuration (docs/config.md)\n"
    "  --run DIR       the run directory (overrides run_dir)\n"
    "  --quiet         no progress output\n";

static volatile sig_atomic_t stop_requested;

/* How candidate code is confined, at the start of every run; said loudly
 * (even with --quiet) when it is not. */
static void say_confinement(int allow_unconfined, int quiet)
{
    kv_sandbox_support sup;
    kv_sandbox_probe(&sup);
    char line[512], net[256];
    kv_sandbox_describe(&sup, allow_unconfined, line, sizeof line);
    kv_sandbox_describe_network(&sup, net, sizeof net);
    if (!sup.landlock_abi)
        fprintf(stderr, "kevo run: WARNING: candidate code is %s\n", line);
    else if (!quiet)
        fprintf(stderr, "kevo run: candidate code is %s\n", line);
    if (!sup.net_ns)
        fprintf(stderr, "kevo run: WARNING: candidate code's network is %s\n", net);
    else if (!quiet)
        fprintf(stderr, "kevo run: candidate code's network: %s\n", net);
}
static int stop_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    if (stop_requested < 2)
        stop_requested++;
    if (stop_pipe[1] >= 0)
        (void)!write(stop_pipe[1], "x", 1);
    errno = saved;
}

static int install_signals(kv_err *err)
{
    if (pipe(stop_pipe) != 0)
        return kv_err_errno(err, errno, "pipe");
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(stop_pipe[i], F_GETFL);
        if (fl < 0 || fcntl(stop_pipe[i], F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(stop_pipe[i], F_SETFD, FD_CLOEXEC) != 0)
            return kv_err_errno(err, errno, "fcntl");
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return kv_err_errno(err, errno, "sigaction");
    return 0;
}

/* The configuration stored in an existing run directory. */
static int stored_config(const char *dir, kv_config *cfg, kv_err *err)
{
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    char *json = NULL, hash[KV_SHA256_HEX_LEN], origin[PATH_MAX + 32];
    if (kv_archive_open(dir, &ao, &a, err) != 0)
        return -1;
    int rc = kv_read_begin(a, &t, err);
    if (rc == 0) {
        rc = kv_get_config(t, &json, hash, err);
        kv_txn_abort(t);
    }
    if (rc == KV_NOTFOUND)
        rc = kv_err_set(err, "%s holds no run configuration: start it with kevo run --config", dir);
    snprintf(origin, sizeof origin, "%s (stored configuration)", dir);
    if (rc == 0)
        rc = kv_config_parse(json, origin, cfg, err);
    free(json);
    kv_archive_close(a);
    return rc;
}

/* The run's last lines: where it wrote, and what to run next. */
static void say_next(const char *run_dir, const kv_config *cfg)
{
    char d[4 * PATH_MAX], p[4 * KV_CFG_NAME_MAX];
    KV_TERM(d, run_dir);
    if (cfg->n_problems > 0)
        KV_TERM(p, cfg->problems[0]);
    else
        snprintf(p, sizeof p, "PROBLEM");
    fprintf(stderr, "kevo: run directory %s\n", d);
    fprintf(stderr,
            "next: kevo archive list --run %s; kevo archive best %s --run %s; "
            "kevo report --run %s\n",
            d, p, d, d);
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"run", required_argument, NULL, 'r'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL, *dir = NULL;
    int quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (c == 'c')
            config = optarg;
        else if (c == 'r')
            dir = optarg;
        else if (c == 'q')
            quiet = 1;
        else
            return kv_cli_usage("run", usage, "unknown option '%s'", argv[optind - 1]);
    }
    if (optind < argc) {
        if (config || dir || optind + 1 != argc)
            return kv_cli_usage("run", usage, "give either --config FILE or one run DIR");
        dir = argv[optind];
    }
    if (!config && !dir)
        return kv_cli_usage("run", usage, "missing --config FILE (or a run DIR to resume)");

    kv_err err = {{0}};
    kv_config cfg;
    if (config ? kv_config_load(config, &cfg, &err) != 0 : stored_config(dir, &cfg, &err) != 0)
        return kv_cli_fail(&err);
    /* the LLM's key before anything starts (kv_search_run checks it again),
     * and out of our environment before any child is: no candidate, nvcc or
     * host check can read it */
    if (cfg.mutator == KV_MUTATOR_LLM && kv_llm_take_key(&cfg.llm, &err) != 0) {
        kv_err_prefix(&err, "%s", config ? config : dir);
        return kv_cli_fail(&err);
    }
    /* the problems before any GPU work or any file is made: a typo fails at once */
    if (kv_cli_check_problems(&cfg, config ? config : dir, &err) != 0)
        return kv_cli_fail(&err);
    const char *run_dir = dir ? dir : cfg.run_dir;
    char problems[PATH_MAX], patterns[PATH_MAX], abi[PATH_MAX], logs[PATH_MAX];
    kv_eval_opts base;
    kv_eval_defaults(&base, kv_data_root());
    if (kv_problems_default_root(problems, sizeof problems) == NULL ||
        kv_path_join(patterns, sizeof patterns, kv_data_root(), "patterns", &err) != 0)
        return kv_cli_fail(&err);
    /* something to vary (the template mutator needs seeds), before any GPU
     * work and before the run directory is made */
    if (kv_search_check_seeds(&cfg, patterns, &err) != 0) {
        kv_err_prefix(&err, "%s", config ? config : dir);
        return kv_cli_fail(&err);
    }
    if (kv_path_join(abi, sizeof abi, kv_data_root(), "docs/abi.md", &err) != 0 ||
        kv_cli_worker_path(base.worker_path, sizeof base.worker_path, &err) != 0 ||
        kv_mkdir_p(run_dir, 0755, &err) != 0 ||
        kv_path_join(logs, sizeof logs, run_dir, "logs", &err) != 0 ||
        kv_mkdir_p(logs, 0755, &err) != 0 || install_signals(&err) != 0)
        return kv_cli_fail(&err);
    /* one writer per run: a second kevo run (or seed) on run_dir is refused
     * here, before any GPU work starts; held until this process exits */
    kv_run_lock *lock;
    if (kv_run_lock_take(run_dir, &lock, &err) != 0)
        return kv_cli_fail(&err);
    snprintf(base.log_dir, sizeof base.log_dir, "%s", logs);
    snprintf(base.private_dir, sizeof base.private_dir, "%s", run_dir);
    say_confinement(cfg.eval.allow_unconfined, quiet);

    kv_search_env env = {.cfg = &cfg,
                         .run_dir = run_dir,
                         .problems_root = problems,
                         .patterns_root = patterns,
                         .abi_path = abi,
                         .stop = &stop_requested,
                         .stop_fd = stop_pipe[0],
                         .progress = quiet ? NULL : stderr,
                         .progress_tty = !quiet && isatty(STDERR_FILENO),
                         .progress_every_s = 30,
                         .cache_dir = base.compile.cache_dir};
    if (cfg.report.enabled)
        env.hook = (kv_search_hook){
            .fn = kv_report_refresh, .every_s = cfg.report.interval_min * 60, .name = "report"};
    int rc = kv_search_evalq_new(&cfg, &base, &env.evalq, &err);
    if (rc == 0) {
        rc = kv_search_run(&env, &err);
        env.evalq.ops->destroy(env.evalq.self);
    }
    kv_run_lock_release(lock);
    if (rc != 0)
        return kv_cli_fail(&err);
    if (!quiet)
        say_next(run_dir, &cfg);
    return KV_EXIT_OK;
}

const kv_command kv_cmd_run = {
    .name = "run",
    .summary = "run or resume a search",
    .usage = usage,
    .run = run,
};
