/* test_prompt.c — the LLM mutator's prompt: what it holds, and how it fits
 * its budget (the order in which parts go, what never goes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "problem/problem.h"
#include "common/strbuf.h"
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
    in->snippets = "// kevo_sync.cuh: snippet_marker_barrier(pads, phase)";
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
    KV_CHECK_STR_CONTAINS(user, "snippet_marker_barrier");
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

/* The length of both messages built from in (0 when the build fails). */
static size_t built_length(const kv_prompt_in *in)
{
    char *sys = NULL, *user = NULL;
    kv_err err = {{0}};
    int ok = kv_prompt_build(in, &sys, &user, &err) == 0;
    KV_CHECKF(ok, "%s", err.msg);
    size_t n = ok ? strlen(sys) + strlen(user) : 0;
    free(sys);
    free(user);
    return n;
}

/* Budgets from generous to tight: the parts go in order, the result fits. */
static void test_budget(void)
{
    kv_prompt_in in;
    fill(&in, 0);
    char *sys = NULL, *user = NULL;
    kv_err err = {{0}};
    size_t full = built_length(&in);
    int saw_no_snippets = 0, saw_one_insp = 0, saw_cut_abi = 0, saw_no_feedback = 0;
    for (size_t budget = full; budget > 1000; budget -= 37) {
        fill(&in, (int)budget);
        if (kv_prompt_build(&in, &sys, &user, &err) != 0) {
            KV_CHECK_STR_CONTAINS(err.msg, "over the budget");
            break;
        }
        size_t n = strlen(sys) + strlen(user);
        KV_CHECKF(n <= budget, "%zu characters for a budget of %zu", n, budget);
        int snip = strstr(user, "snippet_marker_barrier") != NULL;
        int one = strstr(user, "inspiration_one") != NULL,
            two = strstr(user, "inspiration_two") != NULL;
        int abi_whole = strstr(user, "## The ABI (docs/abi.md)\n") != NULL;
        int abi_none = strstr(user, "## The ABI") == NULL;
        int cut = !abi_whole;
        int feedback = strstr(user, "element 4097") != NULL;
        /* order: snippets go before any inspiration, the second inspiration before the first,
         * inspirations before the ABI is cut, all of the ABI before the feedback */
        KV_CHECK(!(snip && !two));
        KV_CHECK(!(two && !one));
        KV_CHECK(!(cut && (one || two || snip)));
        KV_CHECK(feedback || abi_none);
        saw_no_snippets |= !snip && two;
        saw_one_insp |= one && !two;
        saw_cut_abi |= cut && !abi_none;
        saw_no_feedback |= !feedback;
        /* what never goes */
        KV_CHECK(strstr(user, "parent_kernel") && strstr(user, "allreduce") &&
                 strstr(user, problem.cost_send_bytes) && strstr(user, "tma/fused") &&
                 strstr(sys, ">>>>>>> REPLACE"));
        free(sys);
        free(user);
    }
    /* the walk passed every stage */
    KV_CHECKF(saw_no_snippets && saw_one_insp && saw_cut_abi && saw_no_feedback, "%d %d %d %d",
              saw_no_snippets, saw_one_insp, saw_cut_abi, saw_no_feedback);
    /* a budget the required parts cannot meet is an error naming the setting */
    fill(&in, 500);
    KV_CHECK(kv_prompt_build(&in, &sys, &user, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "prompt_budget_chars");
}

/* A long evaluation (a compiler's log): cut after the ABI, its head kept. */
static void test_long_feedback(void)
{
    kv_strbuf fb = {0};
    for (int i = 1; i <= 400; i++)
        kv_sb_printf(&fb, "kernel.cu(%d): error: identifier \"x%d\" is undefined\n", i, i);
    KV_REQUIRE(!fb.oom);
    kv_prompt_in in;
    fill(&in, 0);
    in.parent_feedback = fb.p;
    char *sys = NULL, *user = NULL;
    kv_err err = {{0}};
    size_t full = built_length(&in);
    /* room for half of the log, none for the ABI, the inspirations, the snippets */
    size_t budget = full - strlen(abi) - fb.len / 2;
    fill(&in, (int)budget);
    in.parent_feedback = fb.p;
    KV_REQUIRE(kv_prompt_build(&in, &sys, &user, &err) == 0);
    KV_CHECKF(strlen(sys) + strlen(user) <= budget, "%zu > %zu", strlen(sys) + strlen(user),
              budget);
    KV_CHECK_STR_CONTAINS(user, "### Its evaluation (first ");
    KV_CHECK_STR_CONTAINS(user, "kernel.cu(1): error: identifier \"x1\" is undefined\n");
    KV_CHECK(strstr(user, "kernel.cu(400)") == NULL);
    KV_CHECK(strstr(user, "## The ABI") == NULL && strstr(user, "inspiration_one") == NULL &&
             strstr(user, "snippet_marker_barrier") == NULL);
    KV_CHECK_STR_CONTAINS(user, "parent_kernel");
    /* whole lines only */
    const char *tail = strstr(user, "### Its evaluation");
    KV_CHECK(tail && strstr(tail, "is undefined\n\n") != NULL);
    free(sys);
    free(user);
    free(fb.p);
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
    KV_RUN(test_long_feedback);
    kv_problem_free(&problem);
    free(abi);
    return kv_test_summary();
}
