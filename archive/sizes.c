/* sizes.c — the per-size ranking: for every (problem, size), the correct
 * programs measured with the full protocol, best speedup at that size first
 * (the `sizes` database; archive.h, kv_each_size_best).
 *
 *   key   problem NUL size NUL mode (u8) ~bits(speedup) (u64 BE) id (u64 BE)
 *   value empty
 *
 * mode orders the timing modes (mode_rank): graph-timed results first, then
 * those of older kevos that did not record it, then call-timed ones, whose
 * times carry launch costs; so a call-timed result never outranks a
 * graph-timed one at a size, and the first entry of a size is its best.
 *
 * It is derived data, like `ranking`: kv_set_result removes the entries of
 * a program's old result and adds those of its new one in the same
 * transaction, so the ranking always says what the programs say. The
 * counters record says whether it is complete (kv_counters.size_index): a
 * kevo that did not keep it rewrites the counters without that field, so
 * an archive such a kevo wrote last is rebuilt from the programs by the
 * next writer that opens it (kv_sizes_open), and readers compute the best
 * per size from the programs until then.
 *
 * Results stored before kevo recorded the protocol (KV_PROTOCOL_UNKNOWN)
 * take the stage of the program's last evaluation in the attempt log:
 * screening if that was the screening stage, the full protocol otherwise. */
#include "archive/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/codec.h"

#define SUFFIX 17 /* after the size's NUL: mode, speedup, id */
#define SIZE_KEY_MAX (2 * KV_NAME_MAX + SUFFIX)

const char *kv_size_timing_name(kv_size_timing t)
{
    switch (t) {
    case KV_SIZE_TIMING_GRAPH: return "graph";
    case KV_SIZE_TIMING_CALL: return "call";
    default: return "unknown";
    }
}

/* The key's mode byte: lower ranks first. */
static uint8_t mode_rank(kv_size_timing t)
{
    return t == KV_SIZE_TIMING_GRAPH ? 0 : t == KV_SIZE_TIMING_CALL ? 2 : 1;
}

/* problem NUL size NUL mode ~bits(speedup) id: 0 when a name does not fit. */
static size_t size_key(uint8_t *out, const char *problem, const kv_size_result *r, double speedup,
                       uint64_t id)
{
    size_t p = strnlen(problem, KV_NAME_MAX), s = strnlen(r->name, KV_NAME_MAX);
    if (p == 0 || p >= KV_NAME_MAX || s == 0 || s >= KV_NAME_MAX)
        return 0;
    memcpy(out, problem, p + 1);
    memcpy(out + p + 1, r->name, s + 1);
    size_t n = p + s + 2;
    out[n] = mode_rank(r->timing);
    uint64_t bits;
    memcpy(&bits, &speedup, sizeof bits); /* positive doubles order like their bits */
    kv_key_u64(out + n + 1, ~bits);
    kv_key_u64(out + n + 9, id);
    return n + SUFFIX;
}

/* The speedup at size i of result p measured with protocol proto when it
 * enters the ranking, else 0: a correct program, the full protocol, the size
 * passed and timed on both sides. */
static double entry_speedup(const kv_program *p, kv_protocol proto, uint32_t i)
{
    const kv_size_result *s = &p->sizes[i];
    if (p->verdict != KV_VERDICT_OK || proto != KV_PROTOCOL_FULL || !s->ok || !s->name[0])
        return 0;
    if (!(s->ref_us > 0) || !(s->cand_us > 0) || !isfinite(s->ref_us) || !isfinite(s->cand_us))
        return 0;
    double r = s->ref_us / s->cand_us;
    return isfinite(r) && r > 0 ? r : 0;
}

/* ---- kept with every result ------------------------------------------------------ */

