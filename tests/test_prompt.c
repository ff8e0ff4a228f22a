/* test_prompt.c — the LLM mutator's prompt: what it holds, and how it fits
 * its budget (the order in which parts go, what never goes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kevo/fsutil.h"
#include "kevo/problem.h"
#include "mutate/prompt.h"
#include "test.h"

static kv_problem problem;
static char *abi;

static void fill(kv_prompt_in *in, int budget)
{
    memset(in, 0, sizeof *in);
    in->problem = &problem;
    in->world = 2;
    in->topology = "2 x H200, NV18 between them (about 370 GB/s per direction with SM stores).";
    in->abi = abi;
    in->parent_src = "#define CTAS 2\n__global__ void parent_kernel() {}\n";
    in->parent_feedback = "verdict mismatch: rank 1, output y, element 4097: got 1.5, want 2.0";
    in->target_cell = "tma/fused";
    in->n_inspirations = 2;
    in->insp_src[0] = "__global__ void inspiration_one() {}";
    in->insp_note[0] = "sm/fused elite, 1.4x";
    in->insp_src[1] = "__global__ void inspiration_two() {}";
    in->insp_note[1] = "ce/unfused elite, 1.1x";
    in->snippets = "// kevo_sync.cuh: kevo_cta_barrier(pads, phase)";
    in->budget_chars = budget;
}

static void test_contents(void)
{
    kv_prompt_in in;
    fill(&in, 0);
    char *sys = NULL, *user = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_prompt_build(&in, &sys, &user, &err) == 0);
    KV_CHECK_STR_CONTAINS(sys, "<<<<<<< SEARCH");
    KV_CHECK_STR_CONTAINS(sys, "```cuda");
    KV_CHECK_STR_CONTAINS(user, "## Problem: allreduce (W = 2 GPUs)");
    KV_CHECK_STR_CONTAINS(user, problem.description);
    KV_CHECK_STR_CONTAINS(user, "- 64KiB: N = 32768");
    KV_CHECK(strstr(user, "validation") == NULL || strstr(user, "hidden odd validation") != NULL);
    KV_CHECK_STR_CONTAINS(user, problem.cost_send_bytes);
    KV_CHECK_STR_CONTAINS(user, "NV18");
    KV_CHECK_STR_CONTAINS(user, "behaviour cell is tma/fused");
    KV_CHECK_STR_CONTAINS(user, "parent_kernel");
    KV_CHECK_STR_CONTAINS(user, "element 4097");
    KV_CHECK_STR_CONTAINS(user, "inspiration_one");
    KV_CHECK_STR_CONTAINS(user, "ce/unfused elite, 1.1x");
    KV_CHECK_STR_CONTAINS(user, "kevo_cta_barrier");
    KV_CHECK_STR_CONTAINS(user, "## The ABI (docs/abi.md)");
    KV_CHECK(strstr(user, "left out for space") == NULL);
    free(sys);
    free(user);
    /* no parent: from scratch */
    in.parent_src = NULL;
    KV_REQUIRE(kv_prompt_build(&in, &sys, &user, &err) == 0);
    KV_CHECK_STR_CONTAINS(user, "from scratch");
    free(sys);
    free(user);
}

/* Budgets from generous to tight: the parts go in order, the result fits. */
static void test_budget(void)
{
    kv_prompt_in in;
    fill(&in, 0);
    char *sys = NULL, *user = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_prompt_build(&in, &sys, &user, &err) == 0);
    size_t full = strlen(sys) + strlen(user);
    free(sys);
    free(user);
    int saw_no_snippets = 0, saw_one_insp = 0, saw_cut_abi = 0;
    for (size_t budget = full; budget > 2000; budget -= 97) {
        fill(&in, (int)budget);
        if (kv_prompt_build(&in, &sys, &user, &err) != 0) {
            KV_CHECK_STR_CONTAINS(err.msg, "over the budget");
            break;
        }
        size_t n = strlen(sys) + strlen(user);
        KV_CHECKF(n <= budget, "%zu characters for a budget of %zu", n, budget);
        int snip = strstr(user, "kevo_cta_barrier") != NULL;
        int one = strstr(user, "inspiration_one") != NULL, two = strstr(user, "inspiration_two") != NULL;
        int cut = strstr(user, "left out for space") != NULL || strstr(user, "## The ABI") == NULL;
        /* order: snippets go before any inspiration, the second inspiration before the first,
         * inspirations before the ABI is cut */
        KV_CHECK(!(snip && !two));
        KV_CHECK(!(two && !one));
        KV_CHECK(!(cut && (one || two || snip)));
        saw_no_snippets |= !snip && two;
        saw_one_insp |= one && !two;
        saw_cut_abi |= cut;
        /* what never goes */
        KV_CHECK(strstr(user, "parent_kernel") && strstr(user, "element 4097") &&
                 strstr(user, "tma/fused") && strstr(sys, ">>>>>>> REPLACE"));
        free(sys);
        free(user);
    }
    KV_CHECK(saw_no_snippets && saw_one_insp && saw_cut_abi); /* the walk passed every stage */
    /* a budget the required parts cannot meet is an error naming the setting */
    fill(&in, 500);
    KV_CHECK(kv_prompt_build(&in, &sys, &user, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "prompt_budget_chars");
}

int main(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    char dir[4096], path[4200];
    kv_err err = {{0}};
    size_t len;
    if (!src) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/problems/allreduce", src);
    snprintf(path, sizeof path, "%s/docs/abi.md", src);
    if (kv_problem_load(dir, &problem, &err) != 0 || kv_read_file(path, &abi, &len, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    KV_RUN(test_contents);
    KV_RUN(test_budget);
    kv_problem_free(&problem);
    free(abi);
    return kv_test_summary();
}
