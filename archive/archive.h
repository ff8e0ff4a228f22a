/* archive.h — the run's archive: one LMDB environment per run directory.
 *
 * Named databases (docs/archive.md has the record encoding):
 *   programs   id (u64 BE)                      -> program record
 *   code       program id (u64 BE)              -> compressed source
 *   ranking    problem NUL speedup-key id       -> (empty)     (top-k index)
 *   elites     problem NUL island (u32 BE) cell -> elite record
 *   attempts   sequence (u64 BE)                -> attempt record
 *   lineage    parent id (u64 BE)               -> child id    (dupsort)
 *   meta       "schema", "config", "config_hash", "counters", "state",
 *              "problem/<name>"                 -> small records
 *   sizes      problem NUL size NUL speedup-key id -> (empty)  (best per size)
 *
 * Dedup by source hash uses an index the writer keeps in memory (dedup.c).
 * One writer (the coordinator), any number of readers in other processes;
 * readers see consistent snapshots and never block the writer. Every state
 * change goes through a write transaction: everything done in it commits
 * together or not at all, so a process killed at any instant leaves the last
 * committed state. When the map is full the transaction is replayed on a
 * larger map transparently (write operations are logged so they can be
 * replayed; ids they returned stay valid because replay is deterministic). */
#ifndef KEVO_ARCHIVE_H
#define KEVO_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/names.h"
#include "common/sha256.h"
#include "common/stage.h"
#include "common/verdict.h"

#define KV_ARCHIVE_SCHEMA_VERSION 2   /* 1: sources in kevo's own LZ77 coder */
#define KV_ARCHIVE_FILE "archive.mdb" /* inside the run directory */

#define KV_MAX_PARENTS 8
#define KV_MAX_SIZES 16

typedef struct kv_archive kv_archive;
typedef struct kv_txn kv_txn;

/* ---- records ------------------------------------------------------------ */

/* How a size's times were taken (docs/abi.md, "Timing"): replays of a
 * CUDA graph, or calls one by one, which add ~4 us of launch cost each. */
typedef enum {
    KV_SIZE_TIMING_UNKNOWN = 0, /* not timed, or stored by a kevo that did not record it */
    KV_SIZE_TIMING_GRAPH = 1,
    KV_SIZE_TIMING_CALL = 2,
    KV_SIZE_TIMING_COUNT
} kv_size_timing;

/* "graph", "call", "unknown". */
const char *kv_size_timing_name(kv_size_timing t);

/* One size class of an evaluation. Times in microseconds; the max over ranks
 * of each rank's median. */
typedef struct {
    char name[KV_NAME_MAX];
    double ref_us;
    double cand_us;
    double cand_p10_us, cand_p90_us;
    double roofline_us;
    int ok;
    kv_size_timing timing;
} kv_size_result;

/* How an evaluation's times were measured. */
typedef enum {
    KV_PROTOCOL_UNKNOWN = 0, /* stored by a kevo that did not record it (docs/archive.md) */
    KV_PROTOCOL_FULL = 1,    /* the full protocol; what the per-size ranking keeps */
    KV_PROTOCOL_SCREEN = 2,  /* the short screening protocol */
    KV_PROTOCOL_COUNT
} kv_protocol;

/* The operators of programs that no mutator made: a seed of the pattern
 * library, and a problem's own reference (reference.cu), the first program
 * of a problem without seeds (docs/search.md, "Problems without seeds"). */
#define KV_OP_SEED "seed"
#define KV_OP_REFERENCE "reference"

typedef struct {
    uint64_t id; /* assigned by kv_add_program */
    char problem[KV_NAME_MAX];
    uint8_t source_hash[KV_SHA256_LEN]; /* of the normalised source; set by kv_add_program */
    uint32_t source_len;
    uint32_t n_parents;
    uint64_t parents[KV_MAX_PARENTS];
    int32_t island;
    char op[KV_NAME_MAX];    /* operator: seed, reference, template, llm, ... */
    char model[KV_NAME_MAX]; /* LLM model or pattern name */
    int64_t created_ns;
    /* evaluation result (kv_set_result) */
    kv_verdict verdict;
    uint32_t n_sizes;
    kv_size_result sizes[KV_MAX_SIZES];
    double speedup;         /* geometric mean over size classes; 0 unless ok */
    double roofline;        /* mean fraction of the roofline */
    char cell[KV_NAME_MAX]; /* behaviour cell, e.g. "tma/fused"; "" if unclassified */
    char *evidence;         /* JSON text; owned; NULL if none */
    int64_t evaluated_ns;
    kv_protocol protocol; /* of the times; kv_set_result stores UNKNOWN as FULL */
} kv_program;