/* Puts (add) or deletes the entries of result p under protocol proto. */
static int apply(kv_txn *t, const kv_program *p, kv_protocol proto, int add, kv_err *err)
{
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++) {
        double sp = entry_speedup(p, proto, i);
        if (sp <= 0)
            continue;
        uint8_t key[SIZE_KEY_MAX];
        size_t n = size_key(key, p->problem, &p->sizes[i], sp, p->id);
        if (n == 0)
            return kv_err_set(err,
                              "%s: program %llu: size name '%.*s' too long for the sizes "
                              "database",
                              t->a->path, (unsigned long long)p->id, KV_NAME_MAX - 1,
                              p->sizes[i].name);
        int rc = add ? kv_db_put(t, DB_SIZES, key, n, "", 0, 0, err)
                     : kv_db_del(t, DB_SIZES, key, n, NULL, 0, err);
        if (rc != 0 && !(rc == KV_NOTFOUND && !add))
            return rc;
    }
    return 0;
}

int kv_sizes_replace(kv_txn *t, const kv_program *p, const kv_program *q, kv_err *err)
{
    /* p's entries, whatever protocol they were kept under (a result of an
     * older kevo was ranked by its attempts): what is not there is fine */
    int rc = apply(t, p, KV_PROTOCOL_FULL, 0, err);
    return rc != 0 ? rc : apply(t, q, q->protocol, 1, err);
}

/* ---- every entry the programs call for -------------------------------------------- */

typedef int (*entry_fn)(const kv_program *p, uint32_t size, double speedup, void *ctx, kv_err *err);

typedef struct {
    kv_txn *t;
    const char *problem; /* NULL: every problem */
    entry_fn fn;
    void *ctx;
    uint8_t *stage_of; /* program id -> 1 + the stage of its last evaluation; 0 none */
    uint64_t n_ids;
    int stages_read;
} entries;

static int note_stage(const kv_attempt *a, void *ctx, kv_err *err)
{
    (void)err;
    entries *e = ctx;
    if (a->program_id == 0 || a->program_id >= e->n_ids)
        return 0;
    if (a->stage == KV_STAGE_SEED || a->stage == KV_STAGE_SCREEN || a->stage == KV_STAGE_FULL ||
        a->stage == KV_STAGE_REMEASURE)
        e->stage_of[a->program_id] = (uint8_t)(1 + a->stage);
    return 0;
}

/* The protocol of a result stored without one, from the attempt log (read
 * once, when the first such result is met). */
static int legacy_protocol(entries *e, uint64_t id, kv_protocol *out, kv_err *err)
{
    if (!e->stages_read) {
        kv_counters c;
        if (kv_get_counters(e->t, &c, err) != 0)
            return -1;
        e->n_ids = c.next_program_id;
        e->stage_of = calloc(e->n_ids ? e->n_ids : 1, 1);
        if (!e->stage_of)
            return kv_err_set(err, "out of memory reading the attempt log's stages");
        if (kv_each_attempt(e->t, 1, note_stage, e, err) != 0)
            return -1;
        e->stages_read = 1;
    }
    int stage = id < e->n_ids ? e->stage_of[id] : 0;
    *out = stage == 1 + KV_STAGE_SCREEN ? KV_PROTOCOL_SCREEN : KV_PROTOCOL_FULL;
    return 0;
}

static int entry_row(const kv_program *p, void *ctx, kv_err *err)
{
    entries *e = ctx;
    if (p->verdict != KV_VERDICT_OK || (e->problem && strcmp(p->problem, e->problem) != 0))
        return 0;
    kv_protocol proto = p->protocol;
    if (proto == KV_PROTOCOL_UNKNOWN && legacy_protocol(e, p->id, &proto, err) != 0)
        return -1;
    for (uint32_t i = 0; i < p->n_sizes && i < KV_MAX_SIZES; i++) {
        double sp = entry_speedup(p, proto, i);
        if (sp > 0) {
            int r = e->fn(p, i, sp, e->ctx, err);
            if (r != 0)
                return r;
        }
    }
    return 0;
}

static int each_entry(kv_txn *t, const char *problem, entry_fn fn, void *ctx, kv_err *err)
{
    entries e = {.t = t, .problem = problem, .fn = fn, .ctx = ctx};
    int rc = kv_each_program(t, entry_row, &e, err);
    free(e.stage_of);
    return rc;
}

/* ---- rebuilding ------------------------------------------------------------------- */

