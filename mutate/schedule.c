/* schedule.c — the schedule language's names, fields and text form
 * (schedule.h; docs/schedules.md): kv_sched_parse, kv_sched_format and the
 * default rule for fields left out. The invariants are schedule_check.c's;
 * counting and drawing, schedule_space.c's; the moves, schedule_moves.c's.
 *
 * Every field is a list of allowed values and is handled by index into it,
 * so that parsing, formatting, enumerating and moving share one table. */
#include "mutate/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"

/* ---- names ------------------------------------------------------------------- */

static const char *const coll_names[KV_SC_COUNT] = {"allreduce", "allgather", "reducescatter",
                                                    "alltoall",  "broadcast", "fp8_allgather"};
static const char *const kind_names[KV_PH_COUNT] = {"ar", "rs",      "ag",    "a2a",
                                                    "bc", "scatter", "quant", "local"};
static const char *const algo_names[] = {"direct", "ring", "tree"};
static const char *const dir_names[] = {"pull", "push"};
static const char *const xport_names[] = {"sm4", "sm8", "sm16", "tma", "ce", "nvls"};
static const char *const proto_names[] = {"simple", "ll", "ll128"};
static const char *const sync_names[] = {"grid", "cta", "chunk"};
static const char *const order_names[] = {"ring", "rev", "xor"};
static const char *const fuse_names[] = {"none", "quant"};
static const char *const launch_names[] = {"fused", "split"};

const char *kv_sched_coll_name(kv_sched_coll c)
{
    return (int)c >= 0 && c < KV_SC_COUNT ? coll_names[c] : "unknown";
}

int kv_sched_coll_parse(const char *problem)
{
    for (int c = 0; problem && c < KV_SC_COUNT; c++)
        if (strcmp(problem, coll_names[c]) == 0)
            return c;
    return -1;
}

const char *kv_sched_kind_name(kv_sched_kind k)
{
    return (int)k >= 0 && k < KV_PH_COUNT ? kind_names[k] : "unknown";
}

/* ---- phase sequences ------------------------------------------------------------ */

static const struct {
    kv_sched_coll coll;
    int n;
    kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
} sequences[] = {
    {KV_SC_ALLREDUCE, 1, {KV_PH_AR}},
    {KV_SC_ALLREDUCE, 2, {KV_PH_RS, KV_PH_AG}},
    {KV_SC_ALLGATHER, 1, {KV_PH_AG}},
    {KV_SC_ALLGATHER, 2, {KV_PH_LOCAL, KV_PH_AG}},
    {KV_SC_REDUCESCATTER, 1, {KV_PH_RS}},
    {KV_SC_ALLTOALL, 1, {KV_PH_A2A}},
    {KV_SC_ALLTOALL, 2, {KV_PH_LOCAL, KV_PH_A2A}},
    {KV_SC_BROADCAST, 1, {KV_PH_BC}},
    {KV_SC_BROADCAST, 2, {KV_PH_SCATTER, KV_PH_AG}},
    {KV_SC_FP8_ALLGATHER, 2, {KV_PH_QUANT, KV_PH_AG}},
    {KV_SC_FP8_ALLGATHER, 1, {KV_PH_AG}},
};
#define N_SEQUENCES (int)(sizeof sequences / sizeof sequences[0])

int kv_sched_n_sequences(kv_sched_coll c)
{
    int n = 0;
    for (int i = 0; i < N_SEQUENCES; i++)
        n += sequences[i].coll == c;
    return n;
}

int kv_sched_sequence(kv_sched_coll c, int i, kv_sched_kind kinds[KV_SCHED_MAX_PHASES])
{
    for (int j = 0; j < N_SEQUENCES; j++) {
        if (sequences[j].coll != c || i-- > 0)
            continue;
        memcpy(kinds, sequences[j].kinds, sizeof sequences[j].kinds);
        return sequences[j].n;
    }
    return 0;
}

/* ---- fields ----------------------------------------------------------------- */

typedef enum { F_ENUM, F_NUM, F_SIZE } field_type;

