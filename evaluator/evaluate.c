/* evaluate.c — compile, guard, run, classify, score (see evaluate.h). */
#include "kevo/json_out.h"
#include "evaluator/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "evaluator/runtime_lookups.h"
#include "evaluator/topology.h"
#include "kevo/clock.h"
#include "kevo/fsutil.h"

struct kv_evaluator {
    kv_eval_opts opts;
    kv_group *group;
    uint64_t next_job;
};

void kv_eval_defaults(kv_eval_opts *o, const char *source_root)
{
    memset(o, 0, sizeof *o);
    kv_compile_defaults(&o->compile, source_root);
    o->world = 2;
    o->trials = 3;
    o->warmup = 500;
    o->iters = 100;
    o->warmup_ms = 50;
    o->job_timeout_s = 120;
    o->start_timeout_s = 120;
    o->recycle_every = 200;
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
    snprintf(go->sandbox.write_dir, sizeof go->sandbox.write_dir, "%s", o->dump_dir);
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
    ev->next_job = 1;
    *out = ev;
    return 0;
}

void kv_evaluator_free(kv_evaluator *ev)
{
    if (!ev)
        return;
    kv_group_free(ev->group);
    free(ev);
}

double kv_evaluator_last_restart_s(const kv_evaluator *ev)
{
    return ev->group ? kv_group_last_restart_s(ev->group) : 0;
}

/* The group's GPUs: the ones asked for, which must be NVLink peers, or the
 * first group of peers the node has. */
static int choose_devices(kv_evaluator *ev, int *devs, kv_err *err)
{
    kv_topology topo;
    int w = ev->opts.world;
    if (kv_topology_probe(ev->opts.worker_path, &topo, err) != 0)
        return -1;
    if (ev->opts.n_devices) {
        memcpy(devs, ev->opts.devices, sizeof(int) * (size_t)w);
        return kv_topology_check_group(&topo, devs, w, err);
    }
    int groups[1][KV_GROUP_MAX_WORLD];
    if (kv_topology_groups(&topo, w, 1, groups) != 1)
        return kv_err_set(err, "no group of %d GPUs that are all NVLink peers on this node "
                               "(%d GPU%s visible; kevo doctor shows the links)",
                          w, topo.n, topo.n == 1 ? "" : "s");
    memcpy(devs, groups[0], sizeof(int) * (size_t)w);
    return 0;
}

static int ensure_group(kv_evaluator *ev, kv_err *err)
{
    if (!ev->group) {
        kv_group_opts go;
        int devices[KV_GROUP_MAX_WORLD];
        if (choose_devices(ev, devices, err) != 0)
            return -1;
        kv_eval_group_opts(&ev->opts, 0, devices, &go);
        if (kv_group_new(&go, &ev->group, err) != 0)
            return -1;
    }
    kv_group_state st = kv_group_get_state(ev->group);
    if (st == KV_GROUP_DEAD && kv_group_start(ev->group, err) != 0)
        return -1;
    return kv_group_wait_ready(ev->group, err);
}

static int compile_path(const kv_compile_opts *o, const char *path, kv_compile_result *r,
                        kv_err *err)
{
    char *src = NULL;
    size_t len = 0;
    if (kv_read_file_max(path, KV_MAX_SOURCE_BYTES, &src, &len, err) != 0)
        return -1;
    int rc = kv_compile(o, src, len, r, err);
    free(src);
    return rc;
}

int kv_eval_inputs_hook(const kv_compile_opts *o, const kv_problem *p, char *so, size_t cap,
                        kv_err *err)
{
    so[0] = 0;
    if (!p->inputs_hook[0])
        return 0;
    kv_compile_result hook; /* compiled like a candidate, through the cache */
    if (compile_path(o, p->inputs_hook, &hook, err) != 0)
        return -1;
    int rc = 0;
    if (hook.status != KV_COMPILE_OK)
        rc = kv_err_set(err, "%s does not compile:\n%s", p->inputs_hook,
                        hook.errors ? hook.errors : "(no compiler output)");
    else
        snprintf(so, cap, "%s", hook.so_path);
    kv_compile_result_free(&hook);
    return rc;
}

int kv_eval_reference(const kv_compile_opts *o, const kv_problem *p, kv_compile_result *ref,
                      kv_err *err)
{
    if (compile_path(o, p->reference, ref, err) != 0)
        return -1;
    if (ref->status == KV_COMPILE_OK)
        return 0;
    kv_err_set(err, "the reference of %s does not compile:\n%s", p->name,
               ref->errors ? ref->errors : "(no compiler output)");
    kv_compile_result_free(ref);
    return -1;
}

