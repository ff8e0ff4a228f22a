#include "eval_setup.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/datadir.h"
#include "common/fsutil.h"
#include "common/json.h"
#include "common/suggest.h"

int kv_cli_worker_path(char *out, size_t cap, kv_err *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        return kv_err_errno(err, errno, "readlink /proc/self/exe");
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    if ((size_t)snprintf(out, cap, "%s/kevo-worker", exe) >= cap)
        return kv_err_set(err, "%s/kevo-worker: path too long", exe);
    if (access(out, X_OK) != 0)
        return kv_err_errno(err, errno, "%s (the GPU worker, built with kevo)", out);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Up to max names of the problem folders under root (those holding a
 * problem.json), malloc'ed; how many. */
static size_t problem_names(const char *root, char **names, size_t max)
{
    size_t n = 0;
    DIR *d = opendir(root);
    if (!d)
        return 0;
    struct dirent *de;
    while (n < max && (de = readdir(d)) != NULL) {
        char file[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.' ||
            snprintf(file, sizeof file, "%s/%s/problem.json", root, de->d_name) >=
                (int)sizeof file ||
            stat(file, &st) != 0)
            continue;
        if ((names[n] = strdup(de->d_name)) != NULL)
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    return n;
}

/* "no problem "x" in ROOT; did you mean "y"?" (or the names there). */
static int no_such_problem(const char *root, const char *name, kv_err *err)
{
    char *names[256], q[80];
    size_t n = problem_names(root, names, sizeof names / sizeof names[0]);
    const char *near = kv_suggest(name, (const char *const *)names, n);
    kv_json_quote(q, sizeof q, name);
    if (near) {
        kv_err_set(err, "no problem %s in %s; did you mean \"%s\"?", q, root, near);
    } else {
        char list[600];
        kv_json_join(list, sizeof list, (const char *const *)names, n);
        kv_err_set(err, "no problem %s in %s (%s: %s)", q, root, n ? "there are" : "it holds none",
                   n ? list : "'kevo problems' lists them");
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return KV_FAIL;
}

/* root/name, which must be a problem folder. */
static int problem_dir(const char *root, const char *name, char *dir, size_t cap, kv_err *err)
{
    if (strchr(name, '/') || kv_path_join(dir, cap, root, name, err) != 0)
        return kv_err_set(err, "problem '%s': not a problem name", name);
    if (access(dir, F_OK) != 0)
        return no_such_problem(root, name, err);
    return KV_OK;
}

int kv_cli_load_problem(const char *name, kv_problem *p, kv_err *err)
{
    char root[PATH_MAX], dir[PATH_MAX];
    kv_problems_default_root(root, sizeof root);
    if (problem_dir(root, name, dir, sizeof dir, err) != KV_OK)
        return KV_FAIL;
    return kv_problem_load(dir, p, err);
}

int kv_cli_check_problems(const kv_config *cfg, const char *origin, kv_err *err)
{
    char root[PATH_MAX], dir[PATH_MAX], jpath[KV_JSON_PATH_MAX];
    kv_problems_default_root(root, sizeof root);
    kv_problem *p = malloc(sizeof *p);
    if (!p)
        return kv_err_set(err, "out of memory");
    int rc = KV_OK;
    for (int i = 0; rc == KV_OK && i < cfg->n_problems; i++) {
        kv_json_path_index(jpath, sizeof jpath, "$.problems", i);
        if (problem_dir(root, cfg->problems[i], dir, sizeof dir, err) != KV_OK) {
            rc = kv_err_prefix(err, "%s: %s", origin, jpath);
        } else if (kv_problem_load(dir, p, err) != KV_OK) {
            rc = KV_FAIL; /* the message names the problem's file */
        } else {
            if (!kv_problem_supports_world(p, cfg->world)) {
                char worlds[64] = "";
                for (int w = 0, o = 0; w < p->n_worlds && o < (int)sizeof worlds; w++)
                    o += snprintf(worlds + o, sizeof worlds - (size_t)o, "%s%d", w ? ", " : "",
                                  p->worlds[w]);
                rc = kv_err_set(err,
                                "%s: %s: problem %s is not defined for W=%d ($.world); "
                                "it is for W = %s",
                                origin, jpath, p->name, cfg->world, worlds);
            }
            kv_problem_free(p);
        }
    }
    free(p);
    return rc;
}

void kv_cli_eval_args_init(kv_cli_eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->world = 2;
    a->trials = a->warmup = a->iters = -1;
    a->timing = -1;
}

int kv_cli_eval_parse(int argc, char **argv, const char *cmd, const char *usage,
                      const struct option *long_opts, int need_problem, kv_cli_eval_args *a,
                      const char **problem)
{
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        if (opt == 'p') {
            *problem = optarg;
            continue;
        }
        if (opt == '?' || opt == ':') {
            kv_cli_usage(cmd, usage, "%s '%s'", opt == ':' ? "missing value for" : "unknown option",
                         argv[optind - 1]);
            return -1;
        }
        int r = kv_cli_eval_option(a, cmd, usage, opt, optarg);
        if (r < 0)
            return -1;
        if (r == 0) {
            kv_cli_usage(cmd, usage, "unknown option '%s'", argv[optind - 1]);
            return -1;
        }
    }
    if (need_problem && !*problem) {
        kv_cli_usage(cmd, usage, "--problem is required");
        return -1;
    }
    return optind;
}

int kv_cli_eval_option(kv_cli_eval_args *a, const char *cmd, const char *usage, int opt,
                       const char *arg)
{
    long long v;
    switch (opt) {
    case 'w':
        if (kv_cli_parse_int(arg, 1, KV_GROUP_MAX_WORLD, &v) != 0) {
            kv_cli_usage(cmd, usage, "--world: expected 1 to %d, got '%s'", KV_GROUP_MAX_WORLD,
                         arg);
            return -1;
        }
        a->world = (int)v;
        return 1;
    case 'd': a->devices = arg; return 1;
    case 's': a->sizes = arg; return 1;
    case 'S': a->screen = 1; return 1;
    case 'j': a->json = 1; return 1;
    case 'N': a->allow_nvls = 1; return 1;
    case 'L': a->allow_runtime_lookups = 1; return 1;
    case 'U': a->allow_unconfined = 1; return 1;
    case 'D': a->dump_dir = arg; return 1;
    case 'r': a->run_dir = arg; return 1;
    case 'C': a->no_cache = 1; return 1;
    case 'G': {
        kv_timing_mode m;
        if (kv_timing_parse(arg, &m) != 0) {
            kv_cli_usage(cmd, usage, "--timing: expected graph or call, got '%s'", arg);
            return -1;
        }
        a->timing = (int)m;
        return 1;
    }
    case 't':
    case 'W':
    case 'i':
    case 'T': {
        long long max = opt == 'T' ? 3600 : opt == 't' ? 100 : 1000000;
        long long min = opt == 'W' ? 0 : 1;
        if (kv_cli_parse_int(arg, min, max, &v) != 0) {
            kv_cli_usage(cmd, usage, "bad value '%s' (expected %lld to %lld)", arg, min, max);
            return -1;
        }
        if (opt == 't')
            a->trials = v;
        else if (opt == 'W')
            a->warmup = v;
        else if (opt == 'i')
            a->iters = v;
        else
            a->timeout_s = (double)v;
        return 1;
    }
    default: return 0;
    }
}

static int split_list(const char *list, char items[][64], int cap, const char *what, kv_err *err)
{
    int n = 0;
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= 64 || n >= cap)
            return kv_err_set(err, "%s: bad list '%s'", what, list);
        memcpy(items[n], p, len);
        items[n][len] = 0;
        n++;
        p += len + (comma ? 1 : 0);
    }
    return n;
}

