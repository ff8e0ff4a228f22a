/* config.h — the run configuration: one validated struct read from JSON.
 *
 * Every key, its type, range and default is listed in one schema table
 * (search/config_schema.c) that the parser, `kevo config defaults` and the
 * documentation test all read; docs/config.md documents the same table. */
#ifndef KEVO_CONFIG_H
#define KEVO_CONFIG_H

#include <stdint.h>

#include "common/err.h"
#include "mutate/library.h"    /* kv_seeds_from */
#include "mutate/llm_config.h" /* the llm section, and the name and text limits */

#define KV_CFG_MAX_PROBLEMS 32
#define KV_CFG_MAX_GROUPS 16
#define KV_CFG_MAX_GPUS 16

typedef enum { KV_MUTATOR_TEMPLATE = 0, KV_MUTATOR_LLM = 1 } kv_mutator_kind;

typedef struct {
    int trials; /* correctness trials per size class */
    int screen_warmup, screen_iters;
    int full_warmup, full_iters;
    int timing; /* kv_timing_mode: graph replays (default) or calls */
    double compile_timeout_s;
    double job_timeout_s;      /* deadline of one evaluation job on a GPU group */
    int compile_jobs;          /* 0 = number of cores */
    int recycle_every;         /* restart worker groups after this many jobs */
    int allow_nvls;            /* run NVLS candidates (also needs the machine policy) */
    int allow_runtime_lookups; /* run candidates that look up driver entry points or load code */
    int allow_unconfined;      /* run workers without confinement where the kernel offers none */
    int worker_output_kib; /* per job: the first and the last this many KiB of a worker's output */
    int worker_log_mib;    /* a worker's log file is rotated past this size */
    int scratch_mib;       /* size of each worker's scratch directory (a private tmpfs) */
    int64_t worker_uid;    /* when kevo runs as root: the workers' uid (group g: uid + g) */
} kv_cfg_eval;

typedef struct {
    double interval_min; /* minutes between hot snapshots of the archive; 0 = only at exit */
    int keep;            /* the newest this many snapshots are kept */
} kv_cfg_snapshots;

typedef struct {
    int enabled;         /* kevo run writes <run_dir>/report.html */
    double interval_min; /* minutes between refreshes of it; 0 = only at exit */
    double link_gbps;    /* the link's measured ceiling per direction, GB/s */
} kv_cfg_report;

typedef struct {
    int64_t evaluations;   /* 0 = unlimited */
    double wall_hours;     /* 0 = unlimited */
    int64_t llm_tokens;    /* 0 = unlimited */
    double cost_usd;       /* 0 = unlimited */
    double target_speedup; /* stop a problem once reached; 0 = never */
} kv_cfg_budget;

typedef struct {
    int n_problems;
    char problems[KV_CFG_MAX_PROBLEMS][KV_CFG_NAME_MAX];
    int world;    /* GPUs per evaluation group (W) */
    int n_groups; /* 0 = form groups automatically from NVLink peers */
    int group_size[KV_CFG_MAX_GROUPS];
    int groups[KV_CFG_MAX_GROUPS][KV_CFG_MAX_GPUS];
    int islands;
    int migration_interval; /* accepted evaluations between migrations */
    int reseed_interval;    /* accepted evaluations between re-seeding the weakest island */
    uint64_t seed;          /* RNG seed of the search */
    kv_seeds_from seeds;    /* where the problems' seeds come from (mutate/library.h) */
    char run_dir[KV_CFG_TEXT_MAX];
    kv_cfg_budget budget;
    kv_mutator_kind mutator;
    kv_cfg_llm llm; /* meaningful when mutator == KV_MUTATOR_LLM */
    kv_cfg_eval eval;
    kv_cfg_snapshots snapshots;
    kv_cfg_report report;
} kv_config;

/* Fills cfg with every default. */
void kv_config_defaults(kv_config *cfg);

/* Parses and validates JSON text. `origin` names the text in errors (a path).
 * Errors name the JSON path, e.g. "quick.json: $.budget.evaluations: expected
 * an integer, got a string", and suggest the nearest key for unknown keys. */
int kv_config_parse(const char *json, const char *origin, kv_config *cfg, kv_err *err);

/* Reads and parses a file. */
int kv_config_load(const char *path, kv_config *cfg, kv_err *err);

/* Canonical JSON of a config (every key, defaults included); malloc'ed.
 * Parsing the result gives back an equal struct. */
char *kv_config_to_json(const kv_config *cfg);

#endif