void kv_eval_make_job(const kv_eval_opts *o, uint64_t id, const kv_problem *p, const char *ref_so,
                      const char *cand_so, kv_job *job)
{
    memset(job, 0, sizeof *job);
    job->id = id;
    snprintf(job->problem_dir, sizeof job->problem_dir, "%s", p->dir);
    snprintf(job->reference_so, sizeof job->reference_so, "%s", ref_so);
    snprintf(job->candidate_so, sizeof job->candidate_so, "%s", cand_so ? cand_so : "");
    for (int i = 0; i < p->n_sizes && job->n_sizes < KV_JOB_MAX_SIZES; i++) {
        int wanted = o->n_sizes == 0;
        for (int k = 0; k < o->n_sizes && !wanted; k++)
            wanted = strcmp(o->sizes[k], p->sizes[i].name) == 0;
        if (!wanted)
            continue;
        snprintf(job->sizes[job->n_sizes], sizeof job->sizes[0], "%s", p->sizes[i].name);
        if (!p->sizes[i].validation)
            job->time_sizes_mask |= 1 << job->n_sizes;
        job->n_sizes++;
    }
    job->trials = o->trials;
    job->warmup = o->warmup;
    job->warmup_ms = o->warmup_ms;
    job->iters = o->iters;
    job->seed = o->seed ^ (job->id * 0x9E3779B97F4A7C15ull);
    job->capture = cand_so != NULL;
    snprintf(job->dump_dir, sizeof job->dump_dir, "%s", o->dump_dir);
}

/* Fills the per-size table, speedups and roofline fractions from the job. */
static int score(const kv_problem *p, int world, kv_eval_report *r, kv_err *err)
{
    r->verdict = r->job.verdict;
    snprintf(r->message, sizeof r->message, "%s", r->job.message);
    double log_sum = 0, roof_sum = 0;
    int timed = 0;
    r->n_sizes = r->job.n_sizes;
    for (int i = 0; i < r->job.n_sizes; i++) {
        const kv_size_outcome *o = &r->job.sizes[i];
        kv_eval_size *s = &r->sizes[i];
        snprintf(s->name, sizeof s->name, "%s", o->name);
        int idx = kv_problem_find_size(p, o->name);
        s->validation = idx >= 0 && p->sizes[idx].validation;
        s->checked = o->checked;
        s->ok = o->ok;
        s->timed = o->timed;
        s->ref = o->ref;
        s->cand = o->cand;
        kv_roofline roof;
        if (idx >= 0 && kv_problem_roofline(p, idx, world, &roof, err) != 0)
            return -1;
        s->roofline_us = idx >= 0 ? roof.seconds * 1e6 : 0;
        double t = r->baseline ? o->ref.median : o->cand.median;
        if (!o->timed || t <= 0)
            continue;
        s->roofline_fraction = s->roofline_us / t;
        if (!r->baseline && o->ref.median > 0)
            s->speedup = o->ref.median / o->cand.median;
        log_sum += log(r->baseline ? 1.0 : s->speedup);
        roof_sum += s->roofline_fraction;
        timed++;
    }
    if (timed && r->verdict == KV_VERDICT_OK) {
        r->speedup = r->baseline ? 0 : exp(log_sum / timed);
        r->roofline = roof_sum / timed;
    }
    return 0;
}

/* One job of the reference (and the candidate, when cand_so is given) on
 * the evaluator's group; the result in r->job. */
static int run_job(kv_evaluator *ev, const kv_problem *p, const char *ref_so, const char *cand_so,
                   kv_eval_report *r, kv_err *err)
{
    if (ensure_group(ev, err) != 0)
        return -1;
    kv_job job;
    kv_eval_make_job(&ev->opts, ev->next_job++, p, ref_so, cand_so, &job);
    if (kv_eval_inputs_hook(&ev->opts.compile, p, job.inputs_so, sizeof job.inputs_so, err) != 0)
        return -1;
    return kv_group_run(ev->group, &job, ev->opts.job_timeout_s, &r->job, err);
}

int kv_baseline(kv_evaluator *ev, const kv_problem *p, kv_eval_report *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->baseline = 1;
    double t0 = (double)kv_monotonic_ns() * 1e-9;
    kv_compile_result ref;
    if (kv_eval_reference(&ev->opts.compile, p, &ref, err) != 0)
        return -1;
    int rc = run_job(ev, p, ref.so_path, NULL, out, err);
    if (rc == 0)
        rc = score(p, ev->opts.world, out, err);
    kv_compile_result_free(&ref);
    out->wall_s = (double)kv_monotonic_ns() * 1e-9 - t0;
    return rc;
}

static int load_text(const char *dir, const char *name, char **out)
{
    char path[PATH_MAX];
    size_t len;
    if (kv_path_join(path, sizeof path, dir, name, NULL) != 0)
        return -1;
    return kv_read_file_max(path, KV_MAX_ARTEFACT_BYTES, out, &len, NULL);
}

void kv_eval_static_free(kv_eval_static *st)
{
    free(st->sass);
    free(st->ptx);
    free(st->imports);
    memset(st, 0, sizeof *st);
}

