/* programs.c — programs, their sources, the dedup and ranking indexes, lineage. */
#include "archive/codec.h"
#include "archive/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "archive/srccode.h"
#include "common/source.h"

void kv_program_clear(kv_program *p)
{
    free(p->evidence);
    memset(p, 0, sizeof *p);
}

/* ---- keys ------------------------------------------------------------------ */

#define RANK_KEY_MAX (KV_NAME_MAX + 16)

/* problem NUL ~speedup-bits id: a cursor walks a problem's programs best first. */
static size_t rank_key(uint8_t *out, const char *problem, double speedup, uint64_t id)
{
    size_t n = kv_problem_prefix(out, RANK_KEY_MAX, problem);
    if (n == 0 || n + 16 > RANK_KEY_MAX)
        return 0;
    if (!(speedup > 0)) /* NaN, negative and zero all rank last */
        speedup = 0;
    uint64_t bits;
    memcpy(&bits, &speedup, sizeof bits); /* non-negative doubles order like their bits */
    kv_key_u64(out + n, ~bits);
    kv_key_u64(out + n + 8, id);
    return n + 16;
}

static int check_name(const char *what, const char *s, kv_err *err)
{
    size_t n = strnlen(s, KV_NAME_MAX);
    if (n == 0 || n >= KV_NAME_MAX)
        return kv_err_set(err, "%s: must be 1 to %d characters", what, KV_NAME_MAX - 1);
    return 0;
}

/* ---- add -------------------------------------------------------------------- */

struct kv_prepared {
    kv_op op;
};

kv_prepared *kv_program_prepare(const kv_program *p, const char *src, size_t len, kv_err *err)
{
    if (check_name("program problem", p->problem, err) != 0)
        return NULL;
    if (p->n_parents > KV_MAX_PARENTS) {
        kv_err_set(err, "program: %u parents, at most %d", p->n_parents, KV_MAX_PARENTS);
        return NULL;
    }
    if (len > UINT32_MAX) {
        kv_err_set(err, "program source: %zu bytes is too large", len);
        return NULL;
    }
    kv_prepared *pp = calloc(1, sizeof *pp);
    if (!pp) {
        kv_err_set(err, "out of memory");
        return NULL;
    }
    kv_program q = *p;
    q.id = 0;
    q.evidence = NULL; /* results are stored by kv_set_result */
    q.verdict = KV_VERDICT_NONE;
    q.n_sizes = 0;
    q.speedup = q.roofline = 0;
    q.cell[0] = 0;
    q.evaluated_ns = 0;
    q.protocol = KV_PROTOCOL_UNKNOWN;
    q.source_len = (uint32_t)len;
    pp->op.type = OP_ADD_PROGRAM;
    if (kv_source_hash(src, len, q.source_hash) != 0) {
        kv_prepared_free(pp);
        kv_err_set(err, "program source: hashing failed (out of memory, or libcrypto failed)");
        return NULL;
    }
    if (kv_encode_program(&pp->op.data, &q) != 0) {
        kv_prepared_free(pp);
        kv_err_set(err, "out of memory preparing a program");
        return NULL;
    }
    if (kv_code_encode(&pp->op.extra, src, len, err) != 0) {
        kv_prepared_free(pp);
        kv_err_prefix(err, "program source");
        return NULL;
    }
    return pp;
}

void kv_prepared_free(kv_prepared *pp)
{
    if (!pp)
        return;
    kv_buf_free(&pp->op.data);
    kv_buf_free(&pp->op.extra);
    free(pp);
}

int kv_add_prepared(kv_txn *t, kv_prepared *pp, uint64_t *id, int *existed, kv_err *err)
{
    if (kv_require_write(t, "add program", err) != 0) {
        kv_prepared_free(pp);
        return -1;
    }
    kv_op op = pp->op; /* the op log takes the buffers */
    free(pp);
    uint64_t out[2];
    if (kv_txn_run(t, &op, out, err) != 0)
        return -1;
    if (id)
        *id = out[0];
    if (existed)
        *existed = (int)out[1];
    return 0;
}