typedef struct {
    uint64_t seq; /* assigned by kv_add_attempt */
    int64_t time_ns;
    char problem[KV_NAME_MAX];
    int32_t island;
    kv_stage stage;
    kv_verdict verdict;
    uint64_t program_id; /* 0 when no program resulted */
    uint64_t parent_id;  /* 0 when none */
    char op[KV_NAME_MAX];
    char model[KV_NAME_MAX];
    double speedup;
    double wall_s; /* elapsed time of this step */
    double gpu_s;  /* GPU-group time it held */
    uint64_t tokens_in, tokens_out;
    double cost_usd;
    char *detail; /* reason, compiler error, mismatch location; owned; may be NULL */
} kv_attempt;

typedef struct {
    char problem[KV_NAME_MAX];
    int32_t island;
    char cell[KV_NAME_MAX];
    uint64_t program_id;
    double fitness;
    int64_t since_ns;
} kv_elite;

/* Maintained by the archive itself; always equal to the committed records. */
typedef struct {
    uint64_t next_program_id; /* ids start at 1 */
    uint64_t programs;
    uint64_t next_attempt_seq; /* sequences start at 1 */
    uint64_t attempts;
    uint64_t elites;
    uint64_t attempts_by_verdict[KV_VERDICT_COUNT];
    uint32_t size_index; /* KV_SIZE_INDEX_VERSION when the sizes database is complete;
                                  0 when a kevo that did not keep it wrote last (sizes.c) */
} kv_counters;

typedef struct {
    char problem[KV_NAME_MAX];
    uint64_t programs;
    uint64_t attempts;
    uint64_t ok; /* attempts with verdict ok */
} kv_problem_stats;

/* Owned by the search; stored as given. */
typedef struct {
    uint64_t rng[4];
    uint64_t evaluations; /* budget spent */
    double wall_s;
    uint64_t tokens_in, tokens_out;
    double cost_usd;
    int64_t updated_ns;
} kv_run_state;

void kv_program_clear(kv_program *p); /* frees evidence; zeroes the struct */
void kv_attempt_clear(kv_attempt *a); /* frees detail; zeroes the struct */

const char *kv_stage_name(kv_stage s);
int kv_stage_parse(const char *name, kv_stage *out);

/* ---- environment -------------------------------------------------------- */

/* Fault injection for tests: called right after each commit of a write
 * transaction of one handle, with the number of commits it made so far. A
 * test's hook _exit()s there to leave the archive as a writer killed right
 * after that commit would (tests/integration/test_search_llm.c). */
typedef struct {
    void (*fn)(void *ctx, uint64_t commits);
    void *ctx;
} kv_commit_hook;

typedef struct {
    int readonly;                /* readers: never create or modify anything */
    int create;                  /* writer: create the run directory and archive if missing */
    size_t initial_map_bytes;    /* 0 = default (256 MiB); grows on demand */
    kv_commit_hook after_commit; /* tests: fault injection (fn NULL: none) */
} kv_archive_opts;

/* Opens <run_dir>/archive.mdb. Checks, before LMDB touches anything, that the
 * file is an LMDB file, whole (not truncated), and that its schema version is
 * the one this kevo reads. A writer's archive that holds a commit is walked
 * first in a child process (kv_archive_walk, quick): a damaged one is
 * refused with the damage named, and nothing is written to it. */
int kv_archive_open(const char *run_dir, const kv_archive_opts *opts, kv_archive **out,
                    kv_err *err);
void kv_archive_close(kv_archive *a);
const char *kv_archive_path(const kv_archive *a);
uint64_t kv_archive_map_bytes(const kv_archive *a);

/* One writer per run (docs/archive.md): a writer holds an exclusive flock on
 * <run_dir>/kevo.lock, which says who holds it ("kevo pid 1234 since
 * 2026-..."). kv_archive_open takes it for a writer handle and keeps it until
 * kv_archive_close; kevo run and kevo archive restore take it themselves
 * first. A second process is refused at once: "run directory X is in use by
 * kevo pid 1234 since 2026-...; one writer per run". Within one process the
 * lock is counted, not taken twice. Readers never take it. */