static const struct {
    const char *name;
    field_type type;
    int n;
    const char *const *names; /* F_ENUM */
} fields[KV_SF_COUNT] = {
    [KV_SF_THREADS] = {"threads", F_NUM, 4, NULL},
    [KV_SF_CTAS] = {"ctas", F_NUM, 4, NULL},
    [KV_SF_LAUNCH] = {"launch", F_ENUM, KV_LAUNCH_COUNT, launch_names},
    [KV_SF_LL_MAX] = {"ll_max", F_SIZE, 9, NULL},
    [KV_SF_ALGO] = {"algo", F_ENUM, KV_ALGO_COUNT, algo_names},
    [KV_SF_DIR] = {"dir", F_ENUM, KV_DIR_COUNT, dir_names},
    [KV_SF_XPORT] = {"xport", F_ENUM, KV_XP_COUNT, xport_names},
    [KV_SF_PROTO] = {"proto", F_ENUM, KV_PROTO_COUNT, proto_names},
    [KV_SF_CHUNK] = {"chunk", F_SIZE, 10, NULL},
    [KV_SF_INFLIGHT] = {"inflight", F_NUM, 5, NULL},
    [KV_SF_SYNC] = {"sync", F_ENUM, KV_SYNC_COUNT, sync_names},
    [KV_SF_ORDER] = {"order", F_ENUM, KV_ORDER_COUNT, order_names},
    [KV_SF_FUSE] = {"fuse", F_ENUM, KV_FUSE_COUNT, fuse_names},
};

const char *kv_sched_field_name(kv_sched_field f)
{
    return (int)f >= 0 && f < KV_SF_COUNT ? fields[f].name : "unknown";
}

int kv_sched_field_n_values(kv_sched_field f)
{
    return (int)f >= 0 && f < KV_SF_COUNT ? fields[f].n : 0;
}

/* The number that value v of a numeric or size field stands for. */
static uint32_t field_number(kv_sched_field f, int v)
{
    switch (f) {
    case KV_SF_THREADS: return 128u << v;
    case KV_SF_CTAS: return (uint32_t)v + 1;
    case KV_SF_LL_MAX: return (16u * 1024) << v;
    case KV_SF_CHUNK: return v == 0 ? 0 : 4096u << (v - 1);
    case KV_SF_INFLIGHT: return 1u << v;
    default: return (uint32_t)v;
    }
}

/* The index of number x in f's list, or -1. */
static int field_index(kv_sched_field f, uint64_t x)
{
    for (int v = 0; v < fields[f].n; v++)
        if (field_number(f, v) == x)
            return v;
    return -1;
}

static void size_text(uint32_t b, char *buf, size_t cap)
{
    if (b && b % (1024u * 1024) == 0)
        snprintf(buf, cap, "%uM", b / (1024u * 1024));
    else if (b && b % 1024 == 0)
        snprintf(buf, cap, "%uK", b / 1024);
    else
        snprintf(buf, cap, "%u", b);
}

void kv_sched_field_text(kv_sched_field f, int v, char *buf, size_t cap)
{
    if ((int)f < 0 || f >= KV_SF_COUNT || v < 0 || v >= fields[f].n)
        snprintf(buf, cap, "invalid");
    else if (fields[f].type == F_ENUM)
        snprintf(buf, cap, "%s", fields[f].names[v]);
    else if (fields[f].type == F_SIZE)
        size_text(field_number(f, v), buf, cap);
    else
        snprintf(buf, cap, "%u", field_number(f, v));
}

static int enum_index(int x, int n)
{
    return x >= 0 && x < n ? x : -1;
}

int kv_sched_head_get(const kv_schedule *s, kv_sched_field f)
{
    switch (f) {
    case KV_SF_THREADS: return s->threads > 0 ? field_index(f, (uint64_t)s->threads) : -1;
    case KV_SF_CTAS: return s->ctas > 0 ? field_index(f, (uint64_t)s->ctas) : -1;
    case KV_SF_LAUNCH: return enum_index((int)s->launch, KV_LAUNCH_COUNT);
    case KV_SF_LL_MAX: return field_index(f, s->ll_max);
    default: return -1;
    }
}

