#include "archive/codec.h"

#include <stdlib.h>
#include <string.h>

/* Field tags. Never reuse a tag for another meaning. */
enum { /* program */
       P_ID = 1,
       P_PROBLEM,
       P_HASH,
       P_SRCLEN,
       P_PARENT,
       P_ISLAND,
       P_OP,
       P_MODEL,
       P_VERDICT,
       P_SIZE,
       P_SPEEDUP,
       P_ROOFLINE,
       P_CELL,
       P_EVIDENCE,
       P_CREATED,
       P_EVALUATED,
       P_PROTOCOL
};
enum { /* size result, nested in P_SIZE */
       S_NAME = 1,
       S_REF,
       S_CAND,
       S_P10,
       S_P90,
       S_ROOF,
       S_OK,
       S_TIMING
};
enum { /* attempt */
       A_SEQ = 1,
       A_TIME,
       A_PROBLEM,
       A_ISLAND,
       A_STAGE,
       A_VERDICT,
       A_PROGRAM,
       A_PARENT,
       A_OP,
       A_MODEL,
       A_SPEEDUP,
       A_WALL,
       A_GPU,
       A_TOK_IN,
       A_TOK_OUT,
       A_COST,
       A_DETAIL
};
enum { /* elite */
       E_PROBLEM = 1,
       E_ISLAND,
       E_CELL,
       E_PROGRAM,
       E_FITNESS,
       E_SINCE
};
enum { /* counters */
       C_NEXT_ID = 1,
       C_PROGRAMS,
       C_NEXT_SEQ,
       C_ATTEMPTS,
       C_ELITES,
       C_BY_VERDICT,
       C_SIZE_INDEX
};
enum { /* run state */
       R_RNG = 1,
       R_EVALS,
       R_WALL,
       R_TOK_IN,
       R_TOK_OUT,
       R_COST,
       R_UPDATED
};
enum { /* problem stats */
       Q_PROBLEM = 1,
       Q_PROGRAMS,
       Q_ATTEMPTS,
       Q_OK
};

/* ---- decoding helpers: each checks the wire type --------------------------- */

#define WANT(f, w, what)                                          \
    do {                                                          \
        if ((f)->wire != (w))                                     \
            return kv_err_set(err, "%s: wrong field type", what); \
    } while (0)

static int get_u64(const kv_field *f, uint64_t *v, const char *what, kv_err *err)
{
    WANT(f, KV_WIRE_VARINT, what);
    *v = f->u;
    return 0;
}

static int get_i64(const kv_field *f, int64_t *v, const char *what, kv_err *err)
{
    WANT(f, KV_WIRE_VARINT, what);
    *v = kv_unzigzag(f->u);
    return 0;
}

static int get_i32(const kv_field *f, int32_t *v, const char *what, kv_err *err)
{
    int64_t x = 0;
    if (get_i64(f, &x, what, err) != 0)
        return -1;
    if (x < INT32_MIN || x > INT32_MAX)
        return kv_err_set(err, "%s: out of range", what);
    *v = (int32_t)x;
    return 0;
}

static int get_f64(const kv_field *f, double *v, const char *what, kv_err *err)
{
    WANT(f, KV_WIRE_F64, what);
    *v = f->d;
    return 0;
}

static int get_str(const kv_field *f, char *dst, size_t cap, const char *what, kv_err *err)
{
    if (kv_field_str(f, dst, cap) != 0)
        return kv_err_set(err, "%s: bad string (wrong type, NUL or longer than %zu)", what,
                          cap - 1);
    return 0;
}

static int get_enum(const kv_field *f, int *v, int count, const char *what, kv_err *err)
{
    WANT(f, KV_WIRE_VARINT, what);
    if (f->u >= (uint64_t)count)
        return kv_err_set(err, "%s: unknown value %llu", what, (unsigned long long)f->u);
    *v = (int)f->u;
    return 0;
}

static int get_dup(const kv_field *f, char **dst, const char *what, kv_err *err)
{
    WANT(f, KV_WIRE_BYTES, what);
    char *s = kv_field_strdup(f);
    if (!s)
        return kv_err_set(err, "%s: out of memory", what);
    free(*dst);
    *dst = s;
    return 0;
}

static int malformed(kv_err *err, const char *what)
{
    return kv_err_set(err, "%s record: malformed field list", what);
}

/* ---- program -------------------------------------------------------------- */