int kv_add_program(kv_txn *t, const kv_program *p, const char *src, size_t len, uint64_t *id,
                   int *existed, kv_err *err)
{
    if (kv_require_write(t, "add program", err) != 0)
        return -1;
    kv_prepared *pp = kv_program_prepare(p, src, len, err);
    return pp ? kv_add_prepared(t, pp, id, existed, err) : -1;
}

int kv_exec_add_program(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    kv_program p;
    if (kv_decode_program(op->data.data, op->data.len, &p, err) != 0)
        return -1;
    if (!t->dedup_ready) {
        if (kv_dedup_refresh(t, &t->a->dedup, err) != 0)
            return -1;
        t->dedup_ready = 1;
    }
    uint64_t existing;
    if (kv_dedup_find(t->a->dedup, p.problem, p.source_hash, &existing) == 0) {
        out[0] = existing;
        out[1] = 1;
        return 0;
    }
    int rc;
    if (!t->zdict_ready) {
        size_t dn;
        uint32_t did;
        kv_zdict_builtin(&dn, &did);
        if ((rc = kv_zdict_store(t, did, err)) != 0)
            return rc;
        t->zdict_ready = 1;
    }

    p.id = t->counters.next_program_id;
    uint8_t idkey[8];
    kv_key_u64(idkey, p.id);
    kv_buf_reset(&t->scratch);
    if (kv_encode_program(&t->scratch, &p) != 0)
        return kv_err_set(err, "out of memory");
    if ((rc = kv_db_put(t, DB_PROGRAMS, idkey, 8, t->scratch.data, t->scratch.len, MDB_NOOVERWRITE,
                        err)) != 0)
        return rc == KV_EXISTS
                   ? kv_err_set(err, "%s: program id %llu already used (corrupt counters)",
                                t->a->path, (unsigned long long)p.id)
                   : rc;
    /* keyed by the (increasing) program id, the code lands on pages appended
     * at the end instead of random leaves of a hash-keyed tree */
    if ((rc = kv_db_put(t, DB_CODE, idkey, 8, op->extra.data, op->extra.len, MDB_APPEND, err)) != 0)
        return rc == KV_EXISTS ? kv_err_set(err, "%s: code of program %llu already stored",
                                            t->a->path, (unsigned long long)p.id)
                               : rc;
    for (uint32_t i = 0; i < p.n_parents; i++) {
        uint8_t pkey[8];
        kv_key_u64(pkey, p.parents[i]);
        rc = kv_db_put(t, DB_LINEAGE, pkey, 8, idkey, 8, MDB_NODUPDATA, err);
        if (rc != 0 && rc != KV_EXISTS)
            return rc;
    }
    if ((rc = kv_bump_problem(t, p.problem, 1, 0, 0, err)) != 0)
        return rc;
    if (kv_dedup_add_pending(t->a->dedup, p.problem, p.source_hash, p.id) != 0)
        return kv_err_set(err, "out of memory indexing sources");
    t->counters.next_program_id++;
    t->counters.programs++;
    out[0] = p.id;
    out[1] = 0;
    return 0;
}

/* ---- results -------------------------------------------------------------- */

int kv_set_result(kv_txn *t, const kv_program *p, kv_err *err)
{
    if (kv_require_write(t, "set result", err) != 0)
        return -1;
    if (p->n_sizes > KV_MAX_SIZES)
        return kv_err_set(err, "program %llu: %u sizes, at most %d", (unsigned long long)p->id,
                          p->n_sizes, KV_MAX_SIZES);
    if (isnan(p->speedup) || p->speedup < 0)
        return kv_err_set(err, "program %llu: speedup must be a non-negative number",
                          (unsigned long long)p->id);
    if ((unsigned)p->protocol >= KV_PROTOCOL_COUNT)
        return kv_err_set(err, "program %llu: unknown protocol %d", (unsigned long long)p->id,
                          (int)p->protocol);
    kv_program q = *p; /* shares evidence, which encoding only reads */
    if (q.protocol == KV_PROTOCOL_UNKNOWN)
        q.protocol = KV_PROTOCOL_FULL; /* the default protocol, unless the caller says otherwise */
    kv_op op = {.type = OP_SET_RESULT};
    if (kv_encode_program(&op.data, &q) != 0) {
        kv_buf_free(&op.data);
        return kv_err_set(err, "out of memory encoding a result");
    }
    return kv_txn_run(t, &op, NULL, err);
}

