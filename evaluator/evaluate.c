/* evaluate.c — the evaluator's options and reports, and kv_evaluate and
 * kv_baseline: one task on a queue of one group, waited for (evaluator.h). */
#include "evaluator/evaluator.h"
#include "evaluator/pipeline.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json_out.h"
#include "common/sha256.h"

struct kv_evaluator {
    kv_eval_opts opts;
    kv_evalq q;            /* made on first use, and again after a failure */
    double last_restart_s; /* of a queue that failed since */
    int n_sources, cap_sources;
    char (*sources)[KV_SHA256_HEX_LEN]; /* program i + 1: the source's SHA-256 */
};

const char *const kv_timing_names[] = {"graph", "call", NULL};

int kv_timing_parse(const char *s, kv_timing_mode *out)
{
    for (int i = 0; kv_timing_names[i]; i++)
        if (strcmp(s, kv_timing_names[i]) == 0) {
            *out = (kv_timing_mode)i;
            return 0;
        }
    return -1;
}

void kv_eval_defaults(kv_eval_opts *o, const char *source_root)
{
    memset(o, 0, sizeof *o);
    kv_compile_defaults(&o->compile, source_root);
    o->world = 2;
    o->trials = 3;
    o->warmup = 500;
    o->iters = 100;
    o->warmup_ms = 50;
    o->timing = KV_TIMING_GRAPH;
    o->job_timeout_s = 120;
    o->start_timeout_s = 120;
    o->recycle_every = 200;
    o->sass_dedup = 1;
    o->seed = 0x6b65766f; /* "kevo"; callers draw their own per run */
    o->output_cap_kib = 1024;
    o->log_max_mib = 64;
    o->scratch_mib = 256;
    o->worker_uid = KV_SANDBOX_DEFAULT_UID;
}

void kv_eval_group_opts(const kv_eval_opts *o, int index, const int *devices, kv_group_opts *go)
{
    memset(go, 0, sizeof *go);
    go->world = o->world;
    memcpy(go->devices, devices, sizeof(int) * (size_t)o->world);
    snprintf(go->worker_path, sizeof go->worker_path, "%s", o->worker_path);
    snprintf(go->log_dir, sizeof go->log_dir, "%s", o->log_dir);
    go->group_index = index;
    go->start_timeout_s = o->start_timeout_s;
    go->recycle_every = o->recycle_every;
    go->output_cap_bytes = (size_t)o->output_cap_kib << 10;
    go->log_max_bytes = (size_t)o->log_max_mib << 20;
    go->sandbox.allow_unconfined = o->allow_unconfined;
    go->sandbox.scratch_bytes = (size_t)o->scratch_mib << 20;
    go->sandbox.worker_uid = o->worker_uid;
    go->sandbox.dump = o->dump_dir[0] != '\0';
    snprintf(go->sandbox.private_dir, sizeof go->sandbox.private_dir, "%s", o->private_dir);
}

void kv_eval_report_free(kv_eval_report *r)
{
    kv_compile_result_free(&r->compile);
    if (r->classified)
        kv_class_free(&r->cls);
    memset(r, 0, sizeof *r);
}

int kv_evaluator_new(const kv_eval_opts *o, kv_evaluator **out, kv_err *err)
{
    kv_evaluator *ev = calloc(1, sizeof *ev);
    if (!ev)
        return kv_err_set(err, "out of memory");
    ev->opts = *o;
    *out = ev;
    return 0;
}

static void drop_queue(kv_evaluator *ev)
{
    if (!ev->q.self)
        return;
    ev->last_restart_s = kv_evalq_gpu_last_restart_s(&ev->q);
    ev->q.ops->destroy(ev->q.self);
    memset(&ev->q, 0, sizeof ev->q);
}

void kv_evaluator_free(kv_evaluator *ev)
{
    if (!ev)
        return;
    drop_queue(ev);
    free(ev->sources);
    free(ev);
}

