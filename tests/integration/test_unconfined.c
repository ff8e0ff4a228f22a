/* test_unconfined.c — where the kernel offers no Landlock, candidate code is
 * not started unless evaluation.allow_unconfined says so. No hook in kevo:
 * each check runs in a child whose seccomp filter fails landlock_create_ruleset,
 * landlock_add_rule and landlock_restrict_self with ENOSYS, as a kernel built
 * without Landlock does.
 *  - kevo doctor says candidate code is NOT CONFINED and that workers refuse
 *    to start (and, without the filter, that it is confined);
 *  - kevo run warns NOT CONFINED at its start and fails;
 *  - a group of tests/support/fake_worker.c, with the options kevo eval and kevo run
 *    give theirs (kv_eval_group_opts), is refused by default, saying why and
 *    naming the key, and starts and runs a job when the config sets the key.
 * Skips (77) where seccomp filters cannot be installed. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "evaluator/pipeline.h" /* kv_eval_group_opts */
#include "evaluator/group/group.h"
#include "evaluator/confine/sandbox.h"
#include "search/config.h"
#include "test.h"
#include "test_util.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* the Landlock system calls, numbered alike on x86_64 and aarch64 */
#define NR_LANDLOCK_FIRST 444 /* landlock_create_ruleset */
#define NR_LANDLOCK_LAST 446  /* landlock_restrict_self */

#define UID_BASE 63000u /* apart from test_group's and test_confine's workers */

static const char *bin, *fake;
static char dir[4000]; /* room for what the tests put in it */

#ifdef NATIVE_ARCH
/* no_new_privs, then the filter; 0 or -1 with errno. Inherited by every child and kept
 * across exec. */
static int deny_landlock(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, NR_LANDLOCK_FIRST, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, NR_LANDLOCK_LAST, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 ? -1 : 0;
}
#endif

/* Waits for pid; its exit status, 128 + a signal, or -1. */
static int wait_child(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* 0: the filter works here; 77: seccomp filters cannot be installed; 1: the filter
 * was installed but Landlock still answered. */
static int probe_filter(void)
{
#ifndef NATIVE_ARCH
    printf("skipped: the seccomp filter knows x86_64 and aarch64 only\n");
    return 77;
#else
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (deny_landlock() != 0)
            _exit(77);
        long abi = syscall(NR_LANDLOCK_FIRST, NULL, 0, 1u /* LANDLOCK_CREATE_RULESET_VERSION */);
        _exit(abi == -1 && errno == ENOSYS ? 0 : 1);
    }
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    int rc = wait_child(pid);
    if (rc == 77)
        printf("skipped: seccomp filters cannot be installed here\n");
    else if (rc != 0)
        fprintf(stderr, "the seccomp filter did not take Landlock away (child: %d)\n", rc);
    return rc;
#endif
}

/* Runs argv (kv_test_spawn) from a child that has no Landlock, or, with landlock set, from
 * one that has what this process has. */
static int spawn(int landlock, const char *const *argv, const char *out, const char *err)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
#ifdef NATIVE_ARCH
        if (!landlock && deny_landlock() != 0)
            _exit(126);
#endif
        int rc = kv_test_spawn(argv, out, err, 120);
        _exit(rc < 0 ? 127 : rc);
    }
    return pid < 0 ? -1 : wait_child(pid);
}

static const char refuse[] = "NOT CONFINED: this kernel offers no Landlock, so candidate code "
                             "could write the archive and the disk; workers refuse to start "
                             "(evaluation.allow_unconfined would allow it)";

static void test_doctor(void)
{
    char out[4200];
    snprintf(out, sizeof out, "%s/doctor.out", dir);
    const char *argv[] = {bin, "doctor", NULL};
    /* 1 where no evaluation group can run (no GPUs here), its last line saying so */
    int rc = spawn(0, argv, out, NULL);
    KV_CHECKF(rc == 0 || rc == 1, "doctor exit %d", rc);
    char *text = kv_test_slurp(out, NULL);
    if (rc == 1)
        KV_CHECK_STR_CONTAINS(text, "\nno evaluation group can run here");
    char want[512];
    snprintf(want, sizeof want, "candidate code: %s\n", refuse);
    KV_CHECK_STR_CONTAINS(text, want);
    const char *line = text ? strstr(text, "candidate code: ") : NULL;
    if (line)
        printf("doctor without Landlock: %.*s\n", (int)strcspn(line, "\n"), line);
    free(text);

    /* the same doctor with this process's rights: what the filter took away was there */
    kv_sandbox_support sup;
    kv_sandbox_probe(&sup);
    if (!sup.landlock_abi)
        return;
    rc = spawn(1, argv, out, NULL);
    KV_CHECKF(rc == 0 || rc == 1, "doctor exit %d", rc);
    text = kv_test_slurp(out, NULL);
    KV_CHECK_STR_CONTAINS(text, "candidate code: confined: Landlock ABI ");
    KV_CHECK(text && strstr(text, "NOT CONFINED") == NULL);
    free(text);
}

/* kevo run says it before any GPU work; it then fails, at the GPUs' probe
 * here or at the groups' refusal on a GPU machine. */
