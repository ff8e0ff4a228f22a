/* archive_attempts.c — kevo archive attempts: the attempt log, filtered,
 * from a sequence number or the last N, as text or JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_out.h"
#include "archive_cmd.h"
#include "archive_print.h"

const char kv_view_attempts_usage[] =
    "usage: kevo archive attempts [--run DIR] [--problem P] [--verdict V] [--stage S]\n"
    "                             [--limit N] [--from SEQ] [--json]\n"
    "\n"
    "One line per attempt: sequence, time (UTC), problem, island, stage, verdict,\n"
    "program, speedup, wall seconds, tokens, cost (USD), first line of the detail.\n"
    "--from SEQ starts at that sequence number and --limit N then stops after N\n"
    "matching attempts; without --from, --limit N shows the last N that match.\n"
    "--json prints a JSON array, one attempt object per line (full detail).\n"
    "verdicts: none, ok, mismatch, compile_error, runtime_error, hang, crash,\n"
    "          nvls_refused, duplicate, proposal_error, refused, implausible\n"
    "stages:   proposal, screen, full, remeasure, seed\n";

/* ---- attempts ------------------------------------------------------------------------ */

typedef struct {
    const view_opts *o;
    long long printed;
    int json;
    size_t not_utf8; /* --json: bytes replaced by U+FFFD */
    /* tail mode: the last `limit` matches, in a ring */
    kv_attempt *ring;
    size_t ring_cap, ring_n, ring_head;
} attempt_walk;

static int attempt_matches(const view_opts *o, const kv_attempt *a)
{
    if (o->problem && strcmp(a->problem, o->problem) != 0)
        return 0;
    if (o->has_verdict && a->verdict != o->verdict)
        return 0;
    if (o->has_stage && a->stage != o->stage)
        return 0;
    return 1;
}

static int emit_attempt(attempt_walk *w, const kv_attempt *a, kv_err *err)
{
    if (!w->json) {
        kv_attempt_print(stdout, a);
        w->printed++;
        return 0;
    }
    cJSON *j = kv_attempt_to_json(a);
    size_t replaced = 0;
    char *text = j ? kv_json_print(j, 0, &replaced) : NULL;
    w->not_utf8 += replaced;
    cJSON_Delete(j);
    if (!text)
        return kv_err_set(err, "out of memory formatting JSON");
    printf("%s%s", w->printed ? ",\n" : "", text);
    free(text);
    w->printed++;
    return 0;
}

static int ring_push(attempt_walk *w, const kv_attempt *a, kv_err *err)
{
    size_t limit = (size_t)w->o->limit;
    if (w->ring_n < limit && w->ring_n == w->ring_cap) {
        size_t cap = w->ring_cap ? 2 * w->ring_cap : 64;
        if (cap > limit)
            cap = limit;
        kv_attempt *r = realloc(w->ring, cap * sizeof *r);
        if (!r)
            return kv_err_set(err, "out of memory");
        w->ring = r;
        w->ring_cap = cap;
    }
    char *detail = a->detail ? strdup(a->detail) : NULL;
    if (a->detail && !detail)
        return kv_err_set(err, "out of memory");
    kv_attempt *slot;
    if (w->ring_n < limit) {
        slot = &w->ring[w->ring_n++]; /* the ring fills in order before it wraps */
    } else {
        slot = &w->ring[w->ring_head];
        kv_attempt_clear(slot);
        w->ring_head = (w->ring_head + 1) % limit;
    }
    *slot = *a;
    slot->detail = detail;
    return 0;
}

static int on_attempt(const kv_attempt *a, void *ctx, kv_err *err)
{
    attempt_walk *w = ctx;
    if (!attempt_matches(w->o, a))
        return 0;
    if (w->o->limit && !w->o->from)
        return ring_push(w, a, err) == 0 ? 0 : -1;
    if (emit_attempt(w, a, err) != 0)
        return -1;
    return w->o->limit && w->printed >= w->o->limit ? 1 : 0;
}

static void ring_free(attempt_walk *w)
{
    for (size_t i = 0; i < w->ring_n; i++)
        kv_attempt_clear(&w->ring[i]);
    free(w->ring);
    w->ring = NULL;
}

static int list_attempts(kv_txn *t, attempt_walk *w, kv_err *err)
{
    const view_opts *o = w->o;
    uint64_t from = o->from ? o->from : 1;
    if (o->limit && !o->from && !o->problem && !o->has_verdict && !o->has_stage) {
        kv_counters c; /* no filter: the tail starts limit before the end */
        if (kv_get_counters(t, &c, err) != 0)
            return -1;
        if (c.next_attempt_seq > (uint64_t)o->limit)
            from = c.next_attempt_seq - (uint64_t)o->limit;
    }
    if (kv_each_attempt(t, from, on_attempt, w, err) != 0)
        return -1;
    size_t n = w->ring_n;
    for (size_t i = 0; i < n; i++)
        if (emit_attempt(w, &w->ring[(w->ring_head + i) % n], err) != 0)
            return -1;
    return 0;
}

int kv_view_attempts(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    attempt_walk w = {.o = o, .json = o->json};
    if (o->json)
        fputs("[\n", stdout);
    else
        kv_attempt_print_header(stdout);
    int rc = list_attempts(s->t, &w, err);
    if (o->json)
        fputs(w.printed ? "\n]\n" : "]\n", stdout);
    if (w.not_utf8)
        fprintf(stderr, "kevo archive attempts: %zu bytes that were not UTF-8 printed as U+FFFD\n",
                w.not_utf8);
    ring_free(&w);
    return rc;
}
