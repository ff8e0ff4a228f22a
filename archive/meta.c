/* meta.c — run-level records: counters, search state, config, problem stats. */
#include "archive/codec.h"
#include "archive/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBLEM_KEY_PREFIX "problem/"
#define PROBLEM_KEY_MAX (sizeof PROBLEM_KEY_PREFIX + KV_NAME_MAX)

static int get_meta(kv_txn *t, const char *name, MDB_val *val, kv_err *err)
{
    return kv_db_get(t, DB_META, name, strlen(name), val, err);
}

static int put_meta(kv_txn *t, const char *name, const void *data, size_t len, kv_err *err)
{
    return kv_db_put(t, DB_META, name, strlen(name), data, len, 0, err);
}

int kv_load_counters(kv_txn *t, kv_counters *c, kv_err *err)
{
    MDB_val val;
    int rc = get_meta(t, "counters", &val, err);
    if (rc == KV_NOTFOUND) {
        memset(c, 0, sizeof *c);
        c->next_program_id = 1;
        c->next_attempt_seq = 1;
        c->size_index = KV_SIZE_INDEX_VERSION; /* nothing stored: the empty ranking is complete */
        return 0;
    }
    if (rc != 0)
        return -1;
    if (kv_decode_counters(val.mv_data, val.mv_size, c, err) != 0)
        return kv_err_prefix(err, "%s: counters", t->a->path);
    return 0;
}

int kv_store_counters(kv_txn *t, kv_err *err)
{
    kv_buf_reset(&t->scratch);
    if (kv_encode_counters(&t->scratch, &t->counters) != 0)
        return kv_err_set(err, "out of memory");
    return put_meta(t, "counters", t->scratch.data, t->scratch.len, err);
}

int kv_get_counters(kv_txn *t, kv_counters *out, kv_err *err)
{
    if (t->write) {
        *out = t->counters;
        return 0;
    }
    return kv_load_counters(t, out, err);
}

/* ---- problem statistics ------------------------------------------------------ */

static size_t problem_key(char *out, const char *problem)
{
    int n = snprintf(out, PROBLEM_KEY_MAX, PROBLEM_KEY_PREFIX "%s", problem);
    return n > 0 && (size_t)n < PROBLEM_KEY_MAX ? (size_t)n : 0;
}

int kv_get_problem_stats(kv_txn *t, const char *problem, kv_problem_stats *out, kv_err *err)
{
    char key[PROBLEM_KEY_MAX];
    size_t klen = problem_key(key, problem);
    if (klen == 0)
        return kv_err_set(err, "problem name too long");
    MDB_val val;
    int rc = kv_db_get(t, DB_META, key, klen, &val, err);
    if (rc != 0)
        return rc;
    if (kv_decode_problem(val.mv_data, val.mv_size, out, err) != 0)
        return kv_err_prefix(err, "%s: %s", t->a->path, key);
    return 0;
}

int kv_bump_problem(kv_txn *t, const char *problem, uint64_t programs, uint64_t attempts,
                    uint64_t ok, kv_err *err)
{
    kv_problem_stats s = {0};
    int rc = kv_get_problem_stats(t, problem, &s, err);
    if (rc < 0)
        return -1;
    if (rc == KV_NOTFOUND) {
        memset(&s, 0, sizeof s);
        snprintf(s.problem, sizeof s.problem, "%s", problem);
    }
    s.programs += programs;
    s.attempts += attempts;
    s.ok += ok;
    char key[PROBLEM_KEY_MAX];
    size_t klen = problem_key(key, problem);
    kv_buf_reset(&t->scratch);
    if (kv_encode_problem(&t->scratch, &s) != 0)
        return kv_err_set(err, "out of memory");
    return kv_db_put(t, DB_META, key, klen, t->scratch.data, t->scratch.len, 0, err);
}

typedef struct {
    kv_txn *t;
    kv_problem_fn fn;
    void *ctx;
} problem_walk;