#define KV_RUN_LOCK_FILE "kevo.lock"
typedef struct kv_run_lock kv_run_lock;
int kv_run_lock_take(const char *run_dir, kv_run_lock **out, kv_err *err);
void kv_run_lock_release(kv_run_lock *l); /* NULL is fine */

/* ---- verification ------------------------------------------------------- */

/* Walks every database of the archive (run_dir's, or the file when file is
 * not NULL) in a child process, where a damaged page that makes LMDB fault
 * or abort cannot take the caller down (docs/archive.md). quick (full = 0):
 * every record visited with a cursor, which reads every branch, leaf and
 * overflow page header; full: each record decoded too (checksums, code
 * decompressed). Each damaged record is written to report (when not NULL)
 * as "damaged: <database> <key>: <what>". Returns 0 when the walk found
 * nothing; -1 with err naming the archive as damaged ("... damaged
 * (programs: the walk crashed (signal 11)); the newest good snapshot ...")
 * or, when it does not open, with the open's own message. */
typedef struct {
    uint64_t records; /* visited */
    uint64_t damaged; /* damaged records found (the full walk goes on past them) */
} kv_walk_info;
int kv_archive_walk(const char *run_dir, const char *file, int full, FILE *report,
                    kv_walk_info *info, kv_err *err);
/* For a child process that reads the archive (a walk, a view): the default
 * actions of the signals a damaged page raises, so that the child ends on
 * its signal and its parent names the damage (a sanitizer's handler would
 * print its report and turn the crash into an exit status). */
void kv_archive_crash_default(void);

/* ---- transactions ------------------------------------------------------- */

/* A read snapshot. */
int kv_read_begin(kv_archive *a, kv_txn **out, kv_err *err);
/* The single write transaction (one at a time per archive handle). */
int kv_write_begin(kv_archive *a, kv_txn **out, kv_err *err);
/* Commits a write transaction (ends a read one); the handle is freed either way. */
int kv_txn_commit(kv_txn *t, kv_err *err);
/* Abandons the transaction; nothing it wrote is kept. */
void kv_txn_abort(kv_txn *t);

/* ---- writes (write transactions only) ------------------------------------ */

/* Adds a program unless one with the same normalised source exists for the
 * problem: then *existed = 1 and *id is the existing program's. The result
 * fields of p are ignored (see kv_set_result). */
int kv_add_program(kv_txn *t, const kv_program *p, const char *src, size_t len, uint64_t *id,
                   int *existed, kv_err *err);
/* The same in two steps, so that the expensive part (normalising, hashing
 * and compressing the source, encoding the record) can run on other threads
 * or ahead of the transaction: kv_program_prepare is thread-safe and needs no
 * archive; kv_add_prepared takes ownership of what it is given (and frees
 * it on failure too). */
typedef struct kv_prepared kv_prepared;
kv_prepared *kv_program_prepare(const kv_program *p, const char *src, size_t len, kv_err *err);
void kv_prepared_free(kv_prepared *pp);
int kv_add_prepared(kv_txn *t, kv_prepared *pp, uint64_t *id, int *existed, kv_err *err);
/* Stores an evaluation result for program p->id (verdict, sizes, speedup,
 * roofline, cell, evidence, evaluated_ns, protocol), and in the same
 * transaction its entries of the per-size ranking (kv_each_size_best). */
int kv_set_result(kv_txn *t, const kv_program *p, kv_err *err);
/* Appends an attempt; *seq receives its sequence number (may be NULL). */
int kv_add_attempt(kv_txn *t, const kv_attempt *a, uint64_t *seq, kv_err *err);
/* Insert-if-better for (problem, island >= 0, cell): accepted when the cell is
 * empty or e->fitness is strictly greater. *displaced is the previous holder's
 * id (0 if none). Either out pointer may be NULL. */
int kv_offer_elite(kv_txn *t, const kv_elite *e, int *accepted, uint64_t *displaced, kv_err *err);
/* Removes every elite of one island (re-seeding); *removed may be NULL. */
int kv_clear_island(kv_txn *t, const char *problem, int32_t island, uint64_t *removed, kv_err *err);
int kv_put_state(kv_txn *t, const kv_run_state *s, kv_err *err);
/* Stores the run configuration (canonical JSON) and its hash. */
int kv_put_config(kv_txn *t, const char *json, kv_err *err);

