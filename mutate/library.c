/* library.c — loading one problem's seeds (library.h). */
#include "mutate/library.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "mutate/schedule.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(((const kv_seed *)a)->name, ((const kv_seed *)b)->name);
}

/* A regular file <name>.cu (not hidden) in dir. */
static int is_seed_file(const char *dir, const char *name)
{
    size_t l = strlen(name);
    if (name[0] == '.' || l < 4 || strcmp(name + l - 3, ".cu") != 0)
        return 0;
    char path[PATH_MAX];
    struct stat st;
    return kv_path_join(path, sizeof path, dir, name, NULL) == 0 && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

int kv_library_load(const char *patterns_root, const char *problem, kv_library *out,
                    void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err)
{
    memset(out, 0, sizeof *out);
    char dir[PATH_MAX];
    if (kv_path_join(dir, sizeof dir, patterns_root, problem, err) != 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : kv_err_errno(err, errno, "open %s", dir);
    int cap = 0, rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!is_seed_file(dir, de->d_name))
            continue;
        if (out->n == cap) {
            int ncap = cap ? 2 * cap : 8;
            kv_seed *n = realloc(out->seeds, sizeof *n * (size_t)ncap);
            if (!n) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            out->seeds = n;
            cap = ncap;
        }
        kv_seed *s = &out->seeds[out->n];
        memset(s, 0, sizeof *s);
        char path[PATH_MAX];
        kv_err perr = {{0}};
        if (strlen(de->d_name) - 3 >= sizeof s->name) { /* the name is the program's model */
            if (kv_path_join(path, sizeof path, dir, de->d_name, NULL) == 0 && on_error) {
                kv_err_set(&perr, "%s: a seed name has at most %zu characters", path,
                           sizeof s->name - 1);
                on_error(perr.msg, ctx);
            }
            continue;
        }
        if (kv_path_join(path, sizeof path, dir, de->d_name, err) != 0 ||
            kv_read_file(path, &s->src, &s->len, err) != 0) {
            rc = -1;
            break;
        }
        if (kv_pattern_parse(s->src, s->len, path, &s->meta, &perr) != 0) {
            if (on_error)
                on_error(perr.msg, ctx);
            free(s->src);
            continue;
        }
        snprintf(s->name, sizeof s->name, "%.*s", (int)(strlen(de->d_name) - 3), de->d_name);
        out->n++;
    }
    closedir(d);
    if (rc != 0) {
        kv_library_free(out);
        return -1;
    }
    if (out->n > 1)
        qsort(out->seeds, (size_t)out->n, sizeof *out->seeds, by_name);
    return 0;
}

void kv_library_free(kv_library *lib)
{
    for (int i = 0; i < lib->n; i++)
        free(lib->seeds[i].src);
    free(lib->seeds);
    memset(lib, 0, sizeof *lib);
}

const kv_seed *kv_library_find(const kv_library *lib, const char *name)
{
    for (int i = 0; i < lib->n; i++)
        if (strcmp(lib->seeds[i].name, name) == 0)
            return &lib->seeds[i];
    return NULL;
}

/* ---- seeds generated from schedules ------------------------------------ */

const char *const kv_seeds_names[] = {"patterns", "schedules", "both", NULL};

/* The fixed schedules a collective's generated seeds come from (docs/config.md,
 * `seeds`): for each cell the plainest schedule of it, written with the fewest
 * fields (the rest take their defaults, docs/schedules.md), and `sched_sm_ll`,
 * the collective's direct one-kernel schedule on the LL protocol up to 1 MiB
 * per rank (simple above; allreduce one-shot): the latency-bound sizes'
 * starting point, which the cells' seeds, all simple, are not. A collective
 * that cannot reach a cell (reducescatter, one phase, has no launch=split and
 * no ce beside SM work) has no row for it. */
typedef struct {
    const char *name; /* the seed's name */
    const char *text;
} sched_seed;

typedef struct {
    const char *coll;
    sched_seed seeds[6];
} sched_seeds;

