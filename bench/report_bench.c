/* report_bench.c — the time kevo report takes to write the page of a large
 * run (report/html.h; target: under 2 s for 100,000 programs).
 *
 *   report_bench [--programs N] [--runs R] [--dir DIR]
 *
 * Builds a run the way a long search leaves one: N programs (default
 * 100,000) of 2-4 KiB CUDA-like sources over 4 problems x 4 islands, each
 * but the seeds with a parent of its problem, about 70% correct with two
 * sizes timed, elites offered for every result, an attempt each, and an
 * events.jsonl with a result line each. Then writes the report R times
 * (default 5) and prints each time, the median, and
 * `BENCH report_write_median <s> s` for scripts. Without --dir the run is
 * built in a fresh folder under $TMPDIR, removed at exit; --dir keeps it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "archive/archive.h"
#include "common/cell.h"
#include "report/html.h"
#include "test_util.h"

#define N_PROBLEMS 4
#define N_ISLANDS 4
#define BATCH 2000

static const char *const problems[N_PROBLEMS] = {"allreduce", "allgather", "alltoall",
                                                 "reducescatter"};

static void die(const char *what, const kv_err *err)
{
    fprintf(stderr, "report_bench: %s: %s\n", what, err->msg);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void build(const char *dir, long n)
{
    kv_archive_opts o = {.create = 1, .initial_map_bytes = (size_t)2 << 30};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(dir, &o, &a, &err) != 0)
        die("open", &err);
    char path[4200];
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    FILE *ev = fopen(path, "w");
    if (!ev) {
        perror(path);
        exit(1);
    }
    fprintf(ev, "{\"t\":0,\"type\":\"start\",\"evaluations\":0}\n");
    uint64_t rng = 42;
    static char src[8192];
    kv_txn *t = NULL;
    for (long i = 0; i < n; i++) {
        if (i % BATCH == 0 && kv_write_begin(a, &t, &err) != 0)
            die("write_begin", &err);
        int pb = (int)(i % N_PROBLEMS);
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", problems[pb]);
        int seed = i < 4 * N_PROBLEMS;
        snprintf(p.op, sizeof p.op, "%s",
                 seed                     ? "seed"
                 : kv_test_rand(&rng) % 3 ? "template"
                                          : "llm");
        snprintf(p.model, sizeof p.model, "%s", strcmp(p.op, "llm") ? "" : "model-a");
        p.island = seed ? -1 : (int32_t)(kv_test_rand(&rng) % N_ISLANDS);
        if (!seed) /* a parent of the same problem */
            p.parents[p.n_parents++] =
                (uint64_t)(pb + 1 +
                           N_PROBLEMS * (long)(kv_test_rand(&rng) % (uint64_t)(i / N_PROBLEMS)));
        kv_test_random_source(src, sizeof src, (uint64_t)i, 2048 + kv_test_rand(&rng) % 2048);
        uint64_t id;
        if (kv_add_program(t, &p, src, strlen(src), &id, NULL, &err) != 0)
            die("add_program", &err);
        p.id = id;
        int ok = seed || kv_test_rand(&rng) % 10 < 7;
        p.verdict = ok ? KV_VERDICT_OK : KV_VERDICT_MISMATCH;
        p.protocol = KV_PROTOCOL_FULL;
        char cell[KV_CELL_NAME_MAX];
        kv_cell_name((int)(kv_test_rand(&rng) % KV_CELL_COUNT), cell);
        snprintf(p.cell, sizeof p.cell, "%s", cell);
        p.evaluated_ns = (int64_t)i * 1000000000LL;
        if (ok) {
            p.speedup =
                0.5 + (double)(kv_test_rand(&rng) % 2000) / 1000 * (1 + (double)i / (double)n);
            p.n_sizes = 2;
            for (int s = 0; s < 2; s++) {
                snprintf(p.sizes[s].name, sizeof p.sizes[s].name, "%s", s ? "1MiB" : "64KiB");
                p.sizes[s].ref_us = s ? 80 : 20;
                p.sizes[s].cand_us = p.sizes[s].ref_us / p.speedup;
                p.sizes[s].roofline_us = p.sizes[s].ref_us / 4;
                p.sizes[s].ok = 1;
                p.sizes[s].timing = KV_SIZE_TIMING_GRAPH;
            }
        }
        if (kv_set_result(t, &p, &err) != 0)
            die("set_result", &err);
        if (ok && p.island >= 0) {
            kv_elite e = {.island = p.island, .program_id = id, .fitness = p.speedup};
            snprintf(e.problem, sizeof e.problem, "%s", p.problem);
            snprintf(e.cell, sizeof e.cell, "%s", p.cell);
            if (kv_offer_elite(t, &e, NULL, NULL, &err) != 0)
                die("offer_elite", &err);
        }
        kv_attempt at = {.time_ns = p.evaluated_ns,
                         .island = p.island,
                         .stage = KV_STAGE_FULL,
                         .verdict = p.verdict,
                         .program_id = id,
                         .speedup = p.speedup};
        snprintf(at.problem, sizeof at.problem, "%s", p.problem);
        snprintf(at.op, sizeof at.op, "%s", p.op);
        if (kv_add_attempt(t, &at, NULL, &err) != 0)
            die("add_attempt", &err);
        fprintf(ev,
                "{\"t\":%ld,\"type\":\"result\",\"evaluations\":%ld,\"problem\":\"%s\","
                "\"program\":%llu,\"island\":%d,\"stage\":\"%s\",\"op\":\"%s\","
                "\"verdict\":\"%s\",\"cell\":\"%s\",\"speedup\":%.6f}\n",
                i, i + 1, p.problem, (unsigned long long)id, (int)p.island, seed ? "seed" : "full",
                p.op, kv_verdict_name(p.verdict), p.cell, p.speedup);
        if ((i + 1) % BATCH == 0 || i + 1 == n)
            if (kv_txn_commit(t, &err) != 0)
                die("commit", &err);
    }
    kv_run_state st = {.evaluations = (uint64_t)n, .wall_s = (double)n};
    if (kv_write_begin(a, &t, &err) != 0 || kv_put_config(t, "{\"world\":2}", &err) != 0 ||
        kv_put_state(t, &st, &err) != 0 || kv_txn_commit(t, &err) != 0)
        die("config", &err);
    if (fclose(ev) != 0) {
        perror(path);
        exit(1);
    }
    kv_archive_close(a);
}

