/* cmd_problems_check.c — kevo problems check P: the problem's NCCL reference
 * checked against itself (kv_selfcheck: as evaluations run it, and again
 * on plain memory at shifted offsets, at every size) and, where the problem
 * ships check.c, against its host check on one dumped call at every size
 * that fits in host memory; and timed (kv_baseline, the screening protocol)
 * against each size's floor; the verdict kept in the cache
 * (evaluator/evaluator.h), where a run's start finds it too. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "common/json_out.h"
#include "common/text.h"
#include "eval_setup.h"
#include "evaluator/evaluator.h"

static const char usage[] =
    "usage: kevo problems check P [--world W] [--devices 0,1] [--no-cache] [--json]\n"
    "                             [--timeout S]\n"
    "\n"
    "Checks problem P's NCCL reference on W GPUs before a search trusts it:\n"
    "  - against itself: at every size (the validation size included), on every\n"
    "    rank, the reference as evaluations run it (in the symmetric window, or on\n"
    "    plain memory where NCCL needs it) and again on plain device memory at\n"
    "    shifted offsets, outputs compared within the problem's tolerances;\n"
    "  - against its host check, when the problem ships check.c: one call's\n"
    "    inputs and outputs dumped at every size whose tensors, over all ranks,\n"
    "    total at most 256 MiB (they are held in host memory), and compared with\n"
    "    the float64 host computation;\n"
    "  - against its floor: the reference timed (20 warm-up, 50 timed calls) at\n"
    "    every timed size must not run faster than the problem's cost model at\n"
    "    the machine's ceilings allows (less 10%): a faster one means the cost\n"
    "    model is wrong, and every candidate would be implausible.\n"
    "Prints one line per size. The verdict is kept in the compile cache\n"
    "($KEVO_CACHE_DIR, else ~/.cache/kevo: problemcheck/), keyed on W and the\n"
    "problem's problem.json, reference.cu, inputs.cu and check.c; a kept pass is\n"
    "said with its date and not checked again, and kevo run skips a problem whose\n"
    "reference failed.\n"
    "\n"
    "options:\n"
    "  --world W          GPUs in the group (default 2)\n"
    "  --devices 0,1      which GPUs (default 0 .. W-1)\n"
    "  --no-cache         check again whatever the cache holds\n"
    "  --json             the verdict as JSON (as kept, with \"cached\")\n"
    "  --timeout S        a job's deadline in seconds\n"
    "\n"
    "exit status: 0 the reference passed, 1 it disagrees with itself or with its\n"
    "host check or beats its floor (the first failure on stderr), or the check\n"
    "could not run (no GPUs, a compile error), 2 usage error. docs/problems.md,\n"
    "\"Checking a problem\".\n";

static const struct option long_opts[] = {
    {"world", required_argument, NULL, 'w'},
    {"devices", required_argument, NULL, 'd'},
    {"timeout", required_argument, NULL, 'T'},
    {"json", no_argument, NULL, 'j'},
    {"no-cache", no_argument, NULL, 'C'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One check of one problem. */
typedef struct {
    const kv_problem *p;
    kv_eval_opts o;
    char key[KV_SHA256_HEX_LEN];
    kv_pcheck v;                    /* the verdict being made */
    int cached;                     /* v came whole from the cache */
    int self_cached;                /* its self-check came from the cache */
    int64_t self_at;                /* then: when it ran */
    char host_msg[KV_JOB_MSG_MAX];  /* the host check's disagreement, "" if none */
    char floor_msg[KV_JOB_MSG_MAX]; /* the reference below its floor, "" if not */
} check;

static void warn(const char *msg, void *ctx)
{
    (void)ctx;
    char shown[4096];
    fprintf(stderr, "kevo: warning: %s\n", KV_TERM(shown, msg));
}

/* The self-check on the GPUs into c->v: 0, or -1 (no GPUs, the reference
 * does not compile, it crashed or hung: no verdict to keep). */
static int run_selfcheck(check *c, kv_err *err)
{
    kv_evaluator *ev = NULL;
    kv_eval_report rep;
    if (kv_evaluator_new(&c->o, &ev, err) != 0)
        return -1;
    int rc = kv_selfcheck(ev, c->p, &rep, err);
    kv_evaluator_free(ev);
    if (rc != 0)
        return -1;
    rc = kv_pcheck_from_report(&c->v, c->p, c->o.world, &rep, err);
    kv_eval_report_free(&rep);
    return rc;
}

static kv_pcheck_size *size_of(kv_pcheck *v, const char *name)
{
    for (int s = 0; s < v->n_sizes; s++)
        if (strcmp(v->sizes[s].name, name) == 0)
            return &v->sizes[s];
    return NULL;
}

