/* search_run.c — the search tests' shared set-up (search_run.h). */
#include "search_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void kv_search_test_init(kv_search_test *t, const char *dir, const char *const *problems, int n)
{
    memset(t, 0, sizeof *t);
    const char *src = getenv("KEVO_SOURCE_DIR") ? getenv("KEVO_SOURCE_DIR") : ".";
    kv_config_defaults(&t->cfg);
    t->cfg.n_problems = n;
    for (int i = 0; i < n; i++)
        snprintf(t->cfg.problems[i], sizeof t->cfg.problems[i], "%s", problems[i]);
    snprintf(t->cfg.run_dir, sizeof t->cfg.run_dir, "%.*s", (int)sizeof t->cfg.run_dir - 1, dir);
    snprintf(t->problems, sizeof t->problems, "%s/problems", src);
    snprintf(t->patterns, sizeof t->patterns, "%s/patterns", src);
    snprintf(t->abi, sizeof t->abi, "%s/docs/abi.md", src);
    t->env = (kv_search_env){.cfg = &t->cfg,
                             .problems_root = t->problems,
                             .patterns_root = t->patterns,
                             .abi_path = t->abi,
                             .stop = &t->no_stop,
                             .stop_fd = -1};
    t->fo = (kv_fake_evalq_opts){.groups = 2, .task_ms = 1};
}

/* kv_commit_hook: a crash right after the chosen commit, as SIGKILL would
 * leave the archive (nothing more written, no stop event, no snapshot). */
static void crash_after(void *ctx, uint64_t commits)
{
    if (commits >= *(const uint64_t *)ctx)
        _exit(KV_SEARCH_TEST_CRASHED);
}

int kv_search_test_run(kv_search_test *t, kv_err *err)
{
    memset(&t->counts, 0, sizeof t->counts);
    t->selfchecks = 0;
    pid_t child = 0;
    if (t->crash_after > 0) {
        t->env.after_commit.fn = crash_after;
        t->env.after_commit.ctx = &t->crash_after;
        fflush(NULL);
        if ((child = fork()) < 0)
            return kv_err_errno(err, errno, "fork");
    }
    if (child > 0) {
        int status = 0;
        if (waitpid(child, &status, 0) != child)
            return kv_err_errno(err, errno, "waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != KV_SEARCH_TEST_CRASHED)
            return kv_err_set(err, "the run did not crash at commit %llu (status %#x)",
                              (unsigned long long)t->crash_after, status);
        return 0;
    }
    if (kv_fake_evalq_new(&t->fo, &t->env.evalq) != 0)
        return kv_err_set(err, "out of memory");
    if (t->fm && kv_fake_mutator_new(t->fm, &t->env.mutator) != 0) {
        t->env.evalq.ops->destroy(t->env.evalq.self);
        return kv_err_set(err, "out of memory");
    }
    int rc = kv_search_run(&t->env, err);
    if (t->fm) {
        kv_fake_mutator_counts_of(&t->env.mutator, &t->counts);
        t->env.mutator.ops->destroy(t->env.mutator.self);
        t->env.mutator = (kv_mutator){0};
    }
    t->selfchecks = kv_fake_evalq_selfchecks(t->env.evalq);
    t->env.evalq.ops->destroy(t->env.evalq.self);
    t->env.evalq = (kv_evalq){0};
    if (t->crash_after > 0) /* the child: it ended without its crash */
        _exit(rc == 0 ? 0 : 1);
    return rc;
}