double kv_evaluator_last_restart_s(const kv_evaluator *ev)
{
    return ev->q.self ? kv_evalq_gpu_last_restart_s(&ev->q) : ev->last_restart_s;
}

/* One group: the GPUs asked for (which must be NVLink peers), or the first
 * group of peers the node has, formed when the first task is ready to run. */
static int ensure_queue(kv_evaluator *ev, kv_err *err)
{
    if (ev->q.self)
        return 0;
    kv_evalq_gpu_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.full = qo.screen = ev->opts;
    qo.max_groups = 1;
    qo.on_demand = 1;
    if (ev->opts.n_devices) {
        qo.n_groups = 1;
        memcpy(qo.groups[0], ev->opts.devices, sizeof(int) * (size_t)ev->opts.world);
    }
    return kv_evalq_gpu_new(&qo, &ev->q, err);
}

/* The program a source is: the same text, the same number. */
static int program_of(kv_evaluator *ev, const char *src, size_t len, uint64_t *id, kv_err *err)
{
    uint8_t d[KV_SHA256_LEN];
    char hex[KV_SHA256_HEX_LEN];
    if (kv_sha256(src, len, d) != 0)
        return kv_err_set(err, "hashing a source: SHA-256 (libcrypto) failed");
    kv_sha256_hex(d, hex);
    for (int i = 0; i < ev->n_sources; i++)
        if (strcmp(ev->sources[i], hex) == 0) {
            *id = (uint64_t)i + 1;
            return 0;
        }
    if (ev->n_sources == ev->cap_sources) {
        int cap = ev->cap_sources ? 2 * ev->cap_sources : 16;
        void *n = realloc(ev->sources, sizeof *ev->sources * (size_t)cap);
        if (!n)
            return kv_err_set(err, "out of memory");
        ev->sources = n;
        ev->cap_sources = cap;
    }
    memcpy(ev->sources[ev->n_sources++], hex, sizeof hex);
    *id = (uint64_t)ev->n_sources;
    return 0;
}

/* Submits one task and drives the queue until its report is taken. On
 * kevo's own failure the queue goes (its groups killed): the next call
 * starts afresh. */
static int submit_and_wait(kv_evaluator *ev, const kv_eval_task *t, kv_eval_report *out,
                           kv_err *err)
{
    memset(out, 0, sizeof *out);
    if (ensure_queue(ev, err) != 0)
        return -1;
    kv_evalq q = ev->q;
    if (q.ops->submit(q.self, t, err) != 0) {
        drop_queue(ev);
        return -1;
    }
    kv_eval_done d;
    for (;;) {
        if (q.ops->step(q.self, err) != 0)
            break;
        if (q.ops->take(q.self, &d) == 0) {
            *out = d.report; /* the only task: its report */
            return 0;
        }
        struct pollfd fds[64 + KV_GROUP_MAX_POLLFDS];
        int timeout = 1000;
        int n = q.ops->pollfds(q.self, fds, (int)(sizeof fds / sizeof fds[0]), &timeout);
        if (n < 0) {
            kv_err_set(err, "evaluator: more descriptors to poll than %zu",
                       sizeof fds / sizeof fds[0]);
            break;
        }
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            kv_err_errno(err, errno, "evaluator: poll");
            break;
        }
    }
    drop_queue(ev);
    return -1;
}

int kv_baseline(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err)
{
    kv_eval_task t = {.problem = p, .stage = KV_STAGE_FULL, .baseline = 1};
    return submit_and_wait(ev, &t, out, err);
}

int kv_selfcheck(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err)
{
    kv_eval_task t = {.problem = p, .stage = KV_STAGE_FULL, .baseline = 1, .selfcheck = 1};
    return submit_and_wait(ev, &t, out, err);
}

int kv_evaluate(kv_evaluator *ev, const kv_problem *p, const char *src, size_t len,
                kv_eval_report *out, kv_err *err)
{
    kv_eval_task t = {.problem = p, .src = src, .len = len, .stage = KV_STAGE_FULL};
    memset(out, 0, sizeof *out);
    if (program_of(ev, src, len, &t.id, err) != 0)
        return -1;
    return submit_and_wait(ev, &t, out, err);
}