/* The sizes the host check can hold (KV_PCHECK_HOST_MAX_BYTES over every
 * rank's inputs and outputs) into o's size list; the others marked. */
static int host_sizes(check *c, kv_eval_opts *o, kv_err *err)
{
    const kv_problem *p = c->p;
    int W = c->o.world;
    o->n_sizes = 0;
    for (int s = 0; s < p->n_sizes; s++) {
        kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
        if (kv_problem_shapes(p, s, W, in, out, err) != 0)
            return -1;
        uint64_t bytes = 0;
        for (int i = 0; i < p->n_inputs; i++)
            bytes += (uint64_t)in[i].bytes * (uint64_t)W;
        for (int j = 0; j < p->n_outputs; j++)
            bytes += (uint64_t)out[j].bytes * (uint64_t)W;
        kv_pcheck_size *cs = size_of(&c->v, p->sizes[s].name);
        if (!cs)
            return kv_err_set(err, "problem %s: size %s has no self-check result", p->name,
                              p->sizes[s].name);
        if (bytes > KV_PCHECK_HOST_MAX_BYTES) {
            cs->host_too_large = 1;
            continue;
        }
        snprintf(o->sizes[o->n_sizes++], sizeof o->sizes[0], "%s", p->sizes[s].name);
    }
    return 0;
}

/* The reference run once at o's sizes with its tensors dumped into dump;
 * nothing timed. */
static int dump_reference(const check *c, kv_eval_opts *o, const char *dump, kv_err *err)
{
    o->iters = 0;
    o->warmup = 0;
    o->warmup_ms = 0;
    snprintf(o->dump_dir, sizeof o->dump_dir, "%s", dump);
    kv_evaluator *ev = NULL;
    kv_eval_report rep;
    if (kv_evaluator_new(o, &ev, err) != 0)
        return -1;
    int rc = kv_baseline(ev, c->p, &rep, err);
    kv_evaluator_free(ev);
    if (rc != 0)
        return -1;
    if (rep.verdict != KV_VERDICT_OK)
        rc = kv_err_set(err, "the reference of %s failed while its tensors were dumped: %s: %s",
                        c->p->name, kv_verdict_name(rep.verdict), rep.message);
    kv_eval_report_free(&rep);
    return rc;
}

/* One size of the dump against the host check. */
static int host_size(check *c, const kv_hostcheck *hc, const char *dump, int s, kv_err *err)
{
    const kv_problem *p = c->p;
    kv_pcheck_size *cs = size_of(&c->v, p->sizes[s].name);
    kv_host_call d;
    if (kv_host_call_init(&d, p, s, c->o.world, err) != 0)
        return -1;
    kv_hostcheck_outcome out = {0};
    int rc = kv_host_call_load_dump(&d, dump, "reference", err);
    if (rc == 0)
        rc = kv_hostcheck_run(hc, &d, &out, err);
    kv_host_call_free(&d);
    if (rc < 0)
        return -1;
    if (rc == KV_HOSTCHECK_SKIPPED) {
        cs->host = KV_PCHECK_SKIPPED;
        return 0;
    }
    cs->host = rc == 0 ? KV_PCHECK_PASS : KV_PCHECK_FAIL;
    cs->host_checked = out.checked;
    cs->host_failed = out.failed;
    cs->host_worst = out.worst_ratio;
    if (rc == KV_HOSTCHECK_MISMATCH && !c->host_msg[0])
        snprintf(c->host_msg, sizeof c->host_msg,
                 "the reference disagrees with its host check at size %s: %s", cs->name, out.first);
    return 0;
}

