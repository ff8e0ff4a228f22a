/* sched_lang_shim.c — TEMPORARY, test-only: minimal kv_sched_format, kv_sched_check,
 * kv_sched_parse, kv_sched_from_source and kv_sched_equal so that test_schedule_gen can run
 * on the sched-gen branch before mutate/schedule.c (the schedule language, another branch)
 * is merged. DELETE THIS FILE (and its line in tests/CMakeLists.txt) AT THE MERGE: the real
 * functions replace it. It parses only the canonical one-line form it formats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutate/schedule.h"

static const char *const C[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                "broadcast", "fp8_allgather"};
static const char *const K[] = {"ar", "rs", "ag", "a2a", "bc", "scatter", "quant", "local"};
static const char *const AL[] = {"direct", "ring", "tree"};
static const char *const DI[] = {"pull", "push"};
static const char *const XP[] = {"sm4", "sm8", "sm16", "tma", "ce", "nvls"};
static const char *const PR[] = {"simple", "ll", "ll128"};
static const char *const SY[] = {"grid", "cta", "chunk"};
static const char *const OR[] = {"ring", "rev", "xor"};
static const char *const FU[] = {"none", "quant"};
static const char *const LA[] = {"fused", "split"};

int kv_sched_format(const kv_schedule *s, char *buf, size_t cap)
{
    size_t at = 0;
    int n = snprintf(buf, cap, "%s threads=%d ctas=%d launch=%s ll_max=%u", C[s->coll],
                     s->threads, s->ctas, LA[s->launch], s->ll_max);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    at = (size_t)n;
    for (int i = 0; i < s->n_phases; i++) {
        const kv_sched_phase *p = &s->phase[i];
        n = snprintf(buf + at, cap - at,
                     ";\n%s algo=%s dir=%s xport=%s proto=%s chunk=%u inflight=%d sync=%s "
                     "order=%s fuse=%s",
                     K[p->kind], AL[p->algo], DI[p->dir], XP[p->xport], PR[p->proto], p->chunk,
                     p->inflight, SY[p->sync], OR[p->order], FU[p->fuse]);
        if (n < 0 || (size_t)n >= cap - at)
            return -1;
        at += (size_t)n;
    }
    return 0;
}

int kv_sched_check(const kv_schedule *s, kv_err *err)
{
    if (s->n_phases < 1 || s->n_phases > KV_SCHED_MAX_PHASES)
        return kv_err_set(err, "shim: bad phase count");
    if (s->launch == KV_LAUNCH_SPLIT && s->n_phases < 2)
        return kv_err_set(err, "launch=split needs at least two phases");
    for (int i = 0; i < s->n_phases; i++) {
        const kv_sched_phase *p = &s->phase[i];
        if (p->proto == KV_PROTO_LL && p->dir != KV_DIR_PUSH)
            return kv_err_set(err, "phase %d: ll needs dir=push", i + 1);
        if (p->xport == KV_XP_TMA && (p->chunk < 4096 || p->chunk > 65536 ||
                                      (uint64_t)p->chunk * (uint64_t)p->inflight > 196608))
            return kv_err_set(err, "phase %d: tma needs a chunk of 4K..64K", i + 1);
    }
    return 0;
}

static int find(const char *const *names, int n, const char *v, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], v, len) == 0)
            return i;
    return -1;
}

#define FIND(tab, v, l) find(tab, (int)(sizeof tab / sizeof tab[0]), v, l)

int kv_sched_parse(const char *text, kv_schedule *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    char buf[KV_SCHED_TEXT_MAX * 2];
    snprintf(buf, sizeof buf, "%s", text);
    int sec = 0;
    for (char *save = NULL, *part = strtok_r(buf, ";\n", &save); part;
         part = strtok_r(NULL, ";\n", &save)) {
        char *save2 = NULL;
        char *word = strtok_r(part, " ", &save2);
        if (!word)
            continue;
        kv_sched_phase *p = sec > 0 ? &out->phase[sec - 1] : NULL;
        if (sec == 0) {
            int c = FIND(C, word, strlen(word));
            if (c < 0)
                return kv_err_set(err, "shim: collective '%s'", word);
            out->coll = (kv_sched_coll)c;
        } else {
            if (sec > KV_SCHED_MAX_PHASES)
                return kv_err_set(err, "shim: too many phases");
            int k = FIND(K, word, strlen(word));
            if (k < 0)
                return kv_err_set(err, "shim: kind '%s'", word);
            p->kind = (kv_sched_kind)k;
        }
        for (char *kv = strtok_r(NULL, " ", &save2); kv; kv = strtok_r(NULL, " ", &save2)) {
            char *eq = strchr(kv, '=');
            if (!eq)
                return kv_err_set(err, "shim: '%s'", kv);
            *eq = 0;
            const char *v = eq + 1;
            size_t l = strlen(v);
            int x = -2;
            if (sec == 0) {
                if (!strcmp(kv, "threads")) out->threads = atoi(v), x = 0;
                else if (!strcmp(kv, "ctas")) out->ctas = atoi(v), x = 0;
                else if (!strcmp(kv, "ll_max")) out->ll_max = (uint32_t)strtoul(v, NULL, 10), x = 0;
                else if (!strcmp(kv, "launch")) x = FIND(LA, v, l), out->launch = (kv_sched_launch)x;
            } else {
                if (!strcmp(kv, "algo")) x = FIND(AL, v, l), p->algo = (kv_sched_algo)x;
                else if (!strcmp(kv, "dir")) x = FIND(DI, v, l), p->dir = (kv_sched_dir)x;
                else if (!strcmp(kv, "xport")) x = FIND(XP, v, l), p->xport = (kv_sched_xport)x;
                else if (!strcmp(kv, "proto")) x = FIND(PR, v, l), p->proto = (kv_sched_proto)x;
                else if (!strcmp(kv, "sync")) x = FIND(SY, v, l), p->sync = (kv_sched_sync)x;
                else if (!strcmp(kv, "order")) x = FIND(OR, v, l), p->order = (kv_sched_order)x;
                else if (!strcmp(kv, "fuse")) x = FIND(FU, v, l), p->fuse = (kv_sched_fuse)x;
                else if (!strcmp(kv, "chunk")) p->chunk = (uint32_t)strtoul(v, NULL, 10), x = 0;
                else if (!strcmp(kv, "inflight")) p->inflight = atoi(v), x = 0;
            }
            if (x < 0)
                return kv_err_set(err, "shim: %s=%s", kv, v);
        }
        sec++;
    }
    out->n_phases = sec - 1;
    return kv_sched_check(out, err);
}

int kv_sched_equal(const kv_schedule *a, const kv_schedule *b)
{
    char x[KV_SCHED_TEXT_MAX], y[KV_SCHED_TEXT_MAX];
    return kv_sched_format(a, x, sizeof x) == 0 && kv_sched_format(b, y, sizeof y) == 0 &&
           strcmp(x, y) == 0;
}

int kv_sched_from_source(const char *src, size_t len, kv_schedule *out, kv_err *err)
{
    const char *tag = "// kevo:schedule ";
    const char *at = NULL;
    for (const char *p = src; p && p < src + len; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncmp(p, tag, strlen(tag)) == 0) {
            at = p + strlen(tag);
            break;
        }
    }
    if (!at)
        return 0;
    const char *end = strchr(at, '\n');
    char line[KV_SCHED_TEXT_MAX * 2];
    snprintf(line, sizeof line, "%.*s", (int)(end ? end - at : (long)strlen(at)), at);
    return kv_sched_parse(line, out, err) == 0 ? 1 : -1;
}

const char *kv_sched_coll_name(kv_sched_coll c)
{
    return (unsigned)c < KV_SC_COUNT ? C[c] : "?";
}