static void encode_size(kv_buf *b, const kv_size_result *s)
{
    kv_buf nested = {0};
    kv_rec_str(&nested, S_NAME, s->name);
    kv_rec_f64(&nested, S_REF, s->ref_us);
    kv_rec_f64(&nested, S_CAND, s->cand_us);
    kv_rec_f64(&nested, S_P10, s->cand_p10_us);
    kv_rec_f64(&nested, S_P90, s->cand_p90_us);
    kv_rec_f64(&nested, S_ROOF, s->roofline_us);
    kv_rec_u64(&nested, S_OK, s->ok ? 1 : 0);
    if (s->timing != KV_SIZE_TIMING_UNKNOWN)
        kv_rec_u64(&nested, S_TIMING, (uint64_t)s->timing);
    if (nested.failed)
        b->failed = 1;
    else
        kv_rec_bytes(b, P_SIZE, nested.data, nested.len);
    kv_buf_free(&nested);
}

int kv_encode_program(kv_buf *b, const kv_program *p)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_PROGRAM);
    kv_rec_u64(b, P_ID, p->id);
    kv_rec_str(b, P_PROBLEM, p->problem);
    kv_rec_bytes(b, P_HASH, p->source_hash, KV_SHA256_LEN);
    kv_rec_u64(b, P_SRCLEN, p->source_len);
    for (uint32_t i = 0; i < p->n_parents && i < KV_MAX_PARENTS; i++)
        kv_rec_u64(b, P_PARENT, p->parents[i]);
    kv_rec_i64(b, P_ISLAND, p->island);
    kv_rec_str(b, P_OP, p->op);
    kv_rec_str(b, P_MODEL, p->model);
    kv_rec_i64(b, P_CREATED, p->created_ns);
    kv_rec_u64(b, P_VERDICT, (uint64_t)p->verdict);
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++)
        encode_size(b, &p->sizes[i]);
    kv_rec_f64(b, P_SPEEDUP, p->speedup);
    kv_rec_f64(b, P_ROOFLINE, p->roofline);
    kv_rec_str(b, P_CELL, p->cell);
    kv_rec_str(b, P_EVIDENCE, p->evidence);
    kv_rec_i64(b, P_EVALUATED, p->evaluated_ns);
    if (p->protocol != KV_PROTOCOL_UNKNOWN)
        kv_rec_u64(b, P_PROTOCOL, (uint64_t)p->protocol);
    return kv_rec_end(b, start);
}

static int decode_size(const kv_field *outer, kv_size_result *s, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    kv_fields_of(outer, &it);
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        switch (f.tag) {
        case S_NAME: rc = get_str(&f, s->name, sizeof s->name, "size.name", err); break;
        case S_REF: rc = get_f64(&f, &s->ref_us, "size.ref_us", err); break;
        case S_CAND: rc = get_f64(&f, &s->cand_us, "size.cand_us", err); break;
        case S_P10: rc = get_f64(&f, &s->cand_p10_us, "size.p10", err); break;
        case S_P90: rc = get_f64(&f, &s->cand_p90_us, "size.p90", err); break;
        case S_ROOF: rc = get_f64(&f, &s->roofline_us, "size.roofline_us", err); break;
        case S_OK: {
            uint64_t v = 0;
            rc = get_u64(&f, &v, "size.ok", err);
            s->ok = v != 0;
            break;
        }
        case S_TIMING: {
            int e = 0;
            rc = get_enum(&f, &e, KV_SIZE_TIMING_COUNT, "size.timing", err);
            s->timing = (kv_size_timing)e;
            break;
        }
        default: break;
        }
        if (rc != 0)
            return -1;
    }
    return r == 0 ? 0 : malformed(err, "size");
}