static int problem_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    problem_walk *w = ctx;
    kv_problem_stats s;
    if (kv_decode_problem(val->mv_data, val->mv_size, &s, err) != 0)
        return kv_err_prefix(err, "%s: %.*s", w->t->a->path, (int)key->mv_size,
                             (const char *)key->mv_data);
    return w->fn(&s, w->ctx, err);
}

int kv_each_problem(kv_txn *t, kv_problem_fn fn, void *ctx, kv_err *err)
{
    problem_walk w = {t, fn, ctx};
    return kv_db_walk(t, DB_META, PROBLEM_KEY_PREFIX, strlen(PROBLEM_KEY_PREFIX), NULL, 0,
                      problem_row, &w, err);
}

/* ---- search state -------------------------------------------------------------- */

int kv_put_state(kv_txn *t, const kv_run_state *s, kv_err *err)
{
    if (kv_require_write(t, "put state", err) != 0)
        return -1;
    kv_op op = {.type = OP_PUT_STATE};
    if (kv_encode_state(&op.data, s) != 0) {
        kv_buf_free(&op.data);
        return kv_err_set(err, "out of memory");
    }
    return kv_txn_run(t, &op, NULL, err);
}

int kv_exec_put_state(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    (void)out;
    return put_meta(t, "state", op->data.data, op->data.len, err);
}

int kv_get_state(kv_txn *t, kv_run_state *out, kv_err *err)
{
    MDB_val val;
    int rc = get_meta(t, "state", &val, err);
    if (rc != 0)
        return rc;
    if (kv_decode_state(val.mv_data, val.mv_size, out, err) != 0)
        return kv_err_prefix(err, "%s: state", t->a->path);
    return 0;
}

/* ---- configuration --------------------------------------------------------------- */

int kv_put_config(kv_txn *t, const char *json, kv_err *err)
{
    if (kv_require_write(t, "put config", err) != 0)
        return -1;
    kv_op op = {.type = OP_PUT_CONFIG};
    kv_buf_append(&op.extra, json, strlen(json));
    if (op.extra.failed) {
        kv_buf_free(&op.extra);
        return kv_err_set(err, "out of memory");
    }
    return kv_txn_run(t, &op, NULL, err);
}

int kv_exec_put_config(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    (void)out;
    uint8_t digest[KV_SHA256_LEN];
    char hex[KV_SHA256_HEX_LEN];
    if (kv_sha256(op->extra.data, op->extra.len, digest) != 0)
        return kv_err_set(err, "%s: config hash: SHA-256 (libcrypto) failed", t->a->path);
    kv_sha256_hex(digest, hex);
    int rc = put_meta(t, "config", op->extra.data, op->extra.len, err);
    if (rc == 0)
        rc = put_meta(t, "config_hash", hex, KV_SHA256_HEX_LEN - 1, err);
    return rc;
}

int kv_get_config(kv_txn *t, char **json, char hash_hex[KV_SHA256_HEX_LEN], kv_err *err)
{
    MDB_val val, h;
    int rc = get_meta(t, "config", &val, err);
    if (rc != 0)
        return rc;
    rc = get_meta(t, "config_hash", &h, err);
    if (rc == KV_NOTFOUND || (rc == 0 && h.mv_size != KV_SHA256_HEX_LEN - 1))
        return kv_err_set(err, "%s: config stored without a valid hash", t->a->path);
    if (rc != 0)
        return -1;
    if (json) {
        char *s = malloc(val.mv_size + 1);
        if (!s)
            return kv_err_set(err, "out of memory");
        memcpy(s, val.mv_data, val.mv_size);
        s[val.mv_size] = 0;
        *json = s;
    }
    if (hash_hex) {
        memcpy(hash_hex, h.mv_data, KV_SHA256_HEX_LEN - 1);
        hash_hex[KV_SHA256_HEX_LEN - 1] = 0;
    }
    return 0;
}
