/* eval_bench.c — the evaluator's own costs, on the GPU machine:
 *
 *  1. evaluations per hour of a trivial correct candidate whose compile is
 *     cached, at the full protocol (500 warm-up and 100 timed calls per side,
 *     3 trials, every size), and the overhead per evaluation: wall time minus
 *     the timed GPU iterations;
 *  2. cold compile time of one candidate, and compile throughput of the pool
 *     at 1, 2, 4, ... concurrent nvcc processes (distinct sources);
 *  3. the group's restart time after a hang: kill at the deadline to ready.
 *
 *   eval_bench [--evals N] [--problem allreduce] [--candidate FILE] [--hang FILE]
 *              [--max-jobs J] [--timing graph|call] [--sizes a,b] [--only-evals 1]
 * (--timing: how the evaluations of 1 time their calls; the default is the
 * evaluator's, graph replays. --sizes: only these size classes in 1;
 * --only-evals: part 1 alone.)
 * Needs KEVO_WORKER (the kevo-worker binary) and runs from the source tree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "common/clock.h"
#include "common/fsutil.h"

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

static void die(const char *what, const kv_err *err)
{
    fprintf(stderr, "eval_bench: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static char *read_or_die(const char *path, size_t *len)
{
    char *s;
    kv_err err = {{0}};
    if (kv_read_file(path, &s, len, &err) != 0)
        die("read", &err);
    return s;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    int evals = 5, max_jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), only_evals = 0;
    const char *sizes = NULL;
    const char *problem = "allreduce", *cand = "tests/candidates/allreduce_nccl.cu";
    const char *hang = "tests/hostile/hang_flag.cu", *timing = "graph";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--evals") == 0)
            evals = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--problem") == 0)
            problem = argv[i + 1];
        else if (strcmp(argv[i], "--candidate") == 0)
            cand = argv[i + 1];
        else if (strcmp(argv[i], "--hang") == 0)
            hang = argv[i + 1];
        else if (strcmp(argv[i], "--max-jobs") == 0)
            max_jobs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--timing") == 0)
            timing = argv[i + 1];
        else if (strcmp(argv[i], "--sizes") == 0)
            sizes = argv[i + 1];
        else if (strcmp(argv[i], "--only-evals") == 0)
            only_evals = atoi(argv[i + 1]);
    }
    const char *worker = getenv("KEVO_WORKER");
    if (!worker || evals < 1) {
        fprintf(stderr, "eval_bench: set KEVO_WORKER to the kevo-worker binary\n");
        return 2;
    }
    char root[4096], dir[4200];
    if (!getcwd(root, sizeof root))
        return 1;
    kv_err err = {{0}};
    kv_problem p;
    snprintf(dir, sizeof dir, "%s/problems/%s", root, problem);
    if (kv_problem_load(dir, &p, &err) != 0)
        die("problem", &err);

    kv_eval_opts o;
    kv_eval_defaults(&o, root);
    snprintf(o.worker_path, sizeof o.worker_path, "%s", worker);
    snprintf(o.log_dir, sizeof o.log_dir, "/tmp/kevo-bench-logs");
    if (kv_timing_parse(timing, &o.timing) != 0) {
        fprintf(stderr, "eval_bench: --timing %s: graph or call\n", timing);
        return 2;
    }
    printf("timing: %s\n", timing);
    for (const char *c = sizes; c && *c && o.n_sizes < KV_JOB_MAX_SIZES;) {
        size_t n = strcspn(c, ",");
        snprintf(o.sizes[o.n_sizes++], sizeof o.sizes[0], "%.*s", (int)n, c);
        c += n + (c[n] == ',');
    }
    if (kv_mkdir_p(o.log_dir, 0755, &err) != 0)
        die("log dir", &err);
    kv_evaluator *ev;
    if (kv_evaluator_new(&o, &ev, &err) != 0)
        die("evaluator", &err);

    /* 1. evaluations of a cached candidate at the full protocol */
    size_t len;
    char *src = read_or_die(cand, &len);
    kv_eval_report r;
    if (kv_evaluate(ev, &p, src, len, &r, &err) != 0 || r.verdict != KV_VERDICT_OK)
        die("first evaluation (starts the group, fills the cache)", &err);
    kv_eval_report_free(&r);
    double *wall = calloc((size_t)evals, sizeof *wall), *over = calloc((size_t)evals, sizeof *over);
    double *gpu = calloc((size_t)evals, sizeof *gpu);
    for (int i = 0; i < evals; i++) {
        double t0 = now_s();
        if (kv_evaluate(ev, &p, src, len, &r, &err) != 0 || r.verdict != KV_VERDICT_OK)
            die("evaluation", &err);
        wall[i] = now_s() - t0;
        gpu[i] = r.job.gpu_s;
        over[i] = wall[i] - r.job.gpu_s;
        printf("evaluation %d: wall %.2f s, timed GPU %.3f s, overhead %.2f s, cached compile %d\n",
               i, wall[i], gpu[i], over[i], r.compile.cached);
        kv_eval_report_free(&r);
    }
    double w = median(wall, evals), g = median(gpu, evals), ov = median(over, evals);
    printf("BENCH evals_per_hour %.0f\n", 3600.0 / w);
    printf("BENCH eval_wall_s %.3f\n", w);
    printf("BENCH eval_timed_gpu_s %.3f\n", g);
    printf("BENCH eval_overhead_s %.3f\n", ov);
    /* its group ends here: the next evaluator's group runs under the same
     * uid, which a running group keeps to itself (docs/evaluator.md) */
    kv_evaluator_free(ev);
    if (only_evals)
        return 0;

    /* 3. restart after a hang: a short deadline, then the next evaluation */
    size_t hlen;
    char *hsrc = read_or_die(hang, &hlen);
    kv_eval_opts ho = o;
    ho.job_timeout_s = 5;
    kv_evaluator *hev;
    if (kv_evaluator_new(&ho, &hev, &err) != 0)
        die("evaluator", &err);
    double t0 = now_s();
    if (kv_evaluate(hev, &p, hsrc, hlen, &r, &err) != 0)
        die("hang evaluation", &err);
    printf("hang candidate: verdict %s after %.2f s (deadline %.0f s)\n",
           kv_verdict_name(r.verdict), now_s() - t0, ho.job_timeout_s);
    kv_eval_report_free(&r);
    if (kv_evaluate(hev, &p, src, len, &r, &err) != 0 || r.verdict != KV_VERDICT_OK)
        die("evaluation after the hang", &err);
    printf("BENCH restart_after_hang_s %.3f\n", kv_evaluator_last_restart_s(hev));
    kv_eval_report_free(&r);
    kv_evaluator_free(hev);
    free(hsrc);

    /* 2. compiles: one cold, then the pool at growing concurrency */
    kv_compile_opts co = o.compile;
    snprintf(co.cache_dir, sizeof co.cache_dir, "/tmp/kevo-bench-cache-%d", (int)getpid());
    int salt = 0;
    char *buf = malloc(len + 64);
    {
        int n = snprintf(buf, len + 64, "// cold %d\n", salt++);
        memcpy(buf + n, src, len);
        kv_compile_result cr;
        t0 = now_s();
        if (kv_compile(&co, buf, (size_t)n + len, &cr, &err) != 0)
            die("cold compile", &err);
        if (cr.status != KV_COMPILE_OK) {
            fprintf(stderr, "eval_bench: cold compile: status %d: %s\n", (int)cr.status,
                    cr.errors ? cr.errors : "(no output)");
            return 1;
        }
        printf("BENCH cold_compile_s %.2f\n", now_s() - t0);
        kv_compile_result_free(&cr);
    }
    for (int jobs = 1; jobs <= max_jobs; jobs *= 2) {
        co.jobs = jobs;
        kv_compile_pool *pool;
        if (kv_compile_pool_new(&co, &pool, &err) != 0)
            die("pool", &err);
        int n_src = 2 * jobs;
        t0 = now_s();
        for (int i = 0; i < n_src; i++) {
            int n = snprintf(buf, len + 64, "// cold %d\n", salt++);
            memcpy(buf + n, src, len);
            uint64_t ticket;
            if (kv_compile_submit(pool, buf, (size_t)n + len, &ticket, &err) != 0)
                die("submit", &err);
        }
        if (kv_compile_wait_all(pool, &err) != 0)
            die("wait", &err);
        double dt = now_s() - t0;
        kv_compile_result cr;
        uint64_t ticket;
        int ok = 0;
        while (kv_compile_take(pool, &ticket, &cr) == 0) {
            ok += cr.status == KV_COMPILE_OK;
            kv_compile_result_free(&cr);
        }
        printf("BENCH compiles_per_minute_jobs_%d %.1f (%d of %d ok in %.1f s)\n", jobs,
               60.0 * n_src / dt, ok, n_src, dt);
        kv_compile_pool_free(pool);
    }
    free(buf);
    free(src);
    free(wall);
    free(over);
    free(gpu);
    kv_problem_free(&p);
    return 0;
}