/* The host check at every size that fits: 0 (c->v says how it went), or -1. */
static int run_hostcheck(check *c, kv_err *err)
{
    kv_eval_opts o = c->o;
    if (host_sizes(c, &o, err) != 0)
        return -1;
    c->v.host = KV_PCHECK_PASS;
    if (o.n_sizes == 0)
        return 0; /* every size is too large: each says so */
    kv_hostcheck *hc = NULL;
    if (kv_hostcheck_open(&c->o.compile, c->p, &hc, err) != 0)
        return -1;
    const char *tmp = getenv("TMPDIR");
    char dump[PATH_MAX];
    snprintf(dump, sizeof dump, "%s/kevo-check-%.64s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             c->p->name);
    if (!mkdtemp(dump)) {
        kv_hostcheck_close(hc);
        return kv_err_errno(err, errno, "mkdtemp %s", dump);
    }
    int rc = dump_reference(c, &o, dump, err);
    for (int k = 0; rc == 0 && k < o.n_sizes; k++)
        rc = host_size(c, hc, dump, kv_problem_find_size(c->p, o.sizes[k]), err);
    kv_hostcheck_close(hc);
    if (kv_rm_rf(dump) != 0) {
        char shown[PATH_MAX + 64];
        fprintf(stderr, "kevo: warning: cannot remove %s: %s\n", KV_TERM(shown, dump),
                strerror(errno));
    }
    if (rc != 0)
        return -1;
    if (c->host_msg[0]) {
        c->v.host = KV_PCHECK_FAIL;
        if (c->v.ok)
            snprintf(c->v.message, sizeof c->v.message, "%s", c->host_msg);
        c->v.ok = 0;
    }
    return 0;
}

/* The reference timed against each size's floor (kv_eval_score finds a time
 * below it implausible): 0 (c->v says how it went), or -1 when it did not
 * run to the end. */
static int run_floorcheck(check *c, kv_err *err)
{
    kv_eval_opts o = c->o;
    o.warmup = 20; /* the screening protocol: a median, not a fine one */
    o.iters = 50;
    kv_evaluator *ev = NULL;
    kv_eval_report rep;
    if (kv_evaluator_new(&o, &ev, err) != 0)
        return -1;
    int rc = kv_baseline(ev, c->p, &rep, err);
    kv_evaluator_free(ev);
    if (rc != 0)
        return -1;
    if (rep.verdict == KV_VERDICT_OK) {
        c->v.floor = KV_PCHECK_PASS;
    } else if (rep.verdict == KV_VERDICT_IMPLAUSIBLE) {
        c->v.floor = KV_PCHECK_FAIL;
        snprintf(c->floor_msg, sizeof c->floor_msg, "%s", rep.message);
        if (c->v.ok)
            snprintf(c->v.message, sizeof c->v.message, "%s", rep.message);
        c->v.ok = 0;
    } else {
        rc = kv_err_set(err, "the reference of %s failed while timed against its floor: %s: %s",
                        c->p->name, kv_verdict_name(rep.verdict), rep.message);
    }
    kv_eval_report_free(&rep);
    return rc;
}

/* ---- printing ------------------------------------------------------------------------ */

static void host_text(const check *c, const kv_pcheck_size *s, char *out, size_t cap)
{
    switch (s->host) {
    case KV_PCHECK_PASS:
        snprintf(out, cap, "ok: %lld elements, worst error/tolerance %.3f",
                 (long long)s->host_checked, s->host_worst);
        break;
    case KV_PCHECK_FAIL:
        snprintf(out, cap, "FAIL: %lld of %lld elements", (long long)s->host_failed,
                 (long long)s->host_checked);
        break;
    case KV_PCHECK_SKIPPED: snprintf(out, cap, "skipped by check.c"); break;
    default:
        if (c->p->check[0] && s->host_too_large)
            snprintf(out, cap, "not run (its tensors pass %llu MiB)",
                     (unsigned long long)(KV_PCHECK_HOST_MAX_BYTES >> 20));
        else
            snprintf(out, cap, "not run%s",
                     !c->p->check[0]                  ? " (no check.c)"
                     : c->v.host == KV_PCHECK_NOT_RUN ? " (checked by a run's start: itself only)"
                                                      : "");
    }
}

static void print_table(const check *c)
{
    const kv_pcheck *v = &c->v;
    char when[32], host[160];
    kv_format_utc(v->checked_at * 1000000000, when, sizeof when);
    printf("problem %s at W=%d: its NCCL reference against itself%s\n", c->p->name, v->world,
           c->p->check[0] ? " and against its host check (check.c)" : "");
    if (c->cached)
        printf("cached: checked on %s (--no-cache checks again)\n", when);
    if (c->self_cached) {
        kv_format_utc(c->self_at * 1000000000, when, sizeof when);
        printf("self-check cached: passed on %s\n", when);
    }
    printf("  %-14s %-11s %-10s %s\n", "size", "self-check", "reference", "host check");
    for (int s = 0; s < v->n_sizes; s++) {
        const kv_pcheck_size *cs = &v->sizes[s];
        char name[KV_PROBLEM_NAME_MAX + 2];
        snprintf(name, sizeof name, "%s%s", cs->name, cs->validation ? "*" : "");
        host_text(c, cs, host, sizeof host);
        printf("  %-14s %-11s %-10s %s\n", name,
               cs->self == KV_PCHECK_PASS   ? "ok"
               : cs->self == KV_PCHECK_FAIL ? "FAIL"
                                            : "not run",
               cs->self == KV_PCHECK_NOT_RUN ? "-"
               : cs->ref_plain               ? "plain"
                                             : "window",
               host);
    }
    printf("floor: %s\n", v->floor == KV_PCHECK_PASS   ? "ok: the reference is slower than the "
                                                         "floor at every timed size"
                          : v->floor == KV_PCHECK_FAIL ? "FAIL: the reference beats it"
                                                       : "not run");
    printf("%s\n", v->ok ? "passed" : "FAILED");
}

static int print_json(const check *c)
{
    cJSON *o = kv_pcheck_json(&c->v, c->key);
    char *text = NULL;
    if (o && cJSON_AddBoolToObject(o, "cached", c->cached))
        text = kv_json_print(o, 1, NULL);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "kevo: out of memory\n");
        return KV_EXIT_FAIL;
    }
    printf("%s\n", text);
    free(text);
    return KV_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------------- */

