/* seedless.c — problems without seeds (docs/search.md, "Problems without
 * seeds"). A problem whose patterns/<problem>/ holds no seed starts from its
 * reference: reference.cu, a candidate like any other by the ABI, is stored
 * as the problem's first program (operator "reference"), evaluated at the
 * seed stage like a seed and offered to every island, so that a mutator
 * that writes code (the LLM) has a parent. A mutator that only varies seeds
 * (kv_mutator_ops.needs_seeds: the template mutator) has nothing to vary
 * there: such a problem is skipped, said at every start, and a run that has
 * no problem left is refused, naming the problems and what to add. */
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "mutate/library.h"
#include "search/run_state.h"

#define REMEDY                                                                                 \
    "the template mutator (mutator.kind \"template\") only varies the kevo:param annotations " \
    "of seeds; add a seed there (a .cu file with kevo:pattern and kevo:param annotations: "    \
    "docs/patterns.md), or use the LLM mutator (mutator.kind \"llm\", docs/mutation.md), "     \
    "which starts a problem without seeds from its reference"

/* The refusal of a run none of whose n problems has a seed. */
static int refuse(const char *const *names, int n, const char *patterns_root, kv_err *err)
{
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof list; i++) {
        int k = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    if (n == 1)
        return kv_err_set(err, "nothing to vary: problem %s has no seed in %s/%s/, and " REMEDY,
                          list, patterns_root, names[0]);
    return kv_err_set(err,
                      "nothing to vary: no problem of the run has a seed (%s: none in "
                      "%s/<problem>/), and " REMEDY,
                      list, patterns_root);
}

int kv_search_check_seeds(const kv_config *cfg, const char *patterns_root, kv_err *err)
{
    if (cfg->mutator != KV_MUTATOR_TEMPLATE || cfg->n_problems <= 0)
        return 0;
    const char *names[KV_CFG_MAX_PROBLEMS];
    for (int i = 0; i < cfg->n_problems; i++) {
        kv_library lib;
        /* a seed that does not parse is named when the run loads the library */
        if (kv_library_load_from(patterns_root, cfg->problems[i], cfg->seeds, &lib, NULL, NULL,
                                 err) != 0)
            return -1;
        int n = lib.n;
        kv_library_free(&lib);
        if (n > 0)
            return 0;
        names[i] = cfg->problems[i];
    }
    return refuse(names, cfg->n_problems, patterns_root, err);
}

/* Every cell an evaluation may give (NVLS only where the run allows it):
 * without seeds nothing says which cells a problem can reach. */
static unsigned any_cell(const kv_config *cfg)
{
    unsigned cells = 0;
    for (int t = 0; t < KV_TRANSPORT_COUNT; t++)
        for (int f = 0; f < KV_FUSION_COUNT; f++)
            if (t != KV_TRANSPORT_NVLS || cfg->eval.allow_nvls)
                cells |= 1u << kv_cell_index((kv_transport)t, (kv_fusion)f);
    return cells;
}

static void say_skipped(kv_run *r, const kv_run_problem *p)
{
    kv_err msg;
    kv_err_set(&msg, "problem %s skipped: it has no seed in %s/%s/, and " REMEDY, p->problem.name,
               r->env->patterns_root, p->problem.name);
    kv_run_say(r, "skipped", p->problem.name, "reason", "", msg.msg);
}

int kv_run_plan_seedless(kv_run *r, kv_err *err)
{
    const char *names[KV_CFG_MAX_PROBLEMS];
    int skipped = 0;
    for (int i = 0; i < r->n_problems; i++) {
        kv_run_problem *p = &r->problems[i];
        if (p->lib.n > 0)
            continue;
        if (r->mut.ops->needs_seeds) {
            p->skipped = 1;
            names[skipped++] = p->problem.name;
        } else {
            p->from_reference = 1;
            p->reachable = any_cell(r->cfg);
        }
    }
    if (skipped > 0 && skipped == r->n_problems)
        return refuse(names, skipped, r->env->patterns_root, err);
    for (int i = 0; i < r->n_problems; i++)
        if (r->problems[i].skipped)
            say_skipped(r, &r->problems[i]);
    return 0;
}
