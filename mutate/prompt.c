/* prompt.c — the LLM mutator's prompt (prompt.h). */
#include "mutate/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "mutate/schedule.h"
#include "mutate/schedule_prompt.h"

static const char system_intro[] =
    "You write CUDA C++ kernels that move data directly between the GPUs of one node over "
    "NVLink (NCCL symmetric memory, SM loads and stores, TMA bulk copies, the copy engine) "
    "and compute on it. Each candidate is a complete .cu file implementing the kevo ABI "
    "(kevo_init, kevo_run, kevo_fini) for one problem; it is compiled, checked against a "
    "reference on every rank, timed against NCCL, and filed by how it moves data. Correctness "
    "first: a wrong or hanging candidate scores nothing.\n\n";

static const char system_forms[] =
    "1. The whole new file in one fenced block:\n"
    "```cuda\n<the complete file>\n```\n"
    "2. Edits to the parent, one block each, applied in order; each SEARCH text must occur "
    "exactly once in the file (copy it character for character):\n"
    "<<<<<<< SEARCH\n<lines of the parent>\n=======\n<their replacement>\n>>>>>>> REPLACE\n";

/* The system message: two reply forms, three when the parent has a
 * schedule (the third: a ```schedule block, schedule_prompt.c). */
static char *system_message(int sched)
{
    kv_strbuf b = {0};
    kv_sb_printf(&b,
                 "%sReply in exactly one of these %s forms, and with nothing else that looks "
                 "like code:\n%s%s",
                 system_intro, sched ? "three" : "two", system_forms,
                 sched ? kv_sched_prompt_reply_form() : "");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* The parent's schedule and the language, when the parent was generated
 * from one: part of what always stays. */
static void schedule_part(const kv_schedule *s, kv_strbuf *b)
{
    char text[KV_SCHED_TEXT_MAX];
    if (kv_sched_format(s, text, sizeof text) != 0)
        return;
    kv_sb_printf(b,
                 "\n## The parent's schedule\n\nThe parent was generated from this schedule "
                 "(its `// kevo:schedule` line, in canonical form):\n\n```schedule\n%s\n```\n"
                 "\nYou may answer with a changed schedule of the same collective (reply form "
                 "3) instead of code; kevo then generates the file.\n\n### The schedule "
                 "language\n\n%s",
                 text, kv_sched_prompt_grammar());
}

/* The parts of the user message that always stay (the parent's feedback
 * follows them: feedback_part). */
static void problem_part(const kv_prompt_in *in, const kv_schedule *sched, kv_strbuf *b)
{
    const kv_problem *p = in->problem;
    kv_sb_printf(b, "## Problem: %s (W = %d GPUs)\n\n%s\n\n", p->name, in->world, p->description);
    kv_sb_printf(b,
                 "Size classes (timed; the candidate must be correct at all, and at a hidden odd "
                 "validation size):");
    for (int s = 0; s < p->n_sizes; s++) {
        if (p->sizes[s].validation)
            continue;
        kv_sb_printf(b, "\n- %s:", p->sizes[s].name);
        for (int k = 0; k < p->n_params; k++)
            kv_sb_printf(b, " %s = %lld", p->param_names[k], (long long)p->sizes[s].values[k]);
    }
    kv_sb_printf(b,
                 "\n\nCost model per rank (expressions of the parameters and W): bytes sent %s, "
                 "received %s, flops %s",
                 p->cost_send_bytes, p->cost_recv_bytes, p->cost_flops);
    if (p->cost_hbm_bytes[0])
        kv_sb_printf(b, ", local memory bytes %s", p->cost_hbm_bytes);
    kv_sb_printf(b, ".\n");
    if (p->tolerance_reason[0])
        kv_sb_printf(b, "\nTolerance: %s\n", p->tolerance_reason);
    if (in->topology && in->topology[0])
        kv_sb_printf(b, "\n## Machine\n\n%s\n", in->topology);
    kv_sb_printf(
        b,
        "\n## Aim\n\nMake a faster candidate whose behaviour cell is %s (transport/fusion: "
        "how it moves data between GPUs, and whether one kernel does all of the work).\n",
        in->target_cell && in->target_cell[0] ? in->target_cell : "any");
    if (in->parent_src) {
        kv_sb_printf(b, "\n## Parent\n\n```cuda\n%s%s```\n", in->parent_src,
                     in->parent_src[0] && in->parent_src[strlen(in->parent_src) - 1] != '\n' ? "\n"
                                                                                             : "");
        if (sched)
            schedule_part(sched, b);
    } else {
        kv_sb_printf(b, "\nWrite a new candidate from scratch.\n");
    }
}

/* Room for a section's title and its note on what was left out. */
#define HEAD_ROOM 160

/* The first `keep` characters of text, cut back to the end of a line. */
static size_t cut_at_line(const char *text, size_t keep)
{
    while (keep > 0 && text[keep - 1] != '\n')
        keep--;
    return keep;
}

static void abi_part(const char *abi, size_t keep, kv_strbuf *b)
{
    size_t n = strlen(abi);
    if (keep >= n) {
        kv_sb_printf(b, "\n## The ABI (docs/abi.md)\n\n%s\n", abi);
        return;
    }
    keep = cut_at_line(abi, keep);
    if (keep == 0)
        return;
    kv_sb_printf(b,
                 "\n## The ABI (docs/abi.md, first %zu of %zu characters: the rest is left out for "
                 "space)\n\n%.*s\n",
                 keep, n, (int)keep, abi);
}

/* The parent's evaluation, its head when it must be cut (the first compiler
 * errors and the verdict come first). */
static void feedback_part(const kv_prompt_in *in, size_t keep, kv_strbuf *b)
{
    const char *fb = in->parent_feedback;
    if (!in->parent_src || !fb || !fb[0])
        return;
    size_t n = strlen(fb);
    if (keep >= n) {
        kv_sb_printf(b, "\n### Its evaluation\n\n%s\n", fb);
        return;
    }
    keep = cut_at_line(fb, keep);
    if (keep == 0)
        return;
    kv_sb_printf(b,
                 "\n### Its evaluation (first %zu of %zu characters: the rest is left out for "
                 "space)\n\n%.*s\n",
                 keep, n, (int)keep, fb);
}

static void extras(const kv_prompt_in *in, int n_insp, int snippets, kv_strbuf *b)
{
    for (int i = 0; i < n_insp; i++)
        if (in->insp_src[i])
            kv_sb_printf(b, "\n## Inspiration %d: %s\n\n```cuda\n%s\n```\n", i + 1,
                         in->insp_note[i] ? in->insp_note[i] : "another elite", in->insp_src[i]);
    if (snippets && in->snippets && in->snippets[0])
        kv_sb_printf(b, "\n## From the pattern library (headers a candidate may include)\n\n%s\n",
                     in->snippets);
}

int kv_prompt_build(const kv_prompt_in *in, char **system, char **user, kv_err *err)
{
    *system = *user = NULL;
    if (!in->problem || in->n_inspirations < 0 || in->n_inspirations > KV_PROMPT_MAX_INSPIRATIONS)
        return kv_err_set(err, "prompt: bad request");
    kv_schedule sched;
    const int has_sched =
        in->parent_src &&
        kv_sched_from_source(in->parent_src, strlen(in->parent_src), &sched, NULL) == 1;
    char *sys = system_message(has_sched);
    if (!sys)
        return kv_err_set(err, "out of memory");
    kv_strbuf core = {0}, fb = {0};
    problem_part(in, has_sched ? &sched : NULL, &core);
    feedback_part(in, (size_t)-1, &fb);
    if (core.oom || fb.oom) {
        free(core.p);
        free(fb.p);
        free(sys);
        return kv_err_set(err, "out of memory");
    }
    const size_t budget = in->budget_chars > 0 ? (size_t)in->budget_chars : (size_t)-1;
    const size_t fixed = strlen(sys) + core.len;
    if (fixed > budget) {
        free(core.p);
        free(fb.p);
        free(sys);
        return kv_err_set(err,
                          "prompt: the problem and the parent alone take %zu characters, "
                          "%zu over the budget of %zu (mutator.llm.prompt_budget_chars)",
                          fixed, fixed - budget, budget);
    }
    /* the parts that may go: snippets first, then inspirations from the
     * last, then the ABI's tail, then the feedback's tail */
    const char *abi = in->abi ? in->abi : "";
    int snippets = 1, n_insp = in->n_inspirations;
    kv_strbuf opt = {0};
    for (;;) {
        free(opt.p);
        memset(&opt, 0, sizeof opt);
        abi_part(abi, strlen(abi), &opt);
        extras(in, n_insp, snippets, &opt);
        if (opt.oom || fixed + fb.len + opt.len <= budget || (!snippets && n_insp == 0))
            break;
        if (snippets)
            snippets = 0;
        else
            n_insp--;
    }
    if (!opt.oom && fixed + fb.len + opt.len > budget) { /* the ABI's tail, then all of it */
        free(opt.p);
        memset(&opt, 0, sizeof opt);
        if (fixed + fb.len + HEAD_ROOM < budget)
            abi_part(abi, budget - fixed - fb.len - HEAD_ROOM, &opt);
    }
    if (!opt.oom && fixed + fb.len + opt.len > budget) { /* the feedback's tail */
        free(fb.p);
        memset(&fb, 0, sizeof fb);
        if (fixed + HEAD_ROOM < budget)
            feedback_part(in, budget - fixed - HEAD_ROOM, &fb);
    }
    kv_strbuf msg = {0};
    kv_sb_printf(&msg, "%s%s%s", core.p, fb.p ? fb.p : "", opt.p ? opt.p : "");
    free(core.p);
    int oom = opt.oom || fb.oom || msg.oom;
    free(fb.p);
    free(opt.p);
    if (oom) {
        free(msg.p);
        free(sys);
        return kv_err_set(err, "out of memory");
    }
    *system = sys;
    *user = msg.p;
    return 0;
}