static int put_entry(const kv_program *p, uint32_t i, double sp, void *ctx, kv_err *err)
{
    kv_txn *t = ctx;
    uint8_t key[SIZE_KEY_MAX];
    size_t n = size_key(key, p->problem, &p->sizes[i], sp, p->id);
    if (n == 0)
        return kv_err_set(err, "%s: program %llu: size name too long for the sizes database",
                          t->a->path, (unsigned long long)p->id);
    return kv_db_put(t, DB_SIZES, key, n, "", 0, 0, err);
}

int kv_exec_rebuild_sizes(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    (void)op;
    (void)out;
    int rc = mdb_drop(t->txn, t->a->dbi[DB_SIZES], 0); /* empties it */
    if (rc == MDB_MAP_FULL)
        return KV_MAP_FULL;
    if (rc != 0)
        return kv_db_fail(t, DB_SIZES, "mdb_drop", rc, err);
    rc = each_entry(t, NULL, put_entry, t, err);
    if (rc != 0)
        return rc;
    t->counters.size_index = KV_SIZE_INDEX_VERSION;
    return 0;
}

int kv_sizes_open(kv_archive *a, kv_err *err)
{
    kv_txn *t = NULL;
    if (kv_write_begin(a, &t, err) != 0)
        return kv_err_prefix(err, "rebuilding the per-size ranking");
    if (t->counters.size_index == KV_SIZE_INDEX_VERSION) {
        kv_txn_abort(t);
        return 0;
    }
    kv_op op = {.type = OP_REBUILD_SIZES};
    if (kv_txn_run(t, &op, NULL, err) != 0) {
        kv_txn_abort(t);
        return kv_err_prefix(err, "rebuilding the per-size ranking");
    }
    return kv_txn_commit(t, err);
}

/* ---- reading: the index, or the programs ------------------------------------------ */

static int first_key(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)val;
    (void)err;
    MDB_val *out = ctx;
    *out = *key;
    return 1;
}

/* The entry at key: its size name and program; -1 when the key is not one. */
static int parse_entry(const MDB_val *k, size_t plen, char size[KV_NAME_MAX], uint64_t *id,
                       double *speedup)
{
    const uint8_t *b = k->mv_data;
    if (k->mv_size < plen + 2 + SUFFIX)
        return -1;
    const uint8_t *nul = memchr(b + plen, 0, k->mv_size - plen - SUFFIX);
    size_t s = nul ? (size_t)(nul - (b + plen)) : 0;
    if (!nul || s == 0 || s >= KV_NAME_MAX || plen + s + 1 + SUFFIX != k->mv_size ||
        b[plen + s + 1] > 2)
        return -1;
    memcpy(size, b + plen, s);
    size[s] = 0;
    uint64_t bits = ~kv_key_get_u64(b + plen + s + 2);
    memcpy(speedup, &bits, sizeof bits);
    *id = kv_key_get_u64(b + plen + s + 2 + 8);
    return 0;
}

static int fill_best(const kv_program *p, uint32_t i, double sp, kv_size_best *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->size, sizeof b->size, "%s", p->sizes[i].name);
    b->program_id = p->id;
    b->speedup = sp;
    b->ref_us = p->sizes[i].ref_us;
    b->cand_us = p->sizes[i].cand_us;
    b->timing = p->sizes[i].timing;
    snprintf(b->cell, sizeof b->cell, "%s", p->cell);
    b->evaluated_ns = p->evaluated_ns;
    return 0;
}