/* The check of c->p with the cache (unless no_cache): c->v made or found. */
static int check_problem(check *c, int no_cache, kv_err *err)
{
    const char *cache = c->o.compile.cache_dir;
    if (kv_pcheck_key(c->p, c->o.world, c->key, err) != 0)
        return -1;
    kv_pcheck kept;
    int found = no_cache ? KV_NOTFOUND : kv_pcheck_get(cache, c->key, &kept, warn, NULL, err);
    if (found < 0)
        return -1;
    int host = c->p->check[0] != 0;
    if (found == 0 && kept.ok) {
        c->v = kept;
        host = host && kept.host == KV_PCHECK_NOT_RUN;
        if (!host && kept.floor != KV_PCHECK_NOT_RUN) {
            c->cached = 1;
            return 0;
        }
        /* kept by a run's start (against itself only), or by a check without the floor */
        c->self_cached = 1;
        c->self_at = kept.checked_at;
        for (int s = 0; host && s < c->v.n_sizes; s++) {
            kv_pcheck_size *cs = &c->v.sizes[s];
            cs->host = KV_PCHECK_NOT_RUN;
            cs->host_too_large = 0;
            cs->host_checked = cs->host_failed = 0;
            cs->host_worst = 0;
        }
    } else if (run_selfcheck(c, err) != 0) {
        return -1;
    }
    if (host && run_hostcheck(c, err) != 0)
        return -1;
    if (c->v.ok && run_floorcheck(c, err) != 0)
        return -1;
    kv_err put = {{0}};
    c->v.checked_at = kv_wall_ns() / 1000000000;
    if (kv_pcheck_put(cache, c->key, &c->v, &put) != 0) {
        char shown[4096];
        fprintf(stderr, "kevo: warning: the verdict is not kept: %s\n", KV_TERM(shown, put.msg));
    }
    return 0;
}

int kv_cli_problems_check(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    kv_cli_eval_args a;
    kv_cli_eval_args_init(&a);
    const char *unused = NULL;
    int first = kv_cli_eval_parse(argc, argv, "problems check", usage, long_opts, 0, &a, &unused);
    if (first < 0)
        return KV_EXIT_USAGE;
    if (first == argc)
        return kv_cli_usage("problems check", usage,
                            "expected one problem (kevo problems lists "
                            "them)");
    if (first + 1 != argc)
        return kv_cli_usage("problems check", usage, "unexpected argument '%s'", argv[first + 1]);

    kv_err err = {{0}};
    kv_problem p;
    if (kv_cli_load_problem(argv[first], &p, &err) != 0)
        return kv_cli_fail(&err);
    check *c = calloc(1, sizeof *c);
    int code = KV_EXIT_FAIL;
    if (!c) {
        kv_err_set(&err, "out of memory");
        kv_cli_fail(&err);
        goto out;
    }
    c->p = &p;
    if (kv_cli_eval_opts(&a, &p, &c->o, &err) != 0 || check_problem(c, a.no_cache, &err) != 0) {
        kv_cli_fail(&err);
        goto out;
    }
    code = a.json ? print_json(c) : (print_table(c), KV_EXIT_OK);
    kv_cli_flush_stdout(); /* before the messages */
    char shown[KV_JOB_MSG_MAX * 4];
    if (c->v.self == KV_PCHECK_FAIL)
        fprintf(stderr, "kevo: %s\n", KV_TERM(shown, c->v.message));
    if (c->host_msg[0])
        fprintf(stderr, "kevo: %s\n", KV_TERM(shown, c->host_msg));
    if (c->floor_msg[0])
        fprintf(stderr, "kevo: %s\n", KV_TERM(shown, c->floor_msg));
    if (code == KV_EXIT_OK && !c->v.ok)
        code = KV_EXIT_FAIL;
out:
    free(c);
    kv_problem_free(&p);
    return code;
}