void kv_sched_head_set(kv_schedule *s, kv_sched_field f, int v)
{
    switch (f) {
    case KV_SF_THREADS: s->threads = (int)field_number(f, v); break;
    case KV_SF_CTAS: s->ctas = (int)field_number(f, v); break;
    case KV_SF_LAUNCH: s->launch = (kv_sched_launch)v; break;
    case KV_SF_LL_MAX: s->ll_max = field_number(f, v); break;
    default: break;
    }
}

int kv_sched_phase_get(const kv_sched_phase *p, kv_sched_field f)
{
    switch (f) {
    case KV_SF_ALGO: return enum_index((int)p->algo, KV_ALGO_COUNT);
    case KV_SF_DIR: return enum_index((int)p->dir, KV_DIR_COUNT);
    case KV_SF_XPORT: return enum_index((int)p->xport, KV_XP_COUNT);
    case KV_SF_PROTO: return enum_index((int)p->proto, KV_PROTO_COUNT);
    case KV_SF_CHUNK: return field_index(f, p->chunk);
    case KV_SF_INFLIGHT: return p->inflight > 0 ? field_index(f, (uint64_t)p->inflight) : -1;
    case KV_SF_SYNC: return enum_index((int)p->sync, KV_SYNC_COUNT);
    case KV_SF_ORDER: return enum_index((int)p->order, KV_ORDER_COUNT);
    case KV_SF_FUSE: return enum_index((int)p->fuse, KV_FUSE_COUNT);
    default: return -1;
    }
}

void kv_sched_phase_set(kv_sched_phase *p, kv_sched_field f, int v)
{
    switch (f) {
    case KV_SF_ALGO: p->algo = (kv_sched_algo)v; break;
    case KV_SF_DIR: p->dir = (kv_sched_dir)v; break;
    case KV_SF_XPORT: p->xport = (kv_sched_xport)v; break;
    case KV_SF_PROTO: p->proto = (kv_sched_proto)v; break;
    case KV_SF_CHUNK: p->chunk = field_number(f, v); break;
    case KV_SF_INFLIGHT: p->inflight = (int)field_number(f, v); break;
    case KV_SF_SYNC: p->sync = (kv_sched_sync)v; break;
    case KV_SF_ORDER: p->order = (kv_sched_order)v; break;
    case KV_SF_FUSE: p->fuse = (kv_sched_fuse)v; break;
    default: break;
    }
}

/* ---- format ----------------------------------------------------------------- */

/* Appends " key=value" for fields lo..hi-1 of the head (p NULL) or of p. */
static size_t put_fields(char *buf, size_t cap, size_t o, const kv_schedule *s,
                         const kv_sched_phase *p, int lo, int hi)
{
    for (int f = lo; f < hi; f++) {
        char v[24];
        int x =
            p ? kv_sched_phase_get(p, (kv_sched_field)f) : kv_sched_head_get(s, (kv_sched_field)f);
        kv_sched_field_text((kv_sched_field)f, x, v, sizeof v);
        o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, " %s=%s", fields[f].name, v);
        if (o >= cap)
            return o;
    }
    return o;
}

