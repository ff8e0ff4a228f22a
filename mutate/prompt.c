/* prompt.c — the LLM mutator's prompt (prompt.h). */
#include "mutate/prompt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void add(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || b->n + (size_t)need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 8192;
        while (need >= 0 && cap < b->n + (size_t)need + 1)
            cap *= 2;
        char *p = need < 0 ? NULL : realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

static const char system_text[] =
    "You write CUDA C++ kernels that move data directly between the GPUs of one node over "
    "NVLink (NCCL symmetric memory, SM loads and stores, TMA bulk copies, the copy engine) "
    "and compute on it. Each candidate is a complete .cu file implementing the kevo ABI "
    "(kevo_init, kevo_run, kevo_fini) for one problem; it is compiled, checked against a "
    "reference on every rank, timed against NCCL, and filed by how it moves data. Correctness "
    "first: a wrong or hanging candidate scores nothing.\n\n"
    "Reply in exactly one of these two forms, and with nothing else that looks like code:\n"
    "1. The whole new file in one fenced block:\n"
    "```cuda\n<the complete file>\n```\n"
    "2. Edits to the parent, one block each, applied in order; each SEARCH text must occur "
    "exactly once in the file (copy it character for character):\n"
    "<<<<<<< SEARCH\n<lines of the parent>\n=======\n<their replacement>\n>>>>>>> REPLACE\n";

/* The parts of the user message that always stay. */
static void problem_part(const kv_prompt_in *in, sbuf *b)
{
    const kv_problem *p = in->problem;
    add(b, "## Problem: %s (W = %d GPUs)\n\n%s\n\n", p->name, in->world, p->description);
    add(b, "Size classes (timed; the candidate must be correct at all, and at a hidden odd "
           "validation size):");
    for (int s = 0; s < p->n_sizes; s++) {
        if (p->sizes[s].validation)
            continue;
        add(b, "\n- %s:", p->sizes[s].name);
        for (int k = 0; k < p->n_params; k++)
            add(b, " %s = %lld", p->param_names[k], (long long)p->sizes[s].values[k]);
    }
    add(b, "\n\nCost model per rank (expressions of the parameters and W): bytes sent %s, "
           "received %s, flops %s",
        p->cost_send_bytes, p->cost_recv_bytes, p->cost_flops);
    if (p->cost_hbm_bytes[0])
        add(b, ", local memory bytes %s", p->cost_hbm_bytes);
    add(b, ".\n");
    if (p->tolerance_reason[0])
        add(b, "\nTolerance: %s\n", p->tolerance_reason);
    if (in->topology && in->topology[0])
        add(b, "\n## Machine\n\n%s\n", in->topology);
    add(b, "\n## Aim\n\nMake a faster candidate whose behaviour cell is %s (transport/fusion: "
           "how it moves data between GPUs, and whether one kernel does all of the work).\n",
        in->target_cell && in->target_cell[0] ? in->target_cell : "any");
    if (in->parent_src) {
        add(b, "\n## Parent\n\n```cuda\n%s%s```\n", in->parent_src,
            in->parent_src[0] && in->parent_src[strlen(in->parent_src) - 1] != '\n' ? "\n" : "");
        if (in->parent_feedback && in->parent_feedback[0])
            add(b, "\n### Its evaluation\n\n%s\n", in->parent_feedback);
    } else {
        add(b, "\nWrite a new candidate from scratch.\n");
    }
}

static void abi_part(const char *abi, size_t keep, sbuf *b)
{
    size_t n = strlen(abi);
    if (keep >= n) {
        add(b, "\n## The ABI (docs/abi.md)\n\n%s\n", abi);
        return;
    }
    while (keep > 0 && abi[keep - 1] != '\n') /* cut at a line */
        keep--;
    add(b, "\n## The ABI (docs/abi.md, first %zu of %zu characters: the rest is left out for "
           "space)\n\n%.*s\n",
        keep, n, (int)keep, abi);
}

static void extras(const kv_prompt_in *in, int n_insp, int snippets, sbuf *b)
{
    for (int i = 0; i < n_insp; i++)
        add(b, "\n## Inspiration %d: %s\n\n```cuda\n%s\n```\n", i + 1,
            in->insp_note[i] ? in->insp_note[i] : "another elite", in->insp_src[i]);
    if (snippets && in->snippets && in->snippets[0])
        add(b, "\n## From the pattern library (headers a candidate may include)\n\n%s\n",
            in->snippets);
}

int kv_prompt_build(const kv_prompt_in *in, char **system, char **user, kv_err *err)
{
    *system = *user = NULL;
    if (!in->problem || in->n_inspirations < 0 || in->n_inspirations > KV_PROMPT_MAX_INSPIRATIONS)
        return kv_err_set(err, "prompt: bad request");
    sbuf core = {0};
    problem_part(in, &core);
    if (core.oom) {
        free(core.p);
        return kv_err_set(err, "out of memory");
    }
    const size_t budget = in->budget_chars > 0 ? (size_t)in->budget_chars : (size_t)-1;
    const size_t fixed = strlen(system_text) + core.n;
    if (fixed > budget) {
        free(core.p);
        return kv_err_set(err, "prompt: the problem, the parent and its feedback alone take %zu "
                               "characters, %zu over the budget of %zu (mutator.llm."
                               "prompt_budget_chars)",
                          fixed, fixed - budget, budget);
    }
    /* the parts that may go: snippets first, then inspirations from the last, then the ABI's tail */
    const char *abi = in->abi ? in->abi : "";
    int snippets = 1, n_insp = in->n_inspirations;
    sbuf opt = {0};
    for (;;) {
        free(opt.p);
        memset(&opt, 0, sizeof opt);
        abi_part(abi, strlen(abi), &opt);
        extras(in, n_insp, snippets, &opt);
        if (opt.oom || fixed + opt.n <= budget || (!snippets && n_insp == 0))
            break;
        if (snippets)
            snippets = 0;
        else
            n_insp--;
    }
    if (!opt.oom && fixed + opt.n > budget) { /* only the ABI left to cut */
        free(opt.p);
        memset(&opt, 0, sizeof opt);
        const size_t head = 160; /* the section title and the note */
        size_t room = budget - fixed;
        if (room > head)
            abi_part(abi, room - head, &opt);
    }
    sbuf msg = {0};
    add(&msg, "%s%s", core.p, opt.p ? opt.p : "");
    free(core.p);
    int oom = opt.oom || msg.oom;
    free(opt.p);
    char *sys = strdup(system_text);
    if (oom || !sys) {
        free(msg.p);
        free(sys);
        return kv_err_set(err, "out of memory");
    }
    *system = sys;
    *user = msg.p;
    return 0;
}