int kv_decode_program(const void *data, size_t len, kv_program *p, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(p, 0, sizeof *p);
    if (kv_rec_open(data, len, KV_REC_PROGRAM, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        uint64_t u = 0;
        int e = 0;
        switch (f.tag) {
        case P_ID: rc = get_u64(&f, &p->id, "program.id", err); break;
        case P_PROBLEM:
            rc = get_str(&f, p->problem, sizeof p->problem, "program.problem", err);
            break;
        case P_HASH:
            if (f.wire != KV_WIRE_BYTES || f.n != KV_SHA256_LEN)
                rc = kv_err_set(err, "program.source_hash: not a 32-byte hash");
            else
                memcpy(p->source_hash, f.p, KV_SHA256_LEN);
            break;
        case P_SRCLEN:
            rc = get_u64(&f, &u, "program.source_len", err);
            p->source_len = (uint32_t)u;
            break;
        case P_PARENT:
            if (p->n_parents >= KV_MAX_PARENTS)
                rc = kv_err_set(err, "program.parents: more than %d", KV_MAX_PARENTS);
            else
                rc = get_u64(&f, &p->parents[p->n_parents++], "program.parent", err);
            break;
        case P_ISLAND: rc = get_i32(&f, &p->island, "program.island", err); break;
        case P_OP: rc = get_str(&f, p->op, sizeof p->op, "program.op", err); break;
        case P_MODEL: rc = get_str(&f, p->model, sizeof p->model, "program.model", err); break;
        case P_CREATED: rc = get_i64(&f, &p->created_ns, "program.created", err); break;
        case P_VERDICT:
            rc = get_enum(&f, &e, KV_VERDICT_COUNT, "program.verdict", err);
            p->verdict = (kv_verdict)e;
            break;
        case P_SIZE:
            if (f.wire != KV_WIRE_BYTES || p->n_sizes >= KV_MAX_SIZES)
                rc = kv_err_set(err, "program.sizes: bad field or more than %d", KV_MAX_SIZES);
            else
                rc = decode_size(&f, &p->sizes[p->n_sizes++], err);
            break;
        case P_SPEEDUP: rc = get_f64(&f, &p->speedup, "program.speedup", err); break;
        case P_ROOFLINE: rc = get_f64(&f, &p->roofline, "program.roofline", err); break;
        case P_CELL: rc = get_str(&f, p->cell, sizeof p->cell, "program.cell", err); break;
        case P_EVIDENCE: rc = get_dup(&f, &p->evidence, "program.evidence", err); break;
        case P_EVALUATED: rc = get_i64(&f, &p->evaluated_ns, "program.evaluated", err); break;
        case P_PROTOCOL:
            rc = get_enum(&f, &e, KV_PROTOCOL_COUNT, "program.protocol", err);
            p->protocol = (kv_protocol)e;
            break;
        default: break; /* a field added by a later kevo */
        }
        if (rc != 0) {
            kv_program_clear(p);
            return -1;
        }
    }
    if (r != 0) {
        kv_program_clear(p);
        return malformed(err, "program");
    }
    return 0;
}

/* ---- attempt ---------------------------------------------------------------- */

int kv_encode_attempt(kv_buf *b, const kv_attempt *a)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_ATTEMPT);
    kv_rec_u64(b, A_SEQ, a->seq);
    kv_rec_i64(b, A_TIME, a->time_ns);
    kv_rec_str(b, A_PROBLEM, a->problem);
    kv_rec_i64(b, A_ISLAND, a->island);
    kv_rec_u64(b, A_STAGE, (uint64_t)a->stage);
    kv_rec_u64(b, A_VERDICT, (uint64_t)a->verdict);
    kv_rec_u64(b, A_PROGRAM, a->program_id);
    kv_rec_u64(b, A_PARENT, a->parent_id);
    kv_rec_str(b, A_OP, a->op);
    kv_rec_str(b, A_MODEL, a->model);
    kv_rec_f64(b, A_SPEEDUP, a->speedup);
    kv_rec_f64(b, A_WALL, a->wall_s);
    kv_rec_f64(b, A_GPU, a->gpu_s);
    kv_rec_u64(b, A_TOK_IN, a->tokens_in);
    kv_rec_u64(b, A_TOK_OUT, a->tokens_out);
    kv_rec_f64(b, A_COST, a->cost_usd);
    kv_rec_str(b, A_DETAIL, a->detail);
    return kv_rec_end(b, start);
}