/* The ranking's first entry of each size: one seek per size. */
static int best_from_index(kv_txn *t, const char *problem, kv_size_best_fn fn, void *ctx,
                           kv_err *err)
{
    uint8_t prefix[KV_NAME_MAX + 1], start[SIZE_KEY_MAX + 1];
    size_t plen = kv_problem_prefix(prefix, sizeof prefix, problem);
    if (plen == 0)
        return kv_err_set(err, "problem name too long");
    memcpy(start, prefix, plen);
    size_t slen = plen;
    for (;;) {
        MDB_val k = {0, NULL};
        if (kv_db_walk(t, DB_SIZES, prefix, plen, start, slen, first_key, &k, err) != 0)
            return -1;
        if (!k.mv_data)
            return 0;
        char size[KV_NAME_MAX];
        uint64_t id;
        double sp;
        if (parse_entry(&k, plen, size, &id, &sp) != 0)
            return kv_err_set(err,
                              "%s: sizes: an entry of '%s' that is not one (%zu-byte key); "
                              "'kevo archive verify' names what is damaged",
                              t->a->path, problem, k.mv_size);
        kv_program p;
        int rc = kv_get_program(t, id, &p, err);
        if (rc == KV_NOTFOUND)
            return kv_err_set(err,
                              "%s: sizes: the best of %s at %s is program %llu, which is "
                              "missing",
                              t->a->path, problem, size, (unsigned long long)id);
        if (rc != 0)
            return -1;
        uint32_t i = 0;
        while (i < p.n_sizes && strcmp(p.sizes[i].name, size) != 0)
            i++;
        if (i == p.n_sizes) {
            kv_program_clear(&p);
            return kv_err_set(err,
                              "%s: sizes: the best of %s at %s is program %llu, which has "
                              "no result at that size",
                              t->a->path, problem, size, (unsigned long long)id);
        }
        kv_size_best b;
        fill_best(&p, i, sp, &b);
        kv_program_clear(&p);
        int r = fn(&b, ctx, err);
        if (r != 0)
            return r < 0 ? -1 : 0;
        /* past every entry of this size: problem NUL size NUL, then more than SUFFIX bytes
         * of 0xff */
        size_t s = strlen(size);
        memcpy(start + plen, size, s + 1);
        memset(start + plen + s + 1, 0xff, SUFFIX + 1);
        slen = plen + s + 1 + SUFFIX + 1;
    }
}

typedef struct {
    kv_size_best *v;
    size_t n, cap;
} best_list;

static int keep_best(const kv_program *p, uint32_t i, double sp, void *ctx, kv_err *err)
{
    best_list *l = ctx;
    for (size_t j = 0; j < l->n; j++) {
        kv_size_best *b = &l->v[j];
        if (strcmp(b->size, p->sizes[i].name) != 0)
            continue;
        int was = mode_rank(b->timing), is = mode_rank(p->sizes[i].timing);
        if (is < was ||
            (is == was && (sp > b->speedup || (sp == b->speedup && p->id < b->program_id))))
            fill_best(p, i, sp, b);
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        kv_size_best *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    fill_best(p, i, sp, &l->v[l->n++]);
    return 0;
}

static int by_size(const void *a, const void *b)
{
    return strcmp(((const kv_size_best *)a)->size, ((const kv_size_best *)b)->size);
}

int kv_each_size_best(kv_txn *t, const char *problem, kv_size_best_fn fn, void *ctx, kv_err *err)
{
    kv_counters c;
    if (kv_get_counters(t, &c, err) != 0)
        return -1;
    if (t->a->has_sizes && c.size_index == KV_SIZE_INDEX_VERSION)
        return best_from_index(t, problem, fn, ctx, err);
    best_list l = {0};
    int rc = each_entry(t, problem, keep_best, &l, err);
    if (rc == 0 && l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, by_size);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        int r = fn(&l.v[i], ctx, err);
        if (r != 0)
            rc = r < 0 ? -1 : 0;
        if (r > 0)
            break;
    }
    free(l.v);
    return rc;
}

/* ---- checking (kevo archive verify) ------------------------------------------------ */

typedef struct {
    uint8_t key[SIZE_KEY_MAX];
    size_t len;
} entry_key;

typedef struct {
    entry_key *v;
    size_t n, cap;
} key_list;

static int collect_key(const kv_program *p, uint32_t i, double sp, void *ctx, kv_err *err)
{
    key_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        entry_key *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    entry_key *k = &l->v[l->n];
    k->len = size_key(k->key, p->problem, &p->sizes[i], sp, p->id);
    if (k->len == 0)
        return kv_err_set(err, "program %llu: size name too long", (unsigned long long)p->id);
    l->n++;
    return 0;
}