static void test_run_warns(void)
{
    char cfg[4200], run[4200], out[4200], err[4200];
    snprintf(cfg, sizeof cfg, "%s/run.json", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(out, sizeof out, "%s/run.out", dir);
    snprintf(err, sizeof err, "%s/run.err", dir);
    static const char json[] = "{\"problems\": [\"allreduce\"], \"budget\": {\"evaluations\": 1}}";
    kv_err e = {{0}};
    KV_REQUIRE(kv_write_file_atomic(cfg, json, strlen(json), &e) == 0);
    const char *argv[] = {bin, "run", "--config", cfg, "--run", run, NULL};
    KV_CHECK(spawn(0, argv, out, err) == 1);
    char *text = kv_test_slurp(err, NULL);
    char want[512];
    snprintf(want, sizeof want, "kevo run: WARNING: candidate code is %s\n", refuse);
    KV_CHECK_STR_CONTAINS(text, want);
    free(text);
}

/* In a child without Landlock: a group with the options of a run whose config is json.
 * allowed: whether it must start and run a job, else be refused. 0 when all is as said. */
static int group_child(const char *json, int allowed)
{
    kv_err err = {{0}};
    kv_config cfg;
    if (kv_config_parse(json, "group.json", &cfg, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    kv_eval_opts eo;
    kv_eval_defaults(&eo, getenv("KEVO_SOURCE_DIR"));
    eo.world = 2;
    eo.start_timeout_s = 20;
    eo.worker_uid = UID_BASE;
    eo.allow_unconfined = cfg.eval.allow_unconfined; /* as search/evaluator_setup.c */
    snprintf(eo.worker_path, sizeof eo.worker_path, "%s", fake);
    snprintf(eo.log_dir, sizeof eo.log_dir, "%s/logs", dir);
    int devices[2] = {0, 1};
    kv_group_opts go;
    kv_eval_group_opts(&eo, 0, devices, &go);
    kv_group *g = NULL;
    if (kv_group_new(&go, &g, &err) != 0) {
        char want[512];
        snprintf(want, sizeof want, "group 0: %s", refuse);
        if (!allowed && strcmp(err.msg, want) == 0) {
            printf("refused: %s\n", err.msg);
            return 0;
        }
        fprintf(stderr, "the group was refused: %s\n", err.msg);
        return 1;
    }
    if (!allowed) {
        fprintf(stderr, "a group without Landlock was made without evaluation.allow_unconfined\n");
        kv_group_free(g);
        return 1;
    }
    kv_job job;
    memset(&job, 0, sizeof job);
    job.id = 1;
    job.n_sizes = 1;
    job.trials = 1;
    snprintf(job.sizes[0], sizeof job.sizes[0], "ok");
    snprintf(job.problem_dir, sizeof job.problem_dir, "/nonexistent/problem");
    snprintf(job.reference_so, sizeof job.reference_so, "/nonexistent/ref.so");
    kv_job_result *res = calloc(1, sizeof *res);
    int rc = 1;
    if (!res)
        fprintf(stderr, "out of memory\n");
    else if (kv_group_start(g, &err) != 0 || kv_group_run(g, &job, 30, res, &err) != 0)
        fprintf(stderr, "the unconfined group: %s\n", err.msg);
    else if (res->verdict != KV_VERDICT_OK)
        fprintf(stderr, "the unconfined group's job: %s\n", res->message);
    else
        rc = 0;
    if (rc == 0)
        printf("allowed unconfined: the group ran a job, %s\n", kv_verdict_name(res->verdict));
    kv_group_free(g);
    free(res);
    return rc;
}

static int group_without_landlock(const char *json, int allowed)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
#ifdef NATIVE_ARCH
        if (deny_landlock() != 0)
            _exit(126);
#endif
        int rc = group_child(json, allowed);
        fflush(stdout);
        _exit(rc); /* not exit: the parent's atexit removes dir */
    }
    return pid < 0 ? -1 : wait_child(pid);
}

static void test_group_refused(void)
{
    KV_CHECK(group_without_landlock("{\"problems\": [\"allreduce\"]}", 0) == 0);
    KV_CHECK(group_without_landlock("{\"problems\": [\"allreduce\"], "
                                    "\"evaluation\": {\"allow_unconfined\": false}}",
                                    0) == 0);
}

static void test_group_allowed(void)
{
    KV_CHECK(group_without_landlock("{\"problems\": [\"allreduce\"], "
                                    "\"evaluation\": {\"allow_unconfined\": true}}",
                                    1) == 0);
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    fake = getenv("KEVO_FAKE_WORKER");
    if (!bin || !*bin || !fake || !*fake || !getenv("KEVO_SOURCE_DIR")) {
        printf("skipped: KEVO_BIN, KEVO_FAKE_WORKER or KEVO_SOURCE_DIR is not set (ctest sets "
               "them)\n");
        return 77;
    }
    int probe = probe_filter();
    if (probe != 0)
        return probe;
    unsetenv("KEVO_FAKE_START");
    kv_test_fresh_dir(dir, sizeof dir, "unconfined");
    if (chmod(dir, 0755) != 0) { /* the workers' uid (as root) walks through it */
        perror(dir);
        return 1;
    }
    KV_RUN(test_doctor);
    KV_RUN(test_run_warns);
    KV_RUN(test_group_refused);
    KV_RUN(test_group_allowed);
    return kv_test_summary();
}