int kv_decode_attempt(const void *data, size_t len, kv_attempt *a, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(a, 0, sizeof *a);
    if (kv_rec_open(data, len, KV_REC_ATTEMPT, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0, e = 0;
        switch (f.tag) {
        case A_SEQ: rc = get_u64(&f, &a->seq, "attempt.seq", err); break;
        case A_TIME: rc = get_i64(&f, &a->time_ns, "attempt.time", err); break;
        case A_PROBLEM:
            rc = get_str(&f, a->problem, sizeof a->problem, "attempt.problem", err);
            break;
        case A_ISLAND: rc = get_i32(&f, &a->island, "attempt.island", err); break;
        case A_STAGE:
            rc = get_enum(&f, &e, KV_STAGE_COUNT, "attempt.stage", err);
            a->stage = (kv_stage)e;
            break;
        case A_VERDICT:
            rc = get_enum(&f, &e, KV_VERDICT_COUNT, "attempt.verdict", err);
            a->verdict = (kv_verdict)e;
            break;
        case A_PROGRAM: rc = get_u64(&f, &a->program_id, "attempt.program", err); break;
        case A_PARENT: rc = get_u64(&f, &a->parent_id, "attempt.parent", err); break;
        case A_OP: rc = get_str(&f, a->op, sizeof a->op, "attempt.op", err); break;
        case A_MODEL: rc = get_str(&f, a->model, sizeof a->model, "attempt.model", err); break;
        case A_SPEEDUP: rc = get_f64(&f, &a->speedup, "attempt.speedup", err); break;
        case A_WALL: rc = get_f64(&f, &a->wall_s, "attempt.wall_s", err); break;
        case A_GPU: rc = get_f64(&f, &a->gpu_s, "attempt.gpu_s", err); break;
        case A_TOK_IN: rc = get_u64(&f, &a->tokens_in, "attempt.tokens_in", err); break;
        case A_TOK_OUT: rc = get_u64(&f, &a->tokens_out, "attempt.tokens_out", err); break;
        case A_COST: rc = get_f64(&f, &a->cost_usd, "attempt.cost", err); break;
        case A_DETAIL: rc = get_dup(&f, &a->detail, "attempt.detail", err); break;
        default: break;
        }
        if (rc != 0) {
            kv_attempt_clear(a);
            return -1;
        }
    }
    if (r != 0) {
        kv_attempt_clear(a);
        return malformed(err, "attempt");
    }
    return 0;
}

/* ---- elite ------------------------------------------------------------------ */

int kv_encode_elite(kv_buf *b, const kv_elite *e)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_ELITE);
    kv_rec_str(b, E_PROBLEM, e->problem);
    kv_rec_i64(b, E_ISLAND, e->island);
    kv_rec_str(b, E_CELL, e->cell);
    kv_rec_u64(b, E_PROGRAM, e->program_id);
    kv_rec_f64(b, E_FITNESS, e->fitness);
    kv_rec_i64(b, E_SINCE, e->since_ns);
    return kv_rec_end(b, start);
}

int kv_decode_elite(const void *data, size_t len, kv_elite *e, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(e, 0, sizeof *e);
    if (kv_rec_open(data, len, KV_REC_ELITE, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        switch (f.tag) {
        case E_PROBLEM:
            rc = get_str(&f, e->problem, sizeof e->problem, "elite.problem", err);
            break;
        case E_ISLAND: rc = get_i32(&f, &e->island, "elite.island", err); break;
        case E_CELL: rc = get_str(&f, e->cell, sizeof e->cell, "elite.cell", err); break;
        case E_PROGRAM: rc = get_u64(&f, &e->program_id, "elite.program", err); break;
        case E_FITNESS: rc = get_f64(&f, &e->fitness, "elite.fitness", err); break;
        case E_SINCE: rc = get_i64(&f, &e->since_ns, "elite.since", err); break;
        default: break;
        }
        if (rc != 0)
            return -1;
    }
    return r == 0 ? 0 : malformed(err, "elite");
}

/* ---- counters, state, problem stats ------------------------------------------ */

int kv_encode_counters(kv_buf *b, const kv_counters *c)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_COUNTERS);
    kv_rec_u64(b, C_NEXT_ID, c->next_program_id);
    kv_rec_u64(b, C_PROGRAMS, c->programs);
    kv_rec_u64(b, C_NEXT_SEQ, c->next_attempt_seq);
    kv_rec_u64(b, C_ATTEMPTS, c->attempts);
    kv_rec_u64(b, C_ELITES, c->elites);
    kv_buf list = {0};
    for (int i = 0; i < KV_VERDICT_COUNT; i++)
        kv_buf_varint(&list, c->attempts_by_verdict[i]);
    if (list.failed)
        b->failed = 1;
    else
        kv_rec_bytes(b, C_BY_VERDICT, list.data, list.len);
    kv_buf_free(&list);
    if (c->size_index)
        kv_rec_u64(b, C_SIZE_INDEX, c->size_index);
    return kv_rec_end(b, start);
}

