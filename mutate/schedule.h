/* schedule.h — the schedule language of the collectives (docs/schedules.md):
 * a collective's call written as phases, each saying how it moves its data.
 * The generator (schedule_gen.c) writes an ABI 2 candidate from a schedule;
 * the moves (schedule_moves.c) make structural children of one.
 *
 * Text form (one line; `;` or a newline ends a section; spaces separate
 * key=value fields; every field has a default, and kv_sched_format writes
 * every field, in the order below, so a formatted schedule is canonical):
 *
 *   allreduce threads=512 ctas=2 launch=fused ll_max=256K;
 *   rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring fuse=none;
 *   ag algo=direct dir=push xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring fuse=none
 *
 * The phase sequences a collective may have:
 *   allreduce      ar            (one-shot: every rank sums all of x)
 *                  rs ag         (two-shot: reduce-scatter of parts, then all-gather)
 *   allgather      ag   | local ag
 *   reducescatter  rs
 *   alltoall       a2a  | local a2a
 *   broadcast      bc            (from rank 0)
 *                  scatter ag    (rank 0's slice q to rank q, then all-gather)
 *   fp8_allgather  quant ag      (quantise into this rank's q, then gather bytes)
 *                  ag fuse=quant (quantise while gathering)
 * `local` copies this rank's own shard by itself (so that, under
 * launch=split, the own copy is a kernel apart); without it the ag/a2a phase
 * copies the own shard too. */
#ifndef KEVO_MUTATE_SCHEDULE_H
#define KEVO_MUTATE_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/rng.h"

#define KV_SCHED_MAX_PHASES 4
#define KV_SCHED_TEXT_MAX 1024 /* a formatted schedule always fits */

typedef enum {
    KV_SC_ALLREDUCE,
    KV_SC_ALLGATHER,
    KV_SC_REDUCESCATTER,
    KV_SC_ALLTOALL,
    KV_SC_BROADCAST,
    KV_SC_FP8_ALLGATHER,
    KV_SC_COUNT
} kv_sched_coll;

typedef enum {
    KV_PH_AR,
    KV_PH_RS,
    KV_PH_AG,
    KV_PH_A2A,
    KV_PH_BC,
    KV_PH_SCATTER,
    KV_PH_QUANT,
    KV_PH_LOCAL,
    KV_PH_COUNT
} kv_sched_kind;

typedef enum { KV_ALGO_DIRECT, KV_ALGO_RING, KV_ALGO_TREE, KV_ALGO_COUNT } kv_sched_algo;
typedef enum { KV_DIR_PULL, KV_DIR_PUSH, KV_DIR_COUNT } kv_sched_dir;
/* sm4/sm8/sm16: SM loads and stores of that many bytes; tma: bulk copies
 * (cp.async.bulk) through shared memory; ce: cudaMemcpyAsync between
 * barrier kernels; nvls: multimem loads/stores (generated and classified,
 * never run where multicast is forbidden). */
typedef enum {
    KV_XP_SM4,
    KV_XP_SM8,
    KV_XP_SM16,
    KV_XP_TMA,
    KV_XP_CE,
    KV_XP_NVLS,
    KV_XP_COUNT
} kv_sched_xport;
/* simple: data, then a flag or barrier; ll: 8-byte words carrying 4 bytes
 * and the epoch (kevo_ll.cuh); ll128: 128-byte lines of 120 bytes of data
 * and an 8-byte flag, published line by line with release/acquire. */
typedef enum { KV_PROTO_SIMPLE, KV_PROTO_LL, KV_PROTO_LL128, KV_PROTO_COUNT } kv_sched_proto;
/* What ends a phase (and, for the first phase, what starts the call):
 * grid: every CTA of every rank; cta: CTA b meets CTA b of every rank
 * (valid only when the next phase reads what the same CTA index wrote);
 * chunk: a flag per chunk, the reader waits for the chunks it reads. */
typedef enum { KV_SYNC_GRID, KV_SYNC_CTA, KV_SYNC_CHUNK, KV_SYNC_COUNT } kv_sched_sync;
/* Peer order of step k = 1 .. W-1: ring r+k, rev r-k, xor r^k (W a power of 2). */
typedef enum { KV_ORDER_RING, KV_ORDER_REV, KV_ORDER_XOR, KV_ORDER_COUNT } kv_sched_order;
typedef enum { KV_FUSE_NONE, KV_FUSE_QUANT, KV_FUSE_COUNT } kv_sched_fuse;
/* fused: one kernel for the whole call (ce phases aside); split: one kernel
 * per phase. */