int kv_sched_format(const kv_schedule *s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return -1;
    size_t o = (size_t)snprintf(buf, cap, "%s", kv_sched_coll_name(s->coll));
    if (o < cap)
        o = put_fields(buf, cap, o, s, NULL, 0, KV_SF_FIRST_PHASE);
    for (int i = 0; i < s->n_phases && i < KV_SCHED_MAX_PHASES && o < cap; i++) {
        o += (size_t)snprintf(buf + o, cap - o, "; %s", kv_sched_kind_name(s->phase[i].kind));
        if (o < cap)
            o = put_fields(buf, cap, o, s, &s->phase[i], KV_SF_FIRST_PHASE, KV_SF_COUNT);
    }
    if (o >= cap) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

int kv_sched_equal(const kv_schedule *a, const kv_schedule *b)
{
    char ta[KV_SCHED_TEXT_MAX], tb[KV_SCHED_TEXT_MAX];
    return kv_sched_format(a, ta, sizeof ta) == 0 && kv_sched_format(b, tb, sizeof tb) == 0 &&
           strcmp(ta, tb) == 0;
}

/* ---- the default rule ---------------------------------------------------------- */

static int has_kind(const kv_schedule *s, kv_sched_kind k)
{
    for (int i = 0; i < s->n_phases; i++)
        if (s->phase[i].kind == k)
            return 1;
    return 0;
}

#define GIVEN(mask, f) (((mask) >> (f)) & 1u)

/* Fills the fields the text left out (given: a bit per field given), as
 * docs/schedules.md ("Defaults") says: the plain defaults, except where an
 * invariant pins a value given the fields that were written. Sync comes
 * last: it depends on the next phase's other fields. */
static void fill_defaults(kv_schedule *s, unsigned head_given, const unsigned *given)
{
    if (!GIVEN(head_given, KV_SF_THREADS))
        s->threads = 512;
    if (!GIVEN(head_given, KV_SF_CTAS))
        s->ctas = 2;
    if (!GIVEN(head_given, KV_SF_LAUNCH))
        s->launch = KV_LAUNCH_FUSED;
    if (!GIVEN(head_given, KV_SF_LL_MAX))
        s->ll_max = 256u * 1024;
    for (int i = 0; i < s->n_phases; i++) {
        kv_sched_phase *p = &s->phase[i];
        unsigned g = given[i];
        if (!GIVEN(g, KV_SF_ALGO))
            p->algo = KV_ALGO_DIRECT;
        if (!GIVEN(g, KV_SF_XPORT))
            p->xport = KV_XP_SM16;
        if (!GIVEN(g, KV_SF_PROTO))
            p->proto = KV_PROTO_SIMPLE;
        if (!GIVEN(g, KV_SF_INFLIGHT))
            p->inflight = 4;
        if (!GIVEN(g, KV_SF_ORDER))
            p->order = KV_ORDER_RING;
        if (!GIVEN(g, KV_SF_DIR)) /* ll, ll128, and ce into the peers' slots, push */
            p->dir = p->proto != KV_PROTO_SIMPLE ||
                             (p->xport == KV_XP_CE && (p->kind == KV_PH_AR || p->kind == KV_PH_RS))
                         ? KV_DIR_PUSH
                         : KV_DIR_PULL;
        if (!GIVEN(g, KV_SF_CHUNK)) { /* tma: a 16K tile, smaller where inflight needs it */
            p->chunk = 0;
            if (p->xport == KV_XP_TMA && p->inflight > 0) {
                p->chunk = 16u * 1024;
                while (p->chunk > 4096 && (uint64_t)p->chunk * (uint64_t)p->inflight > 192u * 1024)
                    p->chunk /= 2;
            }
        }
        if (!GIVEN(g, KV_SF_FUSE))
            p->fuse =
                s->coll == KV_SC_FP8_ALLGATHER && p->kind == KV_PH_AG && !has_kind(s, KV_PH_QUANT)
                    ? KV_FUSE_QUANT
                    : KV_FUSE_NONE;
    }
    for (int i = 0; i < s->n_phases; i++) {
        kv_sched_phase *p = &s->phase[i];
        if (GIVEN(given[i], KV_SF_SYNC))
            continue;
        p->sync = KV_SYNC_CTA; /* unless ce, or cta cannot end it (invariant 8) */
        if (p->xport == KV_XP_CE || (i + 1 < s->n_phases && kv_sched_check_link(s, i, NULL) != 0))
            p->sync = KV_SYNC_GRID;
    }
}

/* ---- parse ------------------------------------------------------------------- */

/* Where an error is: "head" or "phase N (kind)". */
typedef struct {
    char what[48];
} where;

static void where_head(where *w, const kv_schedule *s, int coll_known)
{
    if (coll_known)
        snprintf(w->what, sizeof w->what, "head (%s)", kv_sched_coll_name(s->coll));
    else
        snprintf(w->what, sizeof w->what, "head");
}

/* "a, b, c or d" of f's values into buf. */
static void values_text(kv_sched_field f, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int v = 0; v < fields[f].n && o < cap; v++) {
        char t[24];
        kv_sched_field_text(f, v, t, sizeof t);
        const char *sep = v == 0 ? "" : v + 1 == fields[f].n ? " or " : ", ";
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", sep, t);
    }
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* The value text val of field f into its index; -1 with err. */
static int parse_value(const where *w, kv_sched_field f, const char *val, int *out, kv_err *err)
{
    char expected[160];
    values_text(f, expected, sizeof expected);
    if (fields[f].type == F_ENUM) {
        for (int v = 0; v < fields[f].n; v++)
            if (strcmp(val, fields[f].names[v]) == 0)
                return *out = v, 0;
        return kv_err_set(err, "%s: %s '%.32s': expected %s", w->what, fields[f].name, val,
                          expected);
    }
    size_t n = strlen(val);
    uint64_t mult = 1;
    if (fields[f].type == F_SIZE && n > 0 && (val[n - 1] == 'K' || val[n - 1] == 'M')) {
        mult = val[n - 1] == 'K' ? 1024 : 1024 * 1024;
        n--;
    }
    if (!all_digits(val, n) || n > 9) {
        if (fields[f].type == F_SIZE)
            return kv_err_set(err,
                              "%s: %s '%.32s': a size is a number with an optional K or M "
                              "(binary), e.g. 16K",
                              w->what, fields[f].name, val);
        return kv_err_set(err, "%s: %s '%.32s': expected %s", w->what, fields[f].name, val,
                          expected);
    }
    uint64_t x = strtoull(val, NULL, 10) * mult; /* at most 9 digits: no overflow */
    int v = field_index(f, x);
    if (v < 0) {
        if (f == KV_SF_CHUNK)
            return kv_err_set(err, "%s: chunk '%.32s': expected 0 or a power of 2 from 4K to 1M",
                              w->what, val);
        if (f == KV_SF_LL_MAX)
            return kv_err_set(err, "%s: ll_max '%.32s': expected a power of 2 from 16K to 4M",
                              w->what, val);
        return kv_err_set(err, "%s: %s '%.32s': expected %s", w->what, fields[f].name, val,
                          expected);
    }
    *out = v;
    return 0;
}

/* Splits text (NUL-terminated, in place) at spaces and tabs; up to max
 * words. Returns the count, or max + 1 when there are more. */
static int split_words(char *text, char **words, int max)
{
    int n = 0;
    char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            *p++ = '\0';
        if (!*p)
            return n;
        if (n == max)
            return max + 1;
        words[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
    }
}

/* The key=value words of one section into s (fields lo..hi-1; p NULL for
 * the head); *given gets a bit per field. */
static int parse_fields(const where *w, char **words, int n, int lo, int hi, kv_schedule *s,
                        kv_sched_phase *p, unsigned *given, kv_err *err)
{
    const char *names[KV_SF_COUNT];
    for (int f = lo; f < hi; f++)
        names[f - lo] = fields[f].name;
    for (int k = 0; k < n; k++) {
        char *eq = strchr(words[k], '=');
        if (!eq || eq == words[k])
            return kv_err_set(err, "%s: '%.40s' is not key=value", w->what, words[k]);
        *eq = '\0';
        const char *key = words[k], *val = eq + 1;
        int f = -1;
        for (int j = lo; j < hi; j++)
            if (strcmp(key, fields[j].name) == 0)
                f = j;
        if (f < 0) {
            const char *near = kv_suggest(key, names, (size_t)(hi - lo));
            int other = -1; /* a field of the other kind of section */
            for (int j = 0; j < KV_SF_COUNT; j++)
                if (strcmp(key, fields[j].name) == 0)
                    other = j;
            if (other >= 0)
                return kv_err_set(err, "%s: '%s' is a %s field, not a %s one", w->what, key,
                                  other < KV_SF_FIRST_PHASE ? "head" : "phase",
                                  p ? "phase" : "head");
            if (near)
                return kv_err_set(err, "%s: unknown key '%.32s' (did you mean '%s'?)", w->what, key,
                                  near);
            return kv_err_set(err, "%s: unknown key '%.32s'", w->what, key);
        }
        if (GIVEN(*given, f))
            return kv_err_set(err, "%s: '%s' is given twice", w->what, key);
        if (!*val)
            return kv_err_set(err, "%s: '%s=' has no value", w->what, key);
        int v = 0;
        if (parse_value(w, (kv_sched_field)f, val, &v, err) != 0)
            return -1;
        if (p)
            kv_sched_phase_set(p, (kv_sched_field)f, v);
        else
            kv_sched_head_set(s, (kv_sched_field)f, v);
        *given |= 1u << f;
    }
    return 0;
}

/* One word's kind: its index, or -1 with err. */
static int parse_kind(const where *w, const char *word, kv_err *err)
{
    for (int k = 0; k < KV_PH_COUNT; k++)
        if (strcmp(word, kind_names[k]) == 0)
            return k;
    const char *near = kv_suggest(word, kind_names, KV_PH_COUNT);
    if (strchr(word, '='))
        return kv_err_set(err,
                          "%s: starts with '%.32s', not a phase name (ar, rs, ag, a2a, bc, "
                          "scatter, quant or local)",
                          w->what, word);
    if (near)
        return kv_err_set(err, "%s: unknown phase '%.32s' (did you mean '%s'?)", w->what, word,
                          near);
    return kv_err_set(err,
                      "%s: unknown phase '%.32s': expected ar, rs, ag, a2a, bc, scatter, quant "
                      "or local",
                      w->what, word);
}

static int parse_coll(const char *word, kv_err *err)
{
    int c = kv_sched_coll_parse(word);
    if (c >= 0)
        return c;
    const char *near = kv_suggest(word, coll_names, KV_SC_COUNT);
    if (near)
        return kv_err_set(err, "head: unknown collective '%.32s' (did you mean '%s'?)", word, near);
    return kv_err_set(err,
                      "head: unknown collective '%.32s': expected allreduce, allgather, "
                      "reducescatter, alltoall, broadcast or fp8_allgather",
                      word);
}

/* Cuts text (in place) into sections: a section ends at ';' (with the
 * spaces and one newline after it) or at a newline; what follows the last
 * section may be blank. Returns the count of sections, or -1 with err (an
 * empty section, too many). */
static int split_sections(char *text, char **sec, kv_err *err)
{
    int n = 0;
    char *p = text;
    for (;;) {
        if (n > 0 && p[strspn(p, " \t\r\n")] == '\0')
            return n;
        char *start = p;
        while (*p && *p != ';' && *p != '\n')
            p++;
        int end = *p == '\0';
        if (*p == ';') {
            *p++ = '\0';
            char *q = p + strspn(p, " \t\r");
            if (*q == '\n')
                p = q + 1;
        } else if (*p == '\n') {
            *p++ = '\0';
        }
        if (start[strspn(start, " \t\r")] == '\0') {
            if (n == 0)
                return kv_err_set(err, "head: empty (a schedule starts with its collective)");
            return kv_err_set(err, "phase %d: empty (two separators in a row)", n);
        }
        if (n == 1 + KV_SCHED_MAX_PHASES)
            return kv_err_set(err, "more than %d phases", KV_SCHED_MAX_PHASES);
        sec[n++] = start;
        if (end)
            return n;
    }
}

int kv_sched_parse_len(const char *text, size_t len, kv_schedule *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return kv_err_set(err, "schedule: no text");
    if (len >= KV_SCHED_TEXT_MAX)
        return kv_err_set(err, "schedule: %zu bytes; at most %d", len, KV_SCHED_TEXT_MAX - 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0)
            return kv_err_set(err, "schedule: a NUL byte at offset %zu", i);
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c >= 0x7f)
            return kv_err_set(err, "schedule: byte 0x%02x at offset %zu (the text is plain ASCII)",
                              c, i);
    }
    char buf[KV_SCHED_TEXT_MAX];
    memcpy(buf, text, len);
    buf[len] = '\0';

    char *sec[1 + KV_SCHED_MAX_PHASES];
    int n_sec = split_sections(buf, sec, err);
    if (n_sec < 0)
        return -1;
    if (n_sec < 2)
        return kv_err_set(err, "schedule: no phase (a head, then ';' and at least one phase)");

    kv_schedule s;
    memset(&s, 0, sizeof s);
    unsigned head_given = 0, given[KV_SCHED_MAX_PHASES] = {0};
    char *words[KV_SF_COUNT + 2];
    where w;
    for (int k = 0; k < n_sec; k++) {
        int n = split_words(sec[k], words, KV_SF_COUNT + 1);
        if (k == 0) {
            where_head(&w, &s, 0);
            // NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): split_sections refuses an empty section
            int c = parse_coll(words[0], err);
            if (c < 0)
                return -1;
            s.coll = (kv_sched_coll)c;
            where_head(&w, &s, 1);
        } else {
            snprintf(w.what, sizeof w.what, "phase %d", k);
            int kind = parse_kind(&w, words[0], err);
            if (kind < 0)
                return -1;
            s.phase[k - 1].kind = (kv_sched_kind)kind;
            snprintf(w.what, sizeof w.what, "phase %d (%s)", k, kind_names[kind]);
        }
        if (n > KV_SF_COUNT)
            return kv_err_set(err, "%s: too many fields", w.what);
        if (k == 0 && parse_fields(&w, words + 1, n - 1, 0, KV_SF_FIRST_PHASE, &s, NULL,
                                   &head_given, err) != 0)
            return -1;
        if (k > 0 && parse_fields(&w, words + 1, n - 1, KV_SF_FIRST_PHASE, KV_SF_COUNT, &s,
                                  &s.phase[k - 1], &given[k - 1], err) != 0)
            return -1;
    }
    s.n_phases = n_sec - 1;
    fill_defaults(&s, head_given, given);
    if (kv_sched_check(&s, err) != 0)
        return -1;
    *out = s;
    return 0;
}