static const sched_seeds sched_table[] = {
    {"allreduce",
     {{"sched_sm_fused", "allreduce; ar"},
      {"sched_sm_unfused", "allreduce launch=split; rs; ag dir=push"},
      {"sched_tma_fused", "allreduce; rs xport=tma; ag xport=tma dir=push"},
      {"sched_tma_unfused", "allreduce launch=split; rs xport=tma; ag xport=tma dir=push"},
      {"sched_ce_unfused", "allreduce; rs xport=ce; ag xport=ce"},
      {"sched_sm_ll", "allreduce ll_max=1M; ar proto=ll"}}},
    {"allgather",
     {{"sched_sm_fused", "allgather; ag dir=push"},
      {"sched_sm_unfused", "allgather launch=split; local; ag"},
      {"sched_tma_fused", "allgather; ag xport=tma"},
      {"sched_tma_unfused", "allgather launch=split; local; ag xport=tma"},
      {"sched_ce_unfused", "allgather; ag xport=ce"},
      {"sched_sm_ll", "allgather ll_max=1M; ag proto=ll"}}},
    {"reducescatter",
     {{"sched_sm_fused", "reducescatter; rs dir=push"},
      {"sched_tma_fused", "reducescatter; rs xport=tma"},
      {"sched_ce_unfused", "reducescatter; rs xport=ce"},
      {"sched_sm_ll", "reducescatter ll_max=1M; rs proto=ll"}}},
    {"alltoall",
     {{"sched_sm_fused", "alltoall; a2a dir=push"},
      {"sched_sm_unfused", "alltoall launch=split; local; a2a"},
      {"sched_tma_fused", "alltoall; a2a xport=tma"},
      {"sched_tma_unfused", "alltoall launch=split; local; a2a xport=tma"},
      {"sched_ce_unfused", "alltoall; a2a xport=ce"},
      {"sched_sm_ll", "alltoall ll_max=1M; a2a proto=ll"}}},
    {"broadcast",
     {{"sched_sm_fused", "broadcast; scatter; ag"},
      {"sched_sm_unfused", "broadcast launch=split; scatter; ag"},
      {"sched_tma_fused", "broadcast; bc xport=tma"},
      {"sched_tma_unfused", "broadcast launch=split; scatter xport=tma; ag xport=tma"},
      {"sched_ce_unfused", "broadcast; bc xport=ce"},
      {"sched_sm_ll", "broadcast ll_max=1M; bc proto=ll"}}},
    {"fp8_allgather",
     {{"sched_sm_fused", "fp8_allgather; quant; ag"},
      {"sched_sm_unfused", "fp8_allgather launch=split; quant; ag"},
      {"sched_tma_fused", "fp8_allgather; quant; ag xport=tma"},
      {"sched_tma_unfused", "fp8_allgather launch=split; quant; ag xport=tma"},
      {"sched_ce_unfused", "fp8_allgather; quant; ag xport=ce"},
      {"sched_sm_ll", "fp8_allgather ll_max=1M; quant; ag proto=ll"}}},
};

/* s generated and appended to lib as `name` (unless lib has that name or
 * that schedule already): 0, or -1. */
static int add_generated(kv_library *lib, int *cap, const char *name, const kv_schedule *s,
                         kv_err *err)
{
    for (int i = 0; i < lib->n; i++) {
        kv_schedule o;
        if (strcmp(lib->seeds[i].name, name) == 0 ||
            (kv_sched_from_source(lib->seeds[i].src, lib->seeds[i].len, &o, NULL) == 1 &&
             kv_sched_equal(&o, s)))
            return 0;
    }
    if (lib->n == *cap) {
        int ncap = *cap ? 2 * *cap : 8;
        kv_seed *n = realloc(lib->seeds, sizeof *n * (size_t)ncap);
        if (!n)
            return kv_err_set(err, "out of memory");
        lib->seeds = n;
        *cap = ncap;
    }
    kv_seed *seed = &lib->seeds[lib->n];
    memset(seed, 0, sizeof *seed);
    snprintf(seed->name, sizeof seed->name, "%s", name);
    if (kv_sched_generate(s, &seed->src, &seed->len, err) != 0)
        return kv_err_prefix(err, "generated seed %s", name);
    if (kv_pattern_parse(seed->src, seed->len, name, &seed->meta, err) != 0) {
        free(seed->src);
        return kv_err_prefix(err, "generated seed %s", name);
    }
    lib->n++;
    return 0;
}

int kv_library_add_schedules(kv_library *lib, const char *problem, kv_err *err)
{
    int c = kv_sched_coll_parse(problem);
    if (c < 0)
        return 0;
    int cap = lib->n; /* the loader's array may be larger; realloc only grows it */
    kv_schedule s;
    kv_sched_default((kv_sched_coll)c, &s);
    if (add_generated(lib, &cap, "sched_default", &s, err) != 0)
        return -1;
    for (size_t t = 0; t < sizeof sched_table / sizeof sched_table[0]; t++) {
        if (strcmp(sched_table[t].coll, problem) != 0)
            continue;
        for (int k = 0; k < 6 && sched_table[t].seeds[k].name; k++) {
            const sched_seed *ss = &sched_table[t].seeds[k];
            kv_err why = {{0}};
            if (kv_sched_parse(ss->text, &s, &why) != 0)
                return kv_err_set(err, "the schedule of generated seed %s (%s): %s", ss->name,
                                  ss->text, why.msg);
            if (add_generated(lib, &cap, ss->name, &s, err) != 0)
                return -1;
        }
    }
    if (lib->n > 1)
        qsort(lib->seeds, (size_t)lib->n, sizeof *lib->seeds, by_name);
    return 0;
}

int kv_library_load_from(const char *patterns_root, const char *problem, kv_seeds_from from,
                         kv_library *out, void (*on_error)(const char *msg, void *ctx), void *ctx,
                         kv_err *err)
{
    memset(out, 0, sizeof *out);
    if (from != KV_SEEDS_SCHEDULES &&
        kv_library_load(patterns_root, problem, out, on_error, ctx, err) != 0)
        return -1;
    if (from != KV_SEEDS_PATTERNS && kv_library_add_schedules(out, problem, err) != 0) {
        kv_library_free(out);
        return -1;
    }
    return 0;
}
