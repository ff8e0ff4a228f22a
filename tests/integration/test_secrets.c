/* test_secrets.c — no secret of the user's reaches kevo's children, and the
 * API key leaves kevo's own environment:
 *  - the allow-list passes what CUDA, NCCL and the toolchain need, and no
 *    name that looks like a credential, whatever its prefix;
 *  - in a process started with planted secrets in its environment block,
 *    kv_llm_take_key erases the key from /proc/self/environ (unsetenv alone
 *    does not) and kevo still has it; a forked host-check-like child
 *    (kv_env_keep_allowed) sees none of the secrets, in environ or in
 *    /proc/self/environ;
 *  - nvcc (KEVO_NVCC pointed at a script that counts the planted markers in
 *    its environment) sees none of them.
 * The workers' side is test_confine's (secrets). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "mutate/llm.h"
#include "test.h"
#include "test_util.h"

static const char *const planted[] = {
    "OPENAI_API_KEY=kevo-planted-0", "ANTHROPIC_API_KEY=kevo-planted-1",
    "AWS_SECRET_ACCESS_KEY=kevo-planted-2", "KEVO_PLANTED_SECRET=kevo-planted-3"};
#define N_PLANTED (sizeof planted / sizeof planted[0])

static char base[4096];

/* How many of the planted values /proc/self/environ holds. */
static int planted_in_proc(void)
{
    static char buf[1 << 16];
    int fd = open("/proc/self/environ", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    int found = 0;
    for (ssize_t i = 0; i < n; i++)
        if (strncmp(buf + i, "kevo-planted-", 13) == 0)
            found++;
    return found;
}

static void test_allowed(void)
{
    static const char *const yes[] = {
        "PATH=/usr/bin",      "LD_LIBRARY_PATH=/x", "LC_ALL=C",    "CUDA_VISIBLE_DEVICES=0,1",
        "NCCL_NVLS_ENABLE=0", "NCCL_DEBUG=INFO",    "LANG=C.UTF-8"};
    static const char *const no[] = {"OPENAI_API_KEY=x",
                                     "ANTHROPIC_API_KEY=x",
                                     "AWS_SECRET_ACCESS_KEY=x",
                                     "KEVO_PLANTED_SECRET=x",
                                     "NCCL_IB_TOKEN=x",
                                     "CUDA_api_key=x",
                                     "HOME=/root",
                                     "PWD=/runs",
                                     "SSH_AUTH_SOCK=/tmp/x",
                                     "GITHUB_TOKEN=x",
                                     "USER=root",
                                     "KEVO_HOME=/x",
                                     "LD_PRELOAD=/x.so",
                                     "NCCL_"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        KV_CHECKF(kv_env_allowed(yes[i]), "%s refused", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        KV_CHECKF(!kv_env_allowed(no[i]), "%s allowed", no[i]);
}

/* In the re-executed child, whose environment block holds the planted
 * secrets: 0 when all is as said. */
static int child(void)
{
    int bad = 0;
    if (planted_in_proc() != (int)N_PLANTED) {
        fprintf(stderr, "child: the planted secrets are not in /proc/self/environ\n");
        return 1;
    }
    pid_t p = fork();
    if (p == 0) { /* as the host check's child does (evaluator/checks/hostcheck.c) */
        kv_env_keep_allowed();
        extern char **environ;
        int seen = 0;
        for (char **e = environ; *e; e++)
            seen += strstr(*e, "kevo-planted") != NULL;
        int in_proc = planted_in_proc();
        if (seen || in_proc || !getenv("PATH"))
            fprintf(stderr,
                    "host check: %d planted in environ, %d in /proc/self/environ, "
                    "PATH %s\n",
                    seen, in_proc, getenv("PATH") ? "set" : "unset");
        _exit(seen || in_proc || !getenv("PATH") ? 1 : 0);
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        bad = 1;

    kv_cfg_llm cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.api_key_env, sizeof cfg.api_key_env, "OPENAI_API_KEY");
    cfg.n_models = 1;
    cfg.concurrency = 1;
    kv_err err = {{0}};
    if (kv_llm_take_key(&cfg, &err) != 0) {
        fprintf(stderr, "kv_llm_take_key: %s\n", err.msg);
        return 1;
    }
    int left = planted_in_proc();
    if (getenv("OPENAI_API_KEY") || left != (int)N_PLANTED - 1) {
        fprintf(stderr,
                "after kv_llm_take_key: OPENAI_API_KEY %s, %d planted values in "
                "/proc/self/environ (want %zu)\n",
                getenv("OPENAI_API_KEY") ? "still set" : "unset", left, N_PLANTED - 1);
        bad = 1;
    }
    if (kv_llm_check(&cfg, &err) != 0) { /* kevo itself keeps the key */
        fprintf(stderr, "kv_llm_check after the take: %s\n", err.msg);
        bad = 1;
    }
    return bad;
}

static void test_own_environ(void)
{
    const char *self = "/proc/self/exe";
    char *env[N_PLANTED + 2];
    for (size_t i = 0; i < N_PLANTED; i++)
        env[i] = (char *)planted[i];
    env[N_PLANTED] = "PATH=/usr/bin:/bin";
    env[N_PLANTED + 1] = NULL;
    pid_t p = fork();
    if (p == 0) {
        char *argv[] = {(char *)self, "--child", NULL};
        execve(self, argv, env);
        _exit(127);
    }
    int st = 0;
    KV_REQUIRE(p > 0 && waitpid(p, &st, 0) == p);
    KV_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child said no (status %d)", st);
}

static void test_nvcc_env(void)
{
    char nvcc[2048];
    KV_REQUIRE(strlen(base) < 1024);
    snprintf(nvcc, sizeof nvcc, "%.1024s/env-nvcc", base);
    static const char script[] =
        "#!/bin/sh\n"
        "if [ \"$1\" = --version ]; then echo 'fake nvcc for kevo tests'; exit 0; fi\n"
        "echo \"error: planted-count: $(env | grep -c kevo-planted) path: ${PATH:+set}\" >&2\n"
        "exit 1\n";
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(nvcc, script, strlen(script), &err) == 0 &&
               chmod(nvcc, 0755) == 0);
    for (size_t i = 0; i < N_PLANTED; i++)
        KV_REQUIRE(putenv((char *)planted[i]) == 0);
    kv_compile_opts o;
    kv_compile_defaults(&o, getenv("KEVO_SOURCE_DIR"));
    snprintf(o.nvcc, sizeof o.nvcc, "%s", nvcc);
    snprintf(o.cache_dir, sizeof o.cache_dir, "%.1024s/cache", base);
    kv_compile_result r;
    static const char src[] = "extern \"C\" int kevo_run(void *c) { return 0; }\n";
    KV_REQUIRE(kv_compile(&o, src, strlen(src), &r, &err) == 0);
    printf("nvcc: %s\n", r.errors ? r.errors : "(nothing)");
    KV_CHECK(r.status == KV_COMPILE_ERROR);
    KV_CHECK_STR_CONTAINS(r.errors, "planted-count: 0 path: set");
    kv_compile_result_free(&r);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();
    kv_test_fresh_dir(base, sizeof base, "secrets");
    KV_RUN(test_allowed);
    KV_RUN(test_own_environ);
    KV_RUN(test_nvcc_env);
    return kv_test_summary();
}