static void evidence_of(const kv_eval_static *st, const char *src, const kv_job_result *job,
                        kv_evidence *evi)
{
    memset(evi, 0, sizeof *evi);
    evi->sass = st->sass;
    evi->ptx = st->ptx;
    evi->imports = st->imports;
    evi->source = src;
    if (job) {
        evi->graph_captured = job->graph_captured;
        evi->kernel_nodes = job->kernel_nodes;
        evi->memcpy_nodes = job->memcpy_nodes;
        evi->memset_nodes = job->memset_nodes;
        evi->other_nodes = job->other_nodes;
        evi->peer_copy_bytes = job->peer_copy_bytes;
    }
}

static int classify_into(const kv_evidence *evi, kv_eval_report *out, kv_err *err)
{
    if (kv_classify(evi, &out->cls, err) != 0)
        return -1;
    out->classified = 1;
    snprintf(out->cell, sizeof out->cell, "%s/%s", kv_transport_name(out->cls.transport),
             kv_fusion_name(out->cls.fusion));
    return 0;
}

int kv_eval_after_compile(const kv_eval_opts *o, const char *src, kv_eval_report *out,
                          kv_eval_static *st, kv_err *err)
{
    memset(st, 0, sizeof *st);
    if (out->compile.status == KV_COMPILE_FAILED)
        return kv_err_set(err, "compiling the candidate: %s",
                          out->compile.errors ? out->compile.errors : "the toolchain failed");
    if (out->compile.status != KV_COMPILE_OK) {
        out->verdict = KV_VERDICT_COMPILE_ERROR;
        snprintf(out->message, sizeof out->message, "%s",
                 out->compile.status == KV_COMPILE_TIMEOUT ? "compilation timed out"
                 : out->compile.errors                     ? out->compile.errors
                                                           : "compilation failed");
        return 1;
    }
    /* the static evidence, for the guards before anything runs */
    (void)load_text(out->compile.dir, "cand.sass", &st->sass);
    (void)load_text(out->compile.dir, "cand.ptx", &st->ptx);
    (void)load_text(out->compile.dir, "imports.txt", &st->imports);
    kv_evidence evi;
    evidence_of(st, src, NULL, &evi);
    kv_lookup_hit hit;
    if (kv_uses_nvls(&evi) && !(o->allow_nvls && kv_machine_allows_nvls())) {
        out->verdict = KV_VERDICT_NVLS_REFUSED;
        snprintf(out->message, sizeof out->message,
                 "uses NVLink multicast (multimem / cuMulticast), which %s",
                 o->allow_nvls ? "this machine forbids (NCCL_NVLS_ENABLE=0)"
                               : "the run does not allow (evaluation.allow_nvls)");
    } else if (!o->allow_runtime_lookups && kv_find_runtime_lookup(src, st->imports, &hit)) {
        out->verdict = KV_VERDICT_REFUSED;
        kv_lookup_hit_message(&hit, out->message, sizeof out->message);
    } else {
        return 0;
    }
    return classify_into(&evi, out, err) == 0 ? 1 : -1;
}

int kv_eval_after_job(const kv_problem *p, int world, const char *src, const kv_eval_static *st,
                      kv_eval_report *out, kv_err *err)
{
    if (score(p, world, out, err) != 0)
        return -1;
    kv_evidence evi;
    evidence_of(st, src, &out->job, &evi);
    return classify_into(&evi, out, err);
}

int kv_evaluate(kv_evaluator *ev, const kv_problem *p, const char *src, size_t len,
                kv_eval_report *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = (double)kv_monotonic_ns() * 1e-9;
    kv_compile_result ref;
    kv_eval_static st = {0};
    if (kv_eval_reference(&ev->opts.compile, p, &ref, err) != 0)
        return -1;
    int rc = kv_compile(&ev->opts.compile, src, len, &out->compile, err);
    if (rc == 0)
        rc = kv_eval_after_compile(&ev->opts, src, out, &st, err);
    if (rc == 0 && (run_job(ev, p, ref.so_path, out->compile.so_path, out, err) != 0 ||
                    kv_eval_after_job(p, ev->opts.world, src, &st, out, err) != 0))
        rc = -1;
    kv_eval_static_free(&st);
    kv_compile_result_free(&ref);
    if (rc < 0) { /* no report: what the compile left in it goes */
        kv_eval_report_free(out);
        return -1;
    }
    out->wall_s = (double)kv_monotonic_ns() * 1e-9 - t0;
    return 0;
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
    if (r->cell[0])
        cJSON_AddStringToObject(o, "cell", r->cell);
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
        if (s->timed) {
            cJSON_AddItemToObject(so, "reference", timing_json(&s->ref));
            if (!r->baseline) {
                cJSON_AddItemToObject(so, "candidate", timing_json(&s->cand));
                cJSON_AddNumberToObject(so, "speedup", s->speedup);
            }
        }
        cJSON_AddNumberToObject(so, "roofline_us", s->roofline_us);
        cJSON_AddNumberToObject(so, "roofline_fraction", s->roofline_fraction);
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