typedef enum { KV_LAUNCH_FUSED, KV_LAUNCH_SPLIT, KV_LAUNCH_COUNT } kv_sched_launch;

typedef struct {
    kv_sched_kind kind;
    kv_sched_algo algo;
    kv_sched_dir dir;
    kv_sched_xport xport;
    kv_sched_proto proto;
    uint32_t chunk; /* bytes per chunk: 0 (whole parts) or a power of 2, 4 KiB .. 1 MiB */
    int inflight;   /* 1, 2, 4, 8, 16: vectors per thread (sm), stages (tma), pieces (ce) */
    kv_sched_sync sync;
    kv_sched_order order;
    kv_sched_fuse fuse;
} kv_sched_phase;

typedef struct {
    kv_sched_coll coll;
    int threads; /* 128, 256, 512, 1024 */
    int ctas;    /* CTAs per SM: 1 .. 4 (capped by occupancy and the signal pad) */
    kv_sched_launch launch;
    uint32_t ll_max; /* bytes per rank up to which ll/ll128 phases use their protocol
                          * (above it they run simple): a power of 2, 16 KiB .. 4 MiB */
    int n_phases;
    kv_sched_phase phase[KV_SCHED_MAX_PHASES];
} kv_schedule;

/* Names ("allreduce", "rs", "direct", "sm16", ...) and their inverses (-1: unknown). */
const char *kv_sched_coll_name(kv_sched_coll c);
int kv_sched_coll_parse(const char *problem); /* a problem's name: -1 when not a collective */
const char *kv_sched_kind_name(kv_sched_kind k);

/* The phase sequences of c, in the doc's order: how many, and the i-th
 * (its kinds into kinds; returns its length, 0 when i is out of range). */
int kv_sched_n_sequences(kv_sched_coll c);
int kv_sched_sequence(kv_sched_coll c, int i, kv_sched_kind kinds[KV_SCHED_MAX_PHASES]);

/* The fields, head ones first, in the canonical order; each value is an
 * index 0 .. n-1 into the field's list of allowed values (threads 128, 256,
 * 512, 1024; chunk 0, 4K, 8K, .. 1M; ...). A field's value out of its list
 * (a struct filled by hand) reads as -1. */
typedef enum {
    KV_SF_THREADS,
    KV_SF_CTAS,
    KV_SF_LAUNCH,
    KV_SF_LL_MAX,
    KV_SF_ALGO,
    KV_SF_DIR,
    KV_SF_XPORT,
    KV_SF_PROTO,
    KV_SF_CHUNK,
    KV_SF_INFLIGHT,
    KV_SF_SYNC,
    KV_SF_ORDER,
    KV_SF_FUSE,
    KV_SF_COUNT
} kv_sched_field;
#define KV_SF_FIRST_PHASE KV_SF_ALGO

const char *kv_sched_field_name(kv_sched_field f); /* "threads", ..., "fuse" */
int kv_sched_field_n_values(kv_sched_field f);
/* Value v's text as the canonical form writes it ("512", "16K", "sm16"). */
void kv_sched_field_text(kv_sched_field f, int v, char *buf, size_t cap);
/* A phase field of p, or a head field of s (p unused): get the index, set by index. */
int kv_sched_head_get(const kv_schedule *s, kv_sched_field f);
void kv_sched_head_set(kv_schedule *s, kv_sched_field f, int v);
int kv_sched_phase_get(const kv_sched_phase *p, kv_sched_field f);
void kv_sched_phase_set(kv_sched_phase *p, kv_sched_field f, int v);

/* Parses text into *out and checks it (kv_sched_check). 0, or -1 with err
 * naming the section, the field and what is wrong ("phase 2 (ag): xport
 * 'sm32': expected sm4, sm8, sm16, tma, ce or nvls"). */
