/* pipeline.c — the stages of one evaluation (pipeline.h): the reference
 * and inputs hook, the job, the guards after compilation, the scores and the
 * cell after the job. */
#include "evaluator/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/checks/classify.h"
#include "evaluator/checks/runtime_lookups.h"
#include "common/fsutil.h"
#include "common/machine.h"

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
    job->graph_timing = o->timing == KV_TIMING_GRAPH;
    snprintf(job->dump_dir, sizeof job->dump_dir, "%s", o->dump_dir);
}

void kv_eval_make_selfcheck_job(const kv_eval_opts *o, uint64_t id, const kv_problem *p,
                                const char *ref_so, kv_job *job)
{
    kv_eval_make_job(o, id, p, ref_so, ref_so, job);
    job->selfcheck = 1;
    job->capture = 0;
    job->iters = 0;
    job->warmup = 0;
    job->time_sizes_mask = 0;
    if (job->trials < KV_SELFCHECK_TRIALS)
        job->trials = KV_SELFCHECK_TRIALS;
}

/* The verdict implausible when a timed size of an ok report ran below its
 * floor: the reference first (a wrong cost model is the problem's, and no
 * speedup over it means anything), then the candidate. 1 when it was. */
static int below_floor(kv_eval_report *r)
{
    static const char why[] = "the cost model at the machine's ceilings less a %.0f%% margin "
                              "for noise";
    char floor_why[96];
    snprintf(floor_why, sizeof floor_why, why, 100 * KV_FLOOR_MARGIN);
    for (int side = 0; side < (r->baseline ? 1 : 2); side++) {
        for (int i = 0; i < r->n_sizes; i++) {
            const kv_eval_size *s = &r->sizes[i];
            double t = side == 0 ? s->ref.median : s->cand.median;
            if (!s->timed || !(t > 0) || !(t < s->floor_us))
                continue;
            r->verdict = KV_VERDICT_IMPLAUSIBLE;
            if (side == 0)
                snprintf(r->message, sizeof r->message,
                         "the reference runs %.2f us at size %s, below the floor of %.2f us (%s): "
                         "the problem's cost model (problem.json, \"cost\") is wrong%s",
                         t, s->name, s->floor_us, floor_why,
                         r->baseline ? ""
                                     : "; no speedup is claimed and no elite made from "
                                       "this evaluation");
            else
                snprintf(r->message, sizeof r->message,
                         "size %s: %.2f us is below the floor of %.2f us (%s): a kernel cannot "
                         "move these bytes this fast; timing was gamed or the problem's cost "
                         "model is wrong",
                         s->name, t, s->floor_us, floor_why);
            return 1;
        }
    }
    return 0;
}

/* Fills the per-size table, speedups and roofline fractions from the job;
 * an ok job with a time below a size's floor is implausible. */
int kv_eval_score(const kv_problem *p, int world, kv_eval_report *r, kv_err *err)
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
        s->graph_calls = o->graph_calls;
        memcpy(s->timing_note, o->timing_note, sizeof s->timing_note);
        s->ref_plain = o->ref_plain;
        kv_roofline roof;
        if (idx >= 0 && kv_problem_roofline(p, idx, world, &roof, err) != 0)
            return -1;
        s->roofline_us = idx >= 0 ? roof.seconds * 1e6 : 0;
        s->floor_us = idx >= 0 ? roof.floor_s * 1e6 : 0;
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
    if (r->verdict == KV_VERDICT_OK && below_floor(r))
        return 0;
    if (timed && r->verdict == KV_VERDICT_OK) {
        r->speedup = r->baseline ? 0 : exp(log_sum / timed);
        r->roofline = roof_sum / timed;
    }
    return 0;
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
    out->cell = kv_cell_index(out->cls.transport, out->cls.fusion);
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
    if (kv_eval_score(p, world, out, err) != 0)
        return -1;
    kv_evidence evi;
    evidence_of(st, src, &out->job, &evi);
    return classify_into(&evi, out, err);
}