/* 1 when dir holds nothing, 0 when it holds something, -1 with err. */
static int dir_is_empty(const char *dir, kv_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kv_err_errno(err, errno, "opendir %s", dir);
    int empty = 1;
    struct dirent *de;
    while (empty && (de = readdir(d)) != NULL)
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

int kv_cli_eval_opts(const kv_cli_eval_args *a, const kv_problem *p, kv_eval_opts *o, kv_err *err)
{
    kv_eval_defaults(o, kv_data_root());
    if (kv_cli_worker_path(o->worker_path, sizeof o->worker_path, err) != 0)
        return -1;
    if (!kv_problem_supports_world(p, a->world))
        return kv_err_set(err, "problem %s does not support W=%d", p->name, a->world);
    o->world = a->world;
    if (a->devices) {
        char items[KV_GROUP_MAX_WORLD][64];
        int n = split_list(a->devices, items, KV_GROUP_MAX_WORLD, "--devices", err);
        if (n < 0)
            return -1;
        if (n != a->world)
            return kv_err_set(err, "--devices names %d GPUs for W=%d", n, a->world);
        for (int i = 0; i < n; i++) {
            long long v;
            if (kv_cli_parse_int(items[i], 0, 1023, &v) != 0)
                return kv_err_set(err, "--devices: '%s' is not a GPU index", items[i]);
            o->devices[i] = (int)v;
        }
        o->n_devices = n;
    }
    if (a->sizes) {
        int n = split_list(a->sizes, o->sizes, KV_JOB_MAX_SIZES, "--sizes", err);
        if (n < 0)
            return -1;
        for (int i = 0; i < n; i++)
            if (kv_problem_find_size(p, o->sizes[i]) < 0)
                return kv_err_set(err, "--sizes: problem %s has no size '%s'", p->name,
                                  o->sizes[i]);
        o->n_sizes = n;
    }
    if (a->screen) {
        o->warmup = 20;
        o->iters = 50;
    }
    if (a->trials >= 0)
        o->trials = (int)a->trials;
    if (a->warmup >= 0)
        o->warmup = (int)a->warmup;
    if (a->iters >= 0)
        o->iters = (int)a->iters;
    if (a->timeout_s > 0)
        o->job_timeout_s = a->timeout_s;
    if (a->timing >= 0)
        o->timing = (kv_timing_mode)a->timing;
    o->allow_nvls = a->allow_nvls;
    o->allow_runtime_lookups = a->allow_runtime_lookups;
    o->allow_unconfined = a->allow_unconfined;
    if (a->dump_dir) {
        /* kevo copies the workers' dump there (sandbox.h): an absolute path,
         * made now so that a typo fails before any GPU work, and new or
         * empty, so that what it holds afterwards is the dump */
        if (kv_mkdir_p(a->dump_dir, 0755, err) != 0)
            return kv_err_prefix(err, "--dump");
        if (!realpath(a->dump_dir, o->dump_dir))
            return kv_err_set(err, "--dump: %s: %s", a->dump_dir, strerror(errno));
        int empty = dir_is_empty(o->dump_dir, err);
        if (empty < 0)
            return kv_err_prefix(err, "--dump");
        if (!empty)
            return kv_err_set(err, "--dump: %s is not empty: name a new or empty folder",
                              o->dump_dir);
    }
    o->seed = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL);
    const char *tmp = getenv("TMPDIR");
    snprintf(o->log_dir, sizeof o->log_dir, "%s/kevo-logs-%d", tmp && *tmp ? tmp : "/tmp",
             (int)getuid());
    return kv_mkdir_own(o->log_dir, 0755, err);
}