int kv_sched_parse(const char *text, kv_schedule *out, kv_err *err)
{
    if (!text) {
        memset(out, 0, sizeof *out);
        return kv_err_set(err, "schedule: no text");
    }
    return kv_sched_parse_len(text, strlen(text), out, err);
}

/* ---- defaults and sources --------------------------------------------------------- */

void kv_sched_default(kv_sched_coll c, kv_schedule *out)
{
    static const char *const text[KV_SC_COUNT] = {
        [KV_SC_ALLREDUCE] = "allreduce; rs; ag dir=push",
        [KV_SC_ALLGATHER] = "allgather; ag",
        [KV_SC_REDUCESCATTER] = "reducescatter; rs",
        [KV_SC_ALLTOALL] = "alltoall; a2a",
        [KV_SC_BROADCAST] = "broadcast; bc",
        [KV_SC_FP8_ALLGATHER] = "fp8_allgather; ag dir=push",
    };
    kv_err err;
    if ((int)c < 0 || c >= KV_SC_COUNT)
        c = KV_SC_ALLREDUCE;
    if (kv_sched_parse(text[c], out, &err) != 0) { /* a bug in the table above */
        fprintf(stderr, "kevo: the default schedule of %s: %s\n", coll_names[c], err.msg);
        abort();
    }
}

#define SOURCE_TAG "// kevo:schedule "

int kv_sched_from_source(const char *src, size_t len, kv_schedule *out, kv_err *err)
{
    const size_t tl = sizeof SOURCE_TAG - 1;
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(src + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - src) : len;
        if (end - i >= tl && memcmp(src + i, SOURCE_TAG, tl) == 0) {
            if (kv_sched_parse_len(src + i + tl, end - i - tl, out, err) != 0)
                return kv_err_prefix(err, "the kevo:schedule line");
            return 1;
        }
        i = end + 1;
    }
    memset(out, 0, sizeof *out);
    return 0;
}