/* LMDB's default order: bytes, then the shorter key first. */
static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int by_key(const void *a, const void *b)
{
    const entry_key *x = a, *y = b;
    return key_cmp(x->key, x->len, y->key, y->len);
}

/* "allreduce/64KiB program 12" for a key (its shape checked or not). */
static void entry_name(const uint8_t *k, size_t n, char *out, size_t cap)
{
    const uint8_t *nul = memchr(k, 0, n);
    size_t plen = nul ? (size_t)(nul - k) + 1 : 0;
    MDB_val v = {n, (void *)k};
    char size[KV_NAME_MAX];
    uint64_t id;
    double sp;
    if (plen && parse_entry(&v, plen, size, &id, &sp) == 0)
        snprintf(out, cap, "%.*s/%s program %llu", (int)(plen - 1), (const char *)k, size,
                 (unsigned long long)id);
    else
        snprintf(out, cap, "(a %zu-byte key)", n);
}

int kv_sizes_entry_check(const MDB_val *k, const MDB_val *v, kv_err *err)
{
    const uint8_t *nul = k->mv_size ? memchr(k->mv_data, 0, k->mv_size) : NULL;
    char size[KV_NAME_MAX];
    uint64_t id;
    double sp;
    if (v->mv_size != 0 || !nul ||
        parse_entry(k, (size_t)(nul - (const uint8_t *)k->mv_data) + 1, size, &id, &sp) != 0 ||
        !(sp > 0))
        return kv_err_set(err, "not a sizes entry (key %zu bytes, value %zu bytes)", k->mv_size,
                          v->mv_size);
    return 0;
}

typedef struct {
    const key_list *want;
    size_t next; /* the first wanted key not yet met */
    kv_sizes_bad_fn bad;
    void *ctx;
} merge;

static void missing(merge *m, const entry_key *k)
{
    char name[256];
    entry_name(k->key, k->len, name, sizeof name);
    m->bad(m->ctx, name,
           "missing: the program is correct at this size (full protocol) and "
           "the ranking does not hold it");
}

static int merge_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)val;
    (void)err;
    merge *m = ctx;
    const uint8_t *k = key->mv_data;
    while (m->next < m->want->n) {
        const entry_key *w = &m->want->v[m->next];
        int c = key_cmp(w->key, w->len, k, key->mv_size);
        if (c > 0)
            break;
        m->next++;
        if (c == 0)
            return 0;
        missing(m, w);
    }
    char name[256];
    entry_name(k, key->mv_size, name, sizeof name);
    m->bad(m->ctx, name,
           "no such result: the program is not correct at this size with the "
           "full protocol and this speedup");
    return 0;
}

int kv_sizes_check(kv_txn *t, kv_sizes_bad_fn bad, void *ctx, uint64_t *checked, int *skipped,
                   kv_err *err)
{
    kv_counters c;
    *checked = 0;
    *skipped = 0;
    if (kv_get_counters(t, &c, err) != 0)
        return -1;
    if (c.size_index != KV_SIZE_INDEX_VERSION) {
        *skipped = 1;
        return 0;
    }
    if (!t->a->has_sizes) {
        bad(ctx, "(the database)", "missing, while the counters say the ranking is complete");
        return 0;
    }
    key_list want = {0};
    int rc = each_entry(t, NULL, collect_key, &want, err);
    if (rc == 0) {
        if (want.n > 1) /* glibc's qsort takes no NULL, even for nothing */
            qsort(want.v, want.n, sizeof *want.v, by_key);
        size_t kept = 0; /* a size named twice in one result is one entry */
        for (size_t i = 0; i < want.n; i++)
            if (kept == 0 || by_key(&want.v[kept - 1], &want.v[i]) != 0)
                want.v[kept++] = want.v[i];
        want.n = kept;
        merge m = {&want, 0, bad, ctx};
        rc = kv_db_walk(t, DB_SIZES, NULL, 0, NULL, 0, merge_row, &m, err);
        for (; rc == 0 && m.next < want.n; m.next++)
            missing(&m, &want.v[m.next]);
        *checked = want.n;
    }
    free(want.v);
    return rc;
}