/* ---- reads (any transaction) ------------------------------------------- */

int kv_get_program(kv_txn *t, uint64_t id, kv_program *out, kv_err *err); /* KV_NOTFOUND */
/* The stored (original) source of a program; *src malloc'ed, NUL-terminated. */
int kv_get_source(kv_txn *t, uint64_t id, char **src, size_t *len, kv_err *err);
int kv_get_counters(kv_txn *t, kv_counters *out, kv_err *err);
int kv_get_state(kv_txn *t, kv_run_state *out, kv_err *err); /* KV_NOTFOUND */
int kv_get_config(kv_txn *t, char **json, char hash_hex[KV_SHA256_HEX_LEN],
                  kv_err *err); /* KV_NOTFOUND */
int kv_get_problem_stats(kv_txn *t, const char *problem, kv_problem_stats *out,
                         kv_err *err); /* KV_NOTFOUND */
int kv_get_elite(kv_txn *t, const char *problem, int32_t island, const char *cell, kv_elite *out,
                 kv_err *err); /* KV_NOTFOUND */

/* Iteration: the callback returns 0 to continue, 1 to stop early, -1 to fail
 * (the iterator then returns -1; the callback sets err). Records passed to
 * callbacks are owned by the iterator and valid during the call only. */
typedef int (*kv_program_fn)(const kv_program *p, void *ctx, kv_err *err);
typedef int (*kv_attempt_fn)(const kv_attempt *a, void *ctx, kv_err *err);
typedef int (*kv_elite_fn)(const kv_elite *e, void *ctx, kv_err *err);
typedef int (*kv_problem_fn)(const kv_problem_stats *s, void *ctx, kv_err *err);
typedef int (*kv_id_fn)(uint64_t id, void *ctx, kv_err *err);

int kv_each_program(kv_txn *t, kv_program_fn fn, void *ctx, kv_err *err);
/* Attempts with seq >= from_seq, in order. */
int kv_each_attempt(kv_txn *t, uint64_t from_seq, kv_attempt_fn fn, void *ctx, kv_err *err);
/* Elites of a problem; island < 0 means every island. */
int kv_each_elite(kv_txn *t, const char *problem, int32_t island, kv_elite_fn fn, void *ctx,
                  kv_err *err);
int kv_each_problem(kv_txn *t, kv_problem_fn fn, void *ctx, kv_err *err);
/* Children of a program (lineage), in id order. */
int kv_each_child(kv_txn *t, uint64_t parent, kv_id_fn fn, void *ctx, kv_err *err);

/* The k best ok programs of a problem by speedup, best first; returns the
 * number found (<= k) or -1. */
int kv_top_k(kv_txn *t, const char *problem, int k, uint64_t *ids, double *speedups, kv_err *err);

/* ---- the best program per size ------------------------------------------- */

/* A program's result enters the per-size ranking of its problem at every
 * size it passed and timed (both times > 0) when the program is correct
 * (verdict ok) and was measured with the full protocol. Its rank at a size
 * is first its timing mode, graph-timed before results that did not record
 * it before call-timed (per-call times carry launch costs that graph replays
 * do not, so they are not comparable), then that size's speedup, reference
 * time / candidate time of the same run (robust across machines); equal
 * speedups go to the lower id. The ranking
 * is kept in the transaction of every result (kv_set_result); an archive a
 * kevo without it wrote last is rebuilt from the programs by the next writer
 * that opens it, and read from the programs until then (docs/archive.md). */
#define KV_SIZE_INDEX_VERSION 2 /* 1: ranked by speedup alone */

typedef struct {
    char size[KV_NAME_MAX];
    uint64_t program_id;
    double speedup;         /* ref_us / cand_us */
    double ref_us, cand_us; /* the program's stored times at this size */
    kv_size_timing timing;  /* how they were taken */
    char cell[KV_NAME_MAX];
    int64_t evaluated_ns;
} kv_size_best;

typedef int (*kv_size_best_fn)(const kv_size_best *b, void *ctx, kv_err *err);

/* The best program of each size of a problem that has one, in the byte
 * order of the size names; the callback returns as for iterations. */
int kv_each_size_best(kv_txn *t, const char *problem, kv_size_best_fn fn, void *ctx, kv_err *err);

#endif
