/* test_confine.c — the workers' confinement and their capped output, with
 * tests/support/fake_worker.c started exactly as kevo-worker is (group_spawn.c,
 * sandbox.c): what a hostile candidate would try from inside a worker.
 *  - it cannot open the archive for reading or writing, make a file beside
 *    it, list the run directory or the supervisor's fds, write /tmp, or
 *    signal the supervisor; it can write its scratch, which is its HOME;
 *    its rlimits are set (as root: its own uid, RLIMIT_NPROC binding);
 *  - a flood of output leaves the first and last cap bytes in the log and a
 *    cut mark, and the group stays well; floods over several jobs rotate the
 *    log to .1 and the two stay within twice the bound;
 *  - a fork bomb stops at RLIMIT_NPROC, and after the group is freed no
 *    process of the workers' uid is left, the one that called setsid too;
 *  - a job's problem and shared objects reach the workers as copies in the
 *    group's inbox (the problem's folder keeps its name), the originals stay
 *    out of reach, and the candidate's copy goes when its job ends;
 *  - a second group under a uid that already runs processes is refused (as root);
 *  - a run directory that a rule would open to the workers is refused;
 *  - what the system-call filter and non-dumpability refuse (lockdown): writing its
 *    own /proc/self/mem, ptrace, process_vm_writev, a raw syscall() through a pointer
 *    built at run time, exec, mprotect to PROT_EXEC, unshare, PR_SET_DUMPABLE;
 *  - secrets planted in the supervisor's environment reach no worker (secrets);
 *  - as root, a worker cannot connect to a listener of the host's loopback, and
 *    loopback works inside its group's network namespace (network);
 *  - a dump (kevo eval --dump) is written by the workers into the group's own
 *    folder and copied by kevo into the user's, which keeps its owner and mode;
 *    a link left in the dump fails the job and is not copied (dump);
 *  - a folder made first under a predictable group folder name is neither used
 *    nor removed (predicted_name_unused).
 * Skips (77) where the kernel offers no Landlock. */
#define _GNU_SOURCE /* strerrorname_np in the messages we compare against */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "evaluator/group/group.h"
#include "evaluator/confine/sandbox.h"
#include "common/fsutil.h"
#include "common/sha256.h"
#include "test.h"
#include "test_util.h"

#define W 2
/* the workers' uids as root: apart from test_group's (61000 + index), which ctest runs
 * beside this test; a uid that already runs processes is refused */
#define UID_BASE 62000u

static const char *fake;
static char base[4096];
static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
    (void)sig;
    usr1_seen++;
}

static int dump_groups; /* new groups get a dump folder (kevo eval --dump) */

static kv_group *new_group(int index, const char *log_dir, const char *private_dir, size_t cap,
                           size_t log_max, long nproc, kv_err *err)
{
    kv_group_opts o;
    memset(&o, 0, sizeof o);
    o.world = W;
    for (int r = 0; r < W; r++)
        o.devices[r] = r;
    snprintf(o.worker_path, sizeof o.worker_path, "%s", fake);
    snprintf(o.log_dir, sizeof o.log_dir, "%s", log_dir);
    o.group_index = index;
    o.start_timeout_s = 20;
    o.output_cap_bytes = cap;
    o.log_max_bytes = log_max;
    o.sandbox.nproc = nproc;
    o.sandbox.scratch_bytes = (size_t)8 << 20;
    o.sandbox.worker_uid = UID_BASE;
    o.sandbox.dump = dump_groups;
    snprintf(o.sandbox.private_dir, sizeof o.sandbox.private_dir, "%s", private_dir);
    kv_group *g = NULL;
    if (kv_group_new(&o, &g, err) != 0)
        return NULL;
    if (kv_group_start(g, err) != 0) {
        kv_group_free(g);
        return NULL;
    }
    return g;
}

static int run_job_id(kv_group *g, uint64_t id, const char *behaviour, kv_job_result *res,
                      kv_err *err)
{
    kv_job job;
    memset(&job, 0, sizeof job);
    job.id = id;
    job.n_sizes = 1;
    snprintf(job.sizes[0], sizeof job.sizes[0], "%s", behaviour);
    snprintf(job.problem_dir, sizeof job.problem_dir, "/nonexistent/problem");
    snprintf(job.reference_so, sizeof job.reference_so, "/nonexistent/ref.so");
    job.trials = 1;
    return kv_group_run(g, &job, 30, res, err);
}