int kv_exec_set_result(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    (void)out;
    kv_program in, cur;
    if (kv_decode_program(op->data.data, op->data.len, &in, err) != 0)
        return -1;
    int rc = kv_get_program(t, in.id, &cur, err);
    if (rc == KV_NOTFOUND)
        rc = kv_err_set(err, "%s: set result: no program %llu", t->a->path,
                        (unsigned long long)in.id);
    if (rc != 0) {
        kv_program_clear(&in);
        return -1;
    }
    uint8_t rkey[RANK_KEY_MAX];
    if (cur.verdict == KV_VERDICT_OK) {
        size_t n = rank_key(rkey, cur.problem, cur.speedup, cur.id);
        rc = kv_db_del(t, DB_RANKING, rkey, n, NULL, 0, err);
        if (rc != 0 && rc != KV_NOTFOUND)
            goto out;
    }
    /* the per-size ranking: the old result's entries out, the new one's in */
    in.id = cur.id;
    memcpy(in.problem, cur.problem, sizeof in.problem);
    if ((rc = kv_sizes_replace(t, &cur, &in, err)) != 0)
        goto out;
    /* identity fields stay; result fields are replaced */
    cur.verdict = in.verdict;
    cur.n_sizes = in.n_sizes;
    memcpy(cur.sizes, in.sizes, sizeof cur.sizes);
    cur.speedup = in.speedup;
    cur.roofline = in.roofline;
    memcpy(cur.cell, in.cell, sizeof cur.cell);
    free(cur.evidence);
    cur.evidence = in.evidence;
    in.evidence = NULL;
    cur.evaluated_ns = in.evaluated_ns;
    cur.protocol = in.protocol;

    uint8_t idkey[8];
    kv_key_u64(idkey, cur.id);
    kv_buf_reset(&t->scratch);
    if (kv_encode_program(&t->scratch, &cur) != 0) {
        rc = kv_err_set(err, "out of memory");
        goto out;
    }
    if ((rc = kv_db_put(t, DB_PROGRAMS, idkey, 8, t->scratch.data, t->scratch.len, 0, err)) != 0)
        goto out;
    if (cur.verdict == KV_VERDICT_OK) {
        size_t n = rank_key(rkey, cur.problem, cur.speedup, cur.id);
        rc = kv_db_put(t, DB_RANKING, rkey, n, "", 0, 0, err);
    }
out:
    kv_program_clear(&in);
    kv_program_clear(&cur);
    return rc;
}

/* ---- reads ------------------------------------------------------------------ */

int kv_get_program(kv_txn *t, uint64_t id, kv_program *out, kv_err *err)
{
    uint8_t key[8];
    kv_key_u64(key, id);
    MDB_val val;
    int rc = kv_db_get(t, DB_PROGRAMS, key, 8, &val, err);
    if (rc != 0)
        return rc;
    if (kv_decode_program(val.mv_data, val.mv_size, out, err) != 0)
        return kv_err_prefix(err, "%s: program %llu", t->a->path, (unsigned long long)id);
    return 0;
}