int kv_sched_parse(const char *text, kv_schedule *out, kv_err *err);
/* The same over len bytes (a NUL byte among them is an error). */
int kv_sched_parse_len(const char *text, size_t len, kv_schedule *out, kv_err *err);
/* The canonical text (every field) into buf: 0, or -1 when cap is too small. */
int kv_sched_format(const kv_schedule *s, char *buf, size_t cap);
/* The invariants of docs/schedules.md: 0, or -1 with err saying which one. */
int kv_sched_check(const kv_schedule *s, kv_err *err);
/* Parts of kv_sched_check, for the counting and the moves: the fields of
 * phase i of s on their own (ranges and invariants 2-7 and 9, and sync=chunk
 * needing a chunk), and invariant 8 between phase i and phase i+1. */
int kv_sched_check_phase(const kv_schedule *s, int i, kv_err *err);
int kv_sched_check_link(const kv_schedule *s, int i, kv_err *err);
/* 1 when phase i+1 of s reads what phase i wrote (rs ag, scatter ag, quant ag;
 * not local, whose copy no later phase reads). */
int kv_sched_link_reads(const kv_schedule *s, int i);

/* 1 when two schedules are the same (canonical texts equal). */
int kv_sched_equal(const kv_schedule *a, const kv_schedule *b);

/* The collective's default schedule (valid; the doc's first example of it). */
void kv_sched_default(kv_sched_coll c, kv_schedule *out);
/* A uniformly drawn phase sequence of c, each field drawn uniformly, redrawn
 * until valid (nvls never, unless allow_nvls): a random point of the space. */
void kv_sched_random(kv_sched_coll c, int allow_nvls, kv_rng *rng, kv_schedule *out);
/* The size of c's space of valid schedules (nvls excluded unless allow_nvls),
 * counted exactly by enumeration. */
uint64_t kv_sched_space_size(kv_sched_coll c, int allow_nvls);

/* The cell a schedule is written for, "transport/fusion" as common/cell.h
 * names it (the evaluator classifies from evidence; this is the aim). */
int kv_sched_cell(const kv_schedule *s);

/* The schedule a source was generated from: its `// kevo:schedule ...`
 * line parsed. 1: found and valid; 0: no such line; -1: a line that does
 * not parse (err says why). */
int kv_sched_from_source(const char *src, size_t len, kv_schedule *out, kv_err *err);

/* ---- generator (schedule_gen.c) ---- */

/* A complete ABI 2 candidate for s, NUL-terminated, into *out (malloc'd,
 * the caller's): its header names the schedule (the kevo:schedule line and
 * one comment line per phase), then the kernels and kevo_init / kevo_run /
 * kevo_fini, built on patterns/kevo_sched.cuh. 0, or -1 (invalid schedule,
 * out of memory) with err. */
int kv_sched_generate(const kv_schedule *s, char **out, size_t *len, kv_err *err);

/* 0 when kv_sched_generate writes s: every valid schedule (kv_sched_check's
 * error otherwise). Callers that draw children ask it, so a generator that
 * one day lags the language has one place to say what it does not write. */
int kv_sched_generatable(const kv_schedule *s, kv_err *err);

/* ---- moves (schedule_moves.c) ---- */

typedef enum {
    KV_SMOVE_ALGO,   /* another algorithm for one phase */
    KV_SMOVE_DIR,    /* pull <-> push for one phase */
    KV_SMOVE_XPORT,  /* another transport for one phase */
    KV_SMOVE_PROTO,  /* another protocol for one phase */
    KV_SMOVE_SHAPE,  /* phases split or merged (ar <-> rs ag, bc <-> scatter ag, ...) */
    KV_SMOVE_CHUNK,  /* chunk, inflight or sync of one phase */
    KV_SMOVE_LAUNCH, /* threads, ctas, launch or ll_max */
    KV_SMOVE_CROSS,  /* crossover with a second schedule, phase by phase */
    KV_SMOVE_JUMP,   /* a random valid schedule */
    KV_SMOVE_ANY,    /* the mover picks */
    KV_SMOVE_COUNT
} kv_sched_move;

const char *kv_sched_move_name(kv_sched_move m); /* "algo", "xport", ..., "jump" */

/* A valid child of parent (other: the second parent of a crossover, or
 * NULL) different from parent, by move m (KV_SMOVE_ANY: drawn), into *out;
 * note says what changed ("rs: xport sm16->tma"). 0, or 1 when the move
 * has nothing to change (a crossover of equal schedules, say). Every draw
 * from rng. */
int kv_sched_mutate(const kv_schedule *parent, const kv_schedule *other, kv_sched_move m,
                    int allow_nvls, kv_rng *rng, kv_schedule *out, char *note, size_t note_cap);

#endif
