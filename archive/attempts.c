/* attempts.c — the attempt log: every proposal and evaluation, failures included. */
#include "archive/codec.h"
#include "archive/internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const stage_names[KV_STAGE_COUNT] = {
    [KV_STAGE_PROPOSAL] = "proposal",   [KV_STAGE_SCREEN] = "screen", [KV_STAGE_FULL] = "full",
    [KV_STAGE_REMEASURE] = "remeasure", [KV_STAGE_SEED] = "seed",
};

const char *kv_stage_name(kv_stage s)
{
    if ((int)s < 0 || s >= KV_STAGE_COUNT)
        return "unknown";
    return stage_names[s];
}

int kv_stage_parse(const char *name, kv_stage *out)
{
    for (int i = 0; i < KV_STAGE_COUNT; i++) {
        if (strcmp(name, stage_names[i]) == 0) {
            *out = (kv_stage)i;
            return 0;
        }
    }
    return -1;
}

void kv_attempt_clear(kv_attempt *a)
{
    free(a->detail);
    memset(a, 0, sizeof *a);
}

int kv_add_attempt(kv_txn *t, const kv_attempt *a, uint64_t *seq, kv_err *err)
{
    if (kv_require_write(t, "add attempt", err) != 0)
        return -1;
    if ((int)a->verdict < 0 || a->verdict >= KV_VERDICT_COUNT || (int)a->stage < 0 ||
        a->stage >= KV_STAGE_COUNT)
        return kv_err_set(err, "add attempt: verdict or stage out of range");
    kv_op op = {.type = OP_ADD_ATTEMPT};
    if (kv_encode_attempt(&op.data, a) != 0) {
        kv_buf_free(&op.data);
        return kv_err_set(err, "out of memory");
    }
    uint64_t out[2];
    if (kv_txn_run(t, &op, out, err) != 0)
        return -1;
    if (seq)
        *seq = out[0];
    return 0;
}

int kv_exec_add_attempt(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    kv_attempt a;
    if (kv_decode_attempt(op->data.data, op->data.len, &a, err) != 0)
        return -1;
    a.seq = t->counters.next_attempt_seq;
    uint8_t key[8];
    kv_key_u64(key, a.seq);
    kv_buf_reset(&t->scratch);
    int rc = kv_encode_attempt(&t->scratch, &a) != 0 ? kv_err_set(err, "out of memory") : 0;
    if (rc == 0)
        rc = kv_db_put(t, DB_ATTEMPTS, key, 8, t->scratch.data, t->scratch.len, MDB_APPEND, err);
    if (rc == 0 && a.problem[0])
        rc = kv_bump_problem(t, a.problem, 0, 1, a.verdict == KV_VERDICT_OK, err);
    if (rc == 0) {
        t->counters.next_attempt_seq++;
        t->counters.attempts++;
        t->counters.attempts_by_verdict[a.verdict]++;
        out[0] = a.seq;
        out[1] = 0;
    }
    kv_attempt_clear(&a);
    return rc;
}

typedef struct {
    kv_txn *t;
    kv_attempt_fn fn;
    void *ctx;
} attempt_walk;

static int attempt_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    attempt_walk *w = ctx;
    kv_attempt a;
    if (kv_decode_attempt(val->mv_data, val->mv_size, &a, err) != 0)
        return kv_err_prefix(err, "%s: attempt %llu", w->t->a->path,
                             key->mv_size == 8 ? (unsigned long long)kv_key_get_u64(key->mv_data)
                                               : 0);
    int r = w->fn(&a, w->ctx, err);
    kv_attempt_clear(&a);
    return r;
}

int kv_each_attempt(kv_txn *t, uint64_t from_seq, kv_attempt_fn fn, void *ctx, kv_err *err)
{
    uint8_t start[8];
    kv_key_u64(start, from_seq);
    attempt_walk w = {t, fn, ctx};
    /* from the first attempt: a whole walk, whose count kv_db_walk checks */
    return kv_db_walk(t, DB_ATTEMPTS, NULL, 0, from_seq ? start : NULL, from_seq ? sizeof start : 0,
                      attempt_row, &w, err);
}