int main(int argc, char **argv)
{
    long n = 100000, runs = 5;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--programs") == 0 && i + 1 < argc)
            n = atol(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atol(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "usage: report_bench [--programs N] [--runs R] [--dir DIR]\n");
            return 2;
        }
    }
    if (n < 4 * N_PROBLEMS || runs < 1) {
        fprintf(stderr, "report_bench: --programs >= %d and --runs >= 1\n", 4 * N_PROBLEMS);
        return 2;
    }
    char made[4096];
    if (!dir) {
        kv_test_fresh_dir(made, sizeof made, "report-bench");
        dir = made;
    }
    double t0 = now_s();
    build(dir, n);
    printf("built a run of %ld programs in %.1f s (%s)\n", n, now_s() - t0, dir);
    char out[4200];
    snprintf(out, sizeof out, "%s/report.html", dir);
    double *times = calloc((size_t)runs, sizeof *times);
    if (!times)
        return 1;
    for (long r = 0; r < runs; r++) {
        kv_err err = {{0}};
        double s = now_s();
        if (kv_report_write(dir, out, NULL, &err) != 0)
            die("kv_report_write", &err);
        times[r] = now_s() - s;
        printf("run %ld: %.3f s\n", r + 1, times[r]);
    }
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    printf("median of %ld: %.3f s (target < 2 s)\n", runs, times[runs / 2]);
    printf("BENCH report_write_median %.3f s\n", times[runs / 2]);
    free(times);
    return 0;
}