const char *kv_eval_cell_name(const kv_eval_report *r, char *buf)
{
    if (r->classified)
        kv_cell_name(r->cell, buf);
    else
        buf[0] = 0;
    return buf;
}

static cJSON *timing_json(const kv_timing *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median_us", t->median);
    cJSON_AddNumberToObject(o, "p10_us", t->p10);
    cJSON_AddNumberToObject(o, "p90_us", t->p90);
    cJSON_AddNumberToObject(o, "mean_us", t->mean);
    cJSON_AddNumberToObject(o, "cv", t->cv);
    cJSON_AddNumberToObject(o, "n", t->n);
    return o;
}

char *kv_eval_report_json(const kv_eval_report *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "verdict", kv_verdict_name(r->verdict));
    cJSON_AddStringToObject(o, "message", r->message);
    char cell[KV_CELL_NAME_MAX];
    if (r->classified)
        cJSON_AddStringToObject(o, "cell", kv_eval_cell_name(r, cell));
    if (!r->baseline)
        cJSON_AddNumberToObject(o, "speedup", r->speedup);
    cJSON_AddNumberToObject(o, "roofline_fraction", r->roofline);
    cJSON *sizes = cJSON_AddArrayToObject(o, "sizes");
    for (int i = 0; i < r->n_sizes; i++) {
        const kv_eval_size *s = &r->sizes[i];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddStringToObject(so, "name", s->name);
        cJSON_AddBoolToObject(so, "validation", s->validation);
        cJSON_AddBoolToObject(so, "checked", s->checked);
        cJSON_AddBoolToObject(so, "ok", s->ok);
        cJSON_AddStringToObject(so, "reference_memory", s->ref_plain ? "plain" : "window");
        if (s->timed) {
            cJSON_AddStringToObject(so, "timing", s->graph_calls > 0 ? "graph" : "call");
            cJSON_AddNumberToObject(so, "graph_calls", s->graph_calls);
            if (s->timing_note[0])
                cJSON_AddStringToObject(so, "timing_note", s->timing_note);
            cJSON_AddItemToObject(so, "reference", timing_json(&s->ref));
            if (!r->baseline) {
                cJSON_AddItemToObject(so, "candidate", timing_json(&s->cand));
                cJSON_AddNumberToObject(so, "speedup", s->speedup);
            }
        }
        cJSON_AddNumberToObject(so, "roofline_us", s->roofline_us);
        cJSON_AddNumberToObject(so, "roofline_fraction", s->roofline_fraction);
        cJSON_AddNumberToObject(so, "floor_us", s->floor_us);
        cJSON_AddItemToArray(sizes, so);
    }
    if (!r->baseline) {
        cJSON *c = cJSON_AddObjectToObject(o, "compile");
        cJSON_AddBoolToObject(c, "cached", r->compile.cached);
        cJSON_AddNumberToObject(c, "seconds", r->compile.seconds);
        cJSON_AddStringToObject(c, "key", r->compile.key);
        cJSON_AddStringToObject(c, "sass_hash", r->compile.sass_hash);
        if (r->compile.report)
            cJSON_AddStringToObject(c, "report", r->compile.report);
        if (r->classified && r->cls.evidence_json) {
            cJSON *e = cJSON_Parse(r->cls.evidence_json);
            if (e)
                cJSON_AddItemToObject(o, "evidence", e);
        }
        if (r->job.graph_json[0]) {
            cJSON *g = cJSON_Parse(r->job.graph_json);
            if (g)
                cJSON_AddItemToObject(o, "graph", g);
        }
    }
    cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
    cJSON_AddNumberToObject(o, "gpu_s", r->job.gpu_s);
    char *s = kv_json_print(o, 0, NULL);
    cJSON_Delete(o);
    return s;
}