int kv_decode_counters(const void *data, size_t len, kv_counters *c, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(c, 0, sizeof *c);
    if (kv_rec_open(data, len, KV_REC_COUNTERS, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        switch (f.tag) {
        case C_NEXT_ID: rc = get_u64(&f, &c->next_program_id, "counters.next_id", err); break;
        case C_PROGRAMS: rc = get_u64(&f, &c->programs, "counters.programs", err); break;
        case C_NEXT_SEQ: rc = get_u64(&f, &c->next_attempt_seq, "counters.next_seq", err); break;
        case C_ATTEMPTS: rc = get_u64(&f, &c->attempts, "counters.attempts", err); break;
        case C_ELITES: rc = get_u64(&f, &c->elites, "counters.elites", err); break;
        case C_SIZE_INDEX: {
            uint64_t v = 0;
            rc = get_u64(&f, &v, "counters.size_index", err);
            c->size_index = v <= UINT32_MAX ? (uint32_t)v : 0;
            break;
        }
        case C_BY_VERDICT: {
            if (f.wire != KV_WIRE_BYTES) {
                rc = kv_err_set(err, "counters.by_verdict: wrong field type");
                break;
            }
            /* a list of varints; a later kevo may know more verdicts: extra entries are ignored */
            kv_fields list;
            kv_fields_of(&f, &list);
            for (int i = 0; list.p < list.end; i++) {
                uint64_t v;
                if (kv_read_varint(&list, &v) != 0) {
                    rc = kv_err_set(err, "counters.by_verdict: malformed list");
                    break;
                }
                if (i < KV_VERDICT_COUNT)
                    c->attempts_by_verdict[i] = v;
            }
            break;
        }
        default: break;
        }
        if (rc != 0)
            return -1;
    }
    return r == 0 ? 0 : malformed(err, "counters");
}

int kv_encode_state(kv_buf *b, const kv_run_state *s)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_STATE);
    uint8_t rng[32];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 8; k++)
            rng[i * 8 + k] = (uint8_t)(s->rng[i] >> (8 * k));
    kv_rec_bytes(b, R_RNG, rng, sizeof rng);
    kv_rec_u64(b, R_EVALS, s->evaluations);
    kv_rec_f64(b, R_WALL, s->wall_s);
    kv_rec_u64(b, R_TOK_IN, s->tokens_in);
    kv_rec_u64(b, R_TOK_OUT, s->tokens_out);
    kv_rec_f64(b, R_COST, s->cost_usd);
    kv_rec_i64(b, R_UPDATED, s->updated_ns);
    return kv_rec_end(b, start);
}

int kv_decode_state(const void *data, size_t len, kv_run_state *s, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(s, 0, sizeof *s);
    if (kv_rec_open(data, len, KV_REC_STATE, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        switch (f.tag) {
        case R_RNG:
            if (f.wire != KV_WIRE_BYTES || f.n != 32) {
                rc = kv_err_set(err, "state.rng: not 32 bytes");
                break;
            }
            for (int i = 0; i < 4; i++) {
                s->rng[i] = 0;
                for (int k = 0; k < 8; k++)
                    s->rng[i] |= (uint64_t)f.p[i * 8 + k] << (8 * k);
            }
            break;
        case R_EVALS: rc = get_u64(&f, &s->evaluations, "state.evaluations", err); break;
        case R_WALL: rc = get_f64(&f, &s->wall_s, "state.wall_s", err); break;
        case R_TOK_IN: rc = get_u64(&f, &s->tokens_in, "state.tokens_in", err); break;
        case R_TOK_OUT: rc = get_u64(&f, &s->tokens_out, "state.tokens_out", err); break;
        case R_COST: rc = get_f64(&f, &s->cost_usd, "state.cost", err); break;
        case R_UPDATED: rc = get_i64(&f, &s->updated_ns, "state.updated", err); break;
        default: break;
        }
        if (rc != 0)
            return -1;
    }
    return r == 0 ? 0 : malformed(err, "state");
}

int kv_encode_problem(kv_buf *b, const kv_problem_stats *s)
{
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_PROBLEM);
    kv_rec_str(b, Q_PROBLEM, s->problem);
    kv_rec_u64(b, Q_PROGRAMS, s->programs);
    kv_rec_u64(b, Q_ATTEMPTS, s->attempts);
    kv_rec_u64(b, Q_OK, s->ok);
    return kv_rec_end(b, start);
}

int kv_decode_problem(const void *data, size_t len, kv_problem_stats *s, kv_err *err)
{
    kv_fields it;
    kv_field f;
    int r;
    memset(s, 0, sizeof *s);
    if (kv_rec_open(data, len, KV_REC_PROBLEM, &it, err) != 0)
        return -1;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        int rc = 0;
        switch (f.tag) {
        case Q_PROBLEM: rc = get_str(&f, s->problem, sizeof s->problem, "problem.name", err); break;
        case Q_PROGRAMS: rc = get_u64(&f, &s->programs, "problem.programs", err); break;
        case Q_ATTEMPTS: rc = get_u64(&f, &s->attempts, "problem.attempts", err); break;
        case Q_OK: rc = get_u64(&f, &s->ok, "problem.ok", err); break;
        default: break;
        }
        if (rc != 0)
            return -1;
    }
    return r == 0 ? 0 : malformed(err, "problem");
}