int kv_get_source(kv_txn *t, uint64_t id, char **src, size_t *len, kv_err *err)
{
    MDB_val val;
    uint8_t key[8];
    kv_key_u64(key, id);
    int rc = kv_db_get(t, DB_CODE, key, sizeof key, &val, err);
    if (rc != 0)
        return rc;
    kv_code c;
    if (kv_code_parse(val.mv_data, val.mv_size, &c, err) != 0)
        return kv_err_prefix(err, "%s: program %llu", t->a->path, (unsigned long long)id);
    if (c.codec == KV_CODEC_LZ)
        return kv_err_set(err, "%s: program %llu: code in the LZ codec of schema 1", t->a->path,
                          (unsigned long long)id);
    const ZSTD_DDict *d = NULL;
    if (c.dict_id != 0 && kv_zdict_get(t, c.dict_id, &d, err) != 0)
        return kv_err_prefix(err, "program %llu", (unsigned long long)id);
    char *s = malloc(c.raw_len + 1);
    if (!s)
        return kv_err_set(err, "out of memory");
    if (c.codec == KV_CODEC_RAW) {
        memcpy(s, c.bytes, c.raw_len);
    } else if (kv_code_unzstd(&c, d, s, err) != 0) {
        free(s);
        return kv_err_prefix(err, "%s: program %llu", t->a->path, (unsigned long long)id);
    }
    s[c.raw_len] = 0;
    *src = s;
    if (len)
        *len = c.raw_len;
    return 0;
}

typedef struct {
    kv_txn *t;
    kv_program_fn fn;
    void *ctx;
} program_walk;

static int program_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    program_walk *w = ctx;
    kv_program p;
    if (kv_decode_program(val->mv_data, val->mv_size, &p, err) != 0)
        return kv_err_prefix(err, "%s: program %llu", w->t->a->path,
                             key->mv_size == 8 ? (unsigned long long)kv_key_get_u64(key->mv_data)
                                               : 0);
    int r = w->fn(&p, w->ctx, err);
    kv_program_clear(&p);
    return r;
}

int kv_each_program(kv_txn *t, kv_program_fn fn, void *ctx, kv_err *err)
{
    program_walk w = {t, fn, ctx};
    return kv_db_walk(t, DB_PROGRAMS, NULL, 0, NULL, 0, program_row, &w, err);
}

typedef struct {
    size_t plen;
    int k, n;
    uint64_t *ids;
    double *speedups;
} rank_walk;

static int rank_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)val;
    rank_walk *w = ctx;
    if (w->n >= w->k)
        return 1;
    if (key->mv_size != w->plen + 16)
        return kv_err_set(err, "corrupt ranking entry (%zu-byte key)", key->mv_size);
    const uint8_t *kp = (const uint8_t *)key->mv_data + w->plen;
    uint64_t bits = ~kv_key_get_u64(kp);
    if (w->ids)
        w->ids[w->n] = kv_key_get_u64(kp + 8);
    if (w->speedups)
        memcpy(&w->speedups[w->n], &bits, sizeof bits);
    w->n++;
    return 0;
}

int kv_top_k(kv_txn *t, const char *problem, int k, uint64_t *ids, double *speedups, kv_err *err)
{
    uint8_t prefix[RANK_KEY_MAX];
    size_t plen = kv_problem_prefix(prefix, sizeof prefix, problem);
    if (plen == 0)
        return kv_err_set(err, "problem name too long");
    rank_walk w = {plen, k, 0, ids, speedups};
    if (k <= 0)
        return 0;
    if (kv_db_walk(t, DB_RANKING, prefix, plen, NULL, 0, rank_row, &w, err) != 0)
        return -1;
    return w.n;
}

typedef struct {
    kv_txn *t;
    kv_id_fn fn;
    void *ctx;
} child_walk;

static int child_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)key;
    child_walk *w = ctx;
    if (val->mv_size != 8)
        return kv_err_set(err, "%s: corrupt lineage entry", w->t->a->path);
    return w->fn(kv_key_get_u64(val->mv_data), w->ctx, err);
}

int kv_each_child(kv_txn *t, uint64_t parent, kv_id_fn fn, void *ctx, kv_err *err)
{
    uint8_t pkey[8];
    kv_key_u64(pkey, parent);
    child_walk w = {t, fn, ctx};
    /* lineage is dupsort: MDB_NEXT walks the children of one key, then the next key */
    return kv_db_walk(t, DB_LINEAGE, pkey, sizeof pkey, NULL, 0, child_row, &w, err);
}
