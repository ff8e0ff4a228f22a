/* elites.c — the MAP-Elites grids: one elite per (problem, island, cell). */
#include "archive/codec.h"
#include "archive/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ELITE_KEY_MAX (2 * KV_NAME_MAX + 8)

int kv_offer_elite(kv_txn *t, const kv_elite *e, int *accepted, uint64_t *displaced, kv_err *err)
{
    if (kv_require_write(t, "offer elite", err) != 0)
        return -1;
    if (!e->problem[0] || !e->cell[0] || e->program_id == 0)
        return kv_err_set(err, "offer elite: problem, cell and program id are required");
    if (e->island < 0)
        return kv_err_set(err, "offer elite: island %d (islands are numbered from 0)", e->island);
    if (isnan(e->fitness))
        return kv_err_set(err, "offer elite: fitness of program %llu is NaN",
                          (unsigned long long)e->program_id);
    kv_op op = {.type = OP_OFFER_ELITE};
    if (kv_encode_elite(&op.data, e) != 0) {
        kv_buf_free(&op.data);
        return kv_err_set(err, "out of memory");
    }
    uint64_t out[2];
    if (kv_txn_run(t, &op, out, err) != 0)
        return -1;
    if (accepted)
        *accepted = (int)out[0];
    if (displaced)
        *displaced = out[1];
    return 0;
}

int kv_exec_offer_elite(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    kv_elite e, cur;
    if (kv_decode_elite(op->data.data, op->data.len, &e, err) != 0)
        return -1;
    uint8_t key[ELITE_KEY_MAX];
    size_t klen = kv_elite_key(key, sizeof key, e.problem, e.island, e.cell);
    if (klen == 0)
        return kv_err_set(err, "offer elite: key too long");
    MDB_val val;
    int rc = kv_db_get(t, DB_ELITES, key, klen, &val, err);
    if (rc < 0)
        return -1;
    int had = rc == 0;
    if (had) {
        if (kv_decode_elite(val.mv_data, val.mv_size, &cur, err) != 0)
            return kv_err_prefix(err, "%s: elite %s/%d/%s", t->a->path, e.problem, e.island,
                                 e.cell);
        if (!(e.fitness > cur.fitness)) {
            out[0] = 0;
            out[1] = 0;
            return 0;
        }
    }
    if ((rc = kv_db_put(t, DB_ELITES, key, klen, op->data.data, op->data.len, 0, err)) != 0)
        return rc;
    if (!had)
        t->counters.elites++;
    out[0] = 1;
    out[1] = had ? cur.program_id : 0;
    return 0;
}

int kv_clear_island(kv_txn *t, const char *problem, int32_t island, uint64_t *removed, kv_err *err)
{
    if (kv_require_write(t, "clear island", err) != 0)
        return -1;
    if (island < 0)
        return kv_err_set(err, "clear island: island %d (islands are numbered from 0)", island);
    kv_elite e = {.island = island};
    if (snprintf(e.problem, sizeof e.problem, "%s", problem) >= (int)sizeof e.problem)
        return kv_err_set(err, "clear island: problem name too long");
    kv_op op = {.type = OP_CLEAR_ISLAND};
    if (kv_encode_elite(&op.data, &e) != 0) {
        kv_buf_free(&op.data);
        return kv_err_set(err, "out of memory");
    }
    uint64_t out[2];
    if (kv_txn_run(t, &op, out, err) != 0)
        return -1;
    if (removed)
        *removed = out[0];
    return 0;
}

int kv_exec_clear_island(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    kv_elite e;
    if (kv_decode_elite(op->data.data, op->data.len, &e, err) != 0)
        return -1;
    uint8_t prefix[ELITE_KEY_MAX];
    size_t plen = kv_elite_key(prefix, sizeof prefix, e.problem, e.island, NULL);
    MDB_cursor *c;
    int rc = mdb_cursor_open(t->txn, t->a->dbi[DB_ELITES], &c);
    if (rc != 0)
        return kv_db_fail(t, DB_ELITES, "mdb_cursor_open", rc, err);
    MDB_val key, val;
    uint64_t n = 0;
    for (;;) {
        key.mv_size = plen;
        key.mv_data = prefix;
        rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
        if (rc != 0 || key.mv_size < plen || memcmp(key.mv_data, prefix, plen) != 0)
            break;
        if ((rc = mdb_cursor_del(c, 0)) != 0)
            break;
        n++;
    }
    mdb_cursor_close(c);
    if (rc == MDB_MAP_FULL)
        return KV_MAP_FULL;
    if (rc != 0 && rc != MDB_NOTFOUND)
        return kv_db_fail(t, DB_ELITES, "mdb_cursor_del", rc, err);
    t->counters.elites -= n;
    out[0] = n;
    out[1] = 0;
    return 0;
}

int kv_get_elite(kv_txn *t, const char *problem, int32_t island, const char *cell, kv_elite *out,
                 kv_err *err)
{
    uint8_t key[ELITE_KEY_MAX];
    size_t klen = kv_elite_key(key, sizeof key, problem, island, cell);
    if (klen == 0)
        return kv_err_set(err, "elite key too long");
    MDB_val val;
    int rc = kv_db_get(t, DB_ELITES, key, klen, &val, err);
    if (rc != 0)
        return rc;
    if (kv_decode_elite(val.mv_data, val.mv_size, out, err) != 0)
        return kv_err_prefix(err, "%s: elite %s/%d/%s", t->a->path, problem, island, cell);
    return 0;
}

typedef struct {
    kv_txn *t;
    const char *problem;
    kv_elite_fn fn;
    void *ctx;
} elite_walk;

static int elite_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)key;
    elite_walk *w = ctx;
    kv_elite e;
    if (kv_decode_elite(val->mv_data, val->mv_size, &e, err) != 0)
        return kv_err_prefix(err, "%s: elites of %s", w->t->a->path, w->problem);
    return w->fn(&e, w->ctx, err);
}

int kv_each_elite(kv_txn *t, const char *problem, int32_t island, kv_elite_fn fn, void *ctx,
                  kv_err *err)
{
    uint8_t prefix[ELITE_KEY_MAX];
    size_t plen = island < 0 ? kv_problem_prefix(prefix, sizeof prefix, problem)
                             : kv_elite_key(prefix, sizeof prefix, problem, island, NULL);
    if (plen == 0)
        return kv_err_set(err, "problem name too long");
    elite_walk w = {t, problem, fn, ctx};
    return kv_db_walk(t, DB_ELITES, prefix, plen, NULL, 0, elite_row, &w, err);
}