static int run_job(kv_group *g, const char *behaviour, kv_job_result *res, kv_err *err)
{
    return run_job_id(g, 1, behaviour, res, err);
}

/* A job of behaviour that dumps into dump_dir. */
static int run_dump_job(kv_group *g, const char *behaviour, const char *dump_dir,
                        kv_job_result *res, kv_err *err)
{
    kv_job job;
    memset(&job, 0, sizeof job);
    job.id = 1;
    job.n_sizes = 1;
    snprintf(job.sizes[0], sizeof job.sizes[0], "%s", behaviour);
    snprintf(job.problem_dir, sizeof job.problem_dir, "/nonexistent/problem");
    snprintf(job.reference_so, sizeof job.reference_so, "/nonexistent/ref.so");
    snprintf(job.dump_dir, sizeof job.dump_dir, "%s", dump_dir);
    job.trials = 1;
    return kv_group_run(g, &job, 30, res, err);
}

static void hash_file(const char *path, uint8_t out[KV_SHA256_LEN])
{
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file(path, &data, &len, &err) == 0);
    KV_REQUIRE(kv_sha256(data, len, out) == 0);
    free(data);
}

static int signals_scoped; /* Landlock ABI >= 6, or the workers' own uid (root) */

static void test_escape(void)
{
    char run[4200], logs[4300], archive[4400];
    snprintf(run, sizeof run, "%s/run", base);
    snprintf(logs, sizeof logs, "%s/logs", run);
    snprintf(archive, sizeof archive, "%s/archive.mdb", run);
    kv_err err = {{0}};
    KV_REQUIRE(kv_mkdir_p(logs, 0755, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(archive, "not really an archive\n", 22, &err) == 0);
    KV_REQUIRE(chmod(archive, 0666) == 0); /* only the confinement stands in the way */
    KV_REQUIRE(chmod(run, 0777) == 0);
    uint8_t before[KV_SHA256_LEN], after[KV_SHA256_LEN];
    hash_file(archive, before);
    setenv("KEVO_FAKE_TARGET", archive, 1);
    unlink("/tmp/kevo-fake-escaped");

    kv_group *g = new_group(3, logs, run, 0, 0, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    KV_CHECKF(run_job(g, "escape", res, &err) == 0, "%s", err.msg);
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s", res->message);
    const char *m = res->message;
    printf("escape: %s\n", m);
    char want[128];
    const char *denied[] = {"write-archive", "read-archive", "plant", "list-run-dir", "write-tmp"};
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        snprintf(want, sizeof want, "%s:EACCES", denied[i]);
        KV_CHECK_STR_CONTAINS(m, want);
    }
    KV_CHECK(strstr(m, "parent-fds:ok") == NULL);
    if (signals_scoped) {
        KV_CHECK_STR_CONTAINS(m, "signal-parent:EPERM");
        KV_CHECK(usr1_seen == 0);
    }
    KV_CHECK_STR_CONTAINS(m, "scratch:ok");
    KV_CHECK_STR_CONTAINS(m, "home-is-cwd:yes");
    snprintf(want, sizeof want, "fsize:%zu ", (size_t)8 << 20);
    KV_CHECK_STR_CONTAINS(m, want);
    KV_CHECK_STR_CONTAINS(m, "core:0 ");
    if (geteuid() == 0) {
        snprintf(want, sizeof want, "nproc:%d ", KV_SANDBOX_DEFAULT_NPROC);
        KV_CHECK_STR_CONTAINS(m, want);
        snprintf(want, sizeof want, "uid:%u", UID_BASE + 3);
        KV_CHECK_STR_CONTAINS(m, want);
    }
    struct stat st;
    KV_CHECK(stat("/tmp/kevo-fake-escaped", &st) != 0);
    char plant[4300];
    snprintf(plant, sizeof plant, "%s/planted", run);
    KV_CHECK(stat(plant, &st) != 0);
    hash_file(archive, after);
    KV_CHECK(memcmp(before, after, sizeof before) == 0);
    kv_group_free(g);
    free(res);
}

static void test_flood(void)
{
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/flood-logs", base);
    kv_err err = {{0}};
    setenv("KEVO_FAKE_FLOOD_MIB", "48", 1);
    size_t cap = 64 << 10;
    kv_group *g = new_group(4, logs, "", cap, 0, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    KV_CHECKF(run_job(g, "flood", res, &err) == 0, "%s", err.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s", res->message);
    /* the group is well afterwards */
    KV_CHECKF(run_job(g, "ok", res, &err) == 0 && res->verdict == KV_VERDICT_OK, "%s %s", err.msg,
              res->message);
    kv_group_free(g);
    for (int r = 0; r < W; r++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/worker-4-%d.log", logs, r);
        char *text = NULL;
        size_t len = 0;
        KV_REQUIRE(kv_read_file(path, &text, &len, &err) == 0);
        printf("flood: rank %d wrote 96 MiB; its log holds %zu bytes (%.2f s)\n", r, len,
               (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        KV_CHECKF(len > 2 * cap && len < 2 * cap + 4096, "log of rank %d: %zu bytes", r, len);
        KV_CHECK_STR_CONTAINS(text, "bytes of output cut here");
        char last[64];
        snprintf(last, sizeof last, "flood: last line of rank %d", r);
        KV_CHECK_STR_CONTAINS(text, last);
        free(text);
    }
    free(res);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Floods over several jobs with the smallest worker log that
 * evaluation.worker_log_mib allows (1 MiB): the log is rotated to .1, the
 * two files stay within 2 x the bound, and the newest output is in the log. */
static void test_log_rotation(void)
{
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/rotate-logs", base);
    kv_err err = {{0}};
    setenv("KEVO_FAKE_FLOOD_MIB", "1", 1);
    size_t cap = 128 << 10, log_max = (size_t)1 << 20;
    enum { JOBS = 10 }; /* about 2 x cap per job and rank: 2.5 MiB in all, two rotations */
    kv_group *g = new_group(8, logs, "", cap, log_max, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    for (uint64_t id = 1; id <= JOBS; id++) {
        KV_CHECKF(run_job_id(g, id, "flood", res, &err) == 0, "%s", err.msg);
        KV_CHECKF(res->verdict == KV_VERDICT_OK, "job %llu: %s", (unsigned long long)id,
                  res->message);
    }
    kv_group_free(g);
    free(res);
    for (int r = 0; r < W; r++) {
        char path[4300], old[4400], want[96];
        snprintf(path, sizeof path, "%s/worker-8-%d.log", logs, r);
        snprintf(old, sizeof old, "%s.1", path);
        off_t now = file_size(path), before = file_size(old);
        printf("rotation: rank %d's log %lld bytes, its .1 %lld bytes\n", r, (long long)now,
               (long long)before);
        KV_CHECKF(before > 0, "%s is missing", old);
        KV_CHECKF(now > 0 && now <= (off_t)log_max, "%s: %lld bytes", path, (long long)now);
        KV_CHECKF(before <= (off_t)log_max, "%s: %lld bytes", old, (long long)before);
        KV_CHECK(now + before <= 2 * (off_t)log_max);
        char *text = NULL, *prev = NULL;
        size_t len = 0;
        if (kv_read_file(path, &text, &len, &err) != 0 ||
            kv_read_file(old, &prev, &len, &err) != 0) {
            KV_CHECKF(0, "%s", err.msg);
            free(text);
            continue;
        }
        static const char mark[] =
            "--- kevo: log rotated; what came before is in the .1 file ---\n";
        KV_CHECK(strncmp(text, mark, strlen(mark)) == 0);
        snprintf(want, sizeof want, "flood: last line of rank %d, job %d\n", r, JOBS);
        KV_CHECK_STR_CONTAINS(text, want);
        KV_CHECK(strstr(prev, want) == NULL);
        /* the first job went with the .1 that the second rotation replaced */
        snprintf(want, sizeof want, "flood: last line of rank %d, job 1\n", r);
        KV_CHECK(strstr(text, want) == NULL && strstr(prev, want) == NULL);
        free(text);
        free(prev);
    }
}

/* Processes whose real uid is uid. */
static int count_uid(uid_t uid)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char path[300];
        struct stat st;
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s", de->d_name);
        if (stat(path, &st) == 0 && st.st_uid == uid)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void test_fork_bomb(void)
{
    if (geteuid() != 0) {
        printf("fork bomb: skipped (RLIMIT_NPROC and the uid's kill need kevo to run as root)\n");
        return;
    }
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/bomb-logs", base);
    kv_err err = {{0}};
    kv_group *g = new_group(5, logs, "", 0, 0, 48, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    KV_CHECKF(run_job(g, "fork-bomb", res, &err) == 0, "%s", err.msg);
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s", res->message);
    printf("fork bomb: %s\n", res->message);
    int forks = -1;
    const char *f = strstr(res->message, "forks:");
    if (f)
        forks = atoi(f + 6);
    KV_CHECKF(forks >= 1 && forks < 48, "forks %d", forks);
    KV_CHECK_STR_CONTAINS(res->message, "refused:EAGAIN");
    uid_t uid = UID_BASE + 5;
    KV_CHECK(count_uid(uid) > 2);
    kv_group_free(g);
    int left = 0;
    for (int i = 0; i < 100 && (left = count_uid(uid)) > 0; i++)
        usleep(20000);
    KV_CHECKF(left == 0, "%d processes of uid %u left after the group was freed", left, uid);
    free(res);
}

static void test_inbox(void)
{
    char src[4200], cache[4300], cand[4400], ref[4400], logs[4300];
    kv_err err = {{0}};
    const char *root = getenv("KEVO_SOURCE_DIR");
    KV_REQUIRE(root);
    snprintf(src, sizeof src, "%s/tests/fixtures/problems/good_basic", root);
    snprintf(cache, sizeof cache, "%s/cache", base);
    snprintf(cand, sizeof cand, "%s/candidate.so", cache);
    snprintf(ref, sizeof ref, "%s/reference.so", cache);
    snprintf(logs, sizeof logs, "%s/inbox-logs", base);
    KV_REQUIRE(kv_mkdir_p(cache, 0755, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(cand, "not really ELF", 14, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(ref, "not really ELF either", 21, &err) == 0);
    KV_REQUIRE(chmod(cand, 0644) == 0 && chmod(ref, 0644) == 0);
    setenv("KEVO_FAKE_TARGET", cand, 1);
    kv_group *g = new_group(7, logs, "", 0, 0, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job job;
    memset(&job, 0, sizeof job);
    job.id = 77;
    job.n_sizes = 1;
    job.trials = 1;
    snprintf(job.sizes[0], sizeof job.sizes[0], "inbox");
    KV_REQUIRE(strlen(src) < sizeof job.problem_dir && strlen(ref) < sizeof job.reference_so &&
               strlen(cand) < sizeof job.candidate_so);
    memcpy(job.problem_dir, src, strlen(src) + 1);
    memcpy(job.reference_so, ref, strlen(ref) + 1);
    memcpy(job.candidate_so, cand, strlen(cand) + 1);
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    KV_CHECKF(kv_group_run(g, &job, 30, res, &err) == 0, "%s", err.msg);
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s", res->message);
    printf("inbox: %s\n", res->message);
    KV_CHECK_STR_CONTAINS(res->message, "problem:ok");
    KV_CHECK_STR_CONTAINS(res->message, "/good_basic reference:ok");
    KV_CHECK_STR_CONTAINS(res->message, "candidate:ok candidate-path:/");
    KV_CHECK_STR_CONTAINS(res->message, "/inbox/job-77.so");
    KV_CHECK_STR_CONTAINS(res->message, "original:EACCES");
    /* the candidate's copy is gone with its job */
    const char *path = strstr(res->message, "candidate-path:");
    char copy[4096] = "";
    if (path)
        sscanf(path + strlen("candidate-path:"), "%4095s", copy);
    struct stat st;
    KV_CHECKF(copy[0] && stat(copy, &st) != 0, "%s still exists after its job", copy);
    kv_group_free(g);
    free(res);
}

/* Two groups with one uid: the kill of the uid would reach both, so the second is refused. */
static void test_uid_in_use_refused(void)
{
    if (geteuid() != 0) {
        printf("uid in use: skipped (the workers get a uid of their own only as root)\n");
        return;
    }
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/uid-logs", base);
    kv_err err = {{0}};
    kv_group *a = new_group(9, logs, "", 0, 0, 0, &err);
    KV_CHECKF(a != NULL, "%s", err.msg);
    if (!a)
        return;
    KV_CHECK(kv_group_wait_ready(a, &err) == 0);
    kv_group *b = new_group(9, logs, "", 0, 0, 0, &err);
    KV_CHECK(b == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "already runs processes");
    kv_group_free(b);
    /* the refused group left the running one's folder alone: it restarts */
    KV_CHECK(kv_group_start(a, &err) == 0 && kv_group_wait_ready(a, &err) == 0);
    kv_group_free(a);
}

/* One job of `behaviour` on a fresh group; its message (static), or NULL. */
static const char *probe(int index, const char *behaviour)
{
    static kv_job_result res;
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/%s-logs", base, behaviour);
    kv_err err = {{0}};
    kv_group *g = new_group(index, logs, "", 0, 0, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return NULL;
    int rc = run_job(g, behaviour, &res, &err);
    KV_CHECKF(rc == 0 && res.verdict == KV_VERDICT_OK, "%s %s", err.msg, res.message);
    kv_group_free(g);
    printf("%s: %s\n", behaviour, res.message);
    return rc == 0 ? res.message : NULL;
}

static void test_lockdown(void)
{
    const char *m = probe(10, "lockdown");
    static const char *const refused[] = {
        "proc-mem:EACCES",     "ptrace:EPERM",  "vm-writev:EPERM", "raw-ptrace:EPERM", "exec:EPERM",
        "mprotect-exec:EPERM", "unshare:EPERM", "dumpable:EPERM",  "poked:1"};
    for (size_t i = 0; m && i < sizeof refused / sizeof refused[0]; i++)
        KV_CHECK_STR_CONTAINS(m, refused[i]);
}

static const char *const planted[] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                                      "AWS_SECRET_ACCESS_KEY", "KEVO_PLANTED_SECRET"};

static void test_secrets(void)
{
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        char v[64];
        snprintf(v, sizeof v, "kevo-planted-%zu", i);
        KV_REQUIRE(setenv(planted[i], v, 1) == 0);
    }
    const char *m = probe(11, "secrets");
    if (m) {
        KV_CHECK_STR_CONTAINS(m, "secrets:none ");
        KV_CHECK_STR_CONTAINS(m, "path:set");
        kv_sandbox_support sup;
        kv_sandbox_probe(&sup);
        KV_CHECK_STR_CONTAINS(m, sup.net_ns ? "nccl-ifname:lo" : "nccl-ifname:");
    }
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++)
        unsetenv(planted[i]);
}

static void test_network(void)
{
    kv_sandbox_support sup;
    kv_sandbox_probe(&sup);
    if (!sup.net_ns) {
        printf("network: skipped (a network namespace per group needs kevo to run as root)\n");
        return;
    }
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    KV_REQUIRE(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 8) == 0 &&
               getsockname(l, (struct sockaddr *)&a, &len) == 0);
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    KV_REQUIRE(setenv("KEVO_FAKE_NET_PORT", port, 1) == 0);
    const char *m = probe(12, "network");
    if (m) {
        KV_CHECK(strstr(m, "connect:ok") == NULL);
        KV_CHECK_STR_CONTAINS(m, "loopback:ok");
    }
    int c = accept(l, NULL, NULL);
    KV_CHECKF(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
              "the host's listener on port %s accepted a connection from a worker", port);
    if (c >= 0)
        close(c);
    close(l);
    unsetenv("KEVO_FAKE_NET_PORT");
}

static void test_private_dir_refused(void)
{
    kv_err err = {{0}};
    kv_group *g = new_group(6, base, "/etc/ssl", 0, 0, 0, &err);
    KV_CHECK(g == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "lies inside /etc, which the workers may read");
    kv_group_free(g);
}

/* kevo eval --dump DIR: the workers write into the group's own dump/, and
 * kevo copies it to DIR, which keeps its owner and mode (before, as root, DIR
 * was chown'ed to the workers' uid and opened to them read-write). A link
 * the workers leave there is not copied: the job fails, naming it. */
static void test_dump(void)
{
    char logs[4200], user[4200], file[4400];
    snprintf(logs, sizeof logs, "%s/dump-logs", base);
    snprintf(user, sizeof user, "%s/user-dump", base);
    KV_REQUIRE(mkdir(user, 0751) == 0 && chmod(user, 0751) == 0);
    kv_err err = {{0}};
    dump_groups = 1;
    kv_group *g = new_group(13, logs, "", 0, 0, 0, &err);
    dump_groups = 0;
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (!g)
        return;
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    KV_CHECKF(run_dump_job(g, "dump", user, res, &err) == 0, "%s", err.msg);
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s", res->message);
    KV_CHECK_STR_CONTAINS(res->message, "dumped:ok");
    KV_CHECK(strstr(res->message, user) == NULL); /* the workers never see DIR */
    struct stat st;
    KV_CHECK(lstat(user, &st) == 0 && st.st_uid == geteuid() && st.st_gid == getegid() &&
             (st.st_mode & 07777) == 0751);
    for (int r = 0; r < W; r++) {
        snprintf(file, sizeof file, "%s/s/rank%d/inputs/x.bin", user, r);
        char *data = NULL, want[32];
        size_t len = 0;
        snprintf(want, sizeof want, "rank %d", r);
        KV_CHECKF(kv_read_file(file, &data, &len, &err) == 0 && strcmp(data, want) == 0, "%s",
                  err.msg);
        free(data);
        KV_CHECK(lstat(file, &st) == 0 && st.st_uid == geteuid());
    }
    KV_CHECKF(run_dump_job(g, "dump-link", user, res, &err) == 0, "%s", err.msg);
    KV_CHECK(res->verdict == KV_VERDICT_RUNTIME_ERROR);
    KV_CHECK_STR_CONTAINS(res->message, "the dump: ");
    KV_CHECK_STR_CONTAINS(res->message, "a symbolic link");
    snprintf(file, sizeof file, "%s/link", user);
    KV_CHECK(lstat(file, &st) != 0);
    KV_CHECK(lstat(user, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0751);
    kv_group_free(g);
    free(res);
}

/* A folder made first under the name a group's folder once had
 * (<tmp>/kevo-<pid>-g<G>, which anyone can predict) is neither used nor
 * removed: the group's folder is one mkdtemp made. */
static void test_predicted_name_unused(void)
{
    const char *tmp = getenv("TMPDIR");
    char squat[4200], marker[4300], logs[4200];
    snprintf(squat, sizeof squat, "%s/kevo-%d-g14", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    snprintf(marker, sizeof marker, "%s/made-first", squat);
    snprintf(logs, sizeof logs, "%s/squat-logs", base);
    KV_REQUIRE(mkdir(squat, 0777) == 0 && chmod(squat, 0777) == 0);
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(marker, "mine\n", 5, &err) == 0);
    kv_group *g = new_group(14, logs, "", 0, 0, 0, &err);
    KV_CHECKF(g != NULL, "%s", err.msg);
    if (g) {
        kv_job_result *res = calloc(1, sizeof *res);
        KV_REQUIRE(res);
        KV_CHECKF(run_job(g, "ok", res, &err) == 0 && res->verdict == KV_VERDICT_OK, "%s %s",
                  err.msg, res->message);
        free(res);
        kv_group_free(g);
    }
    struct stat st;
    KV_CHECK(stat(marker, &st) == 0);
    KV_CHECK(kv_test_rm_rf(squat) == 0);
}

int main(void)
{
    fake = getenv("KEVO_FAKE_WORKER");
    if (!fake || !*fake) {
        printf("skipped: KEVO_FAKE_WORKER is not set\n");
        return 77;
    }
    kv_sandbox_support sup;
    kv_sandbox_probe(&sup);
    if (!sup.landlock_abi) {
        printf("skipped: this kernel offers no Landlock\n");
        return 77;
    }
    char line[512];
    kv_sandbox_describe(&sup, 0, line, sizeof line);
    printf("%s\n", line);
    signals_scoped = sup.landlock_abi >= 6 || sup.root;
    signal(SIGUSR1, on_usr1);
    unsetenv("KEVO_FAKE_START");
    kv_test_fresh_dir(base, sizeof base, "confine");
    if (chmod(base, 0755) != 0) { /* the workers' uid walks through it to its scratch */
        perror(base);
        return 1;
    }
    KV_RUN(test_escape);
    KV_RUN(test_flood);
    KV_RUN(test_log_rotation);
    KV_RUN(test_fork_bomb);
    KV_RUN(test_inbox);
    KV_RUN(test_uid_in_use_refused);
    KV_RUN(test_private_dir_refused);
    KV_RUN(test_lockdown);
    KV_RUN(test_secrets);
    KV_RUN(test_network);
    KV_RUN(test_dump);
    KV_RUN(test_predicted_name_unused);
    return kv_test_summary();
}
