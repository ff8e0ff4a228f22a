/* test_gpu_eval.c — the evaluator on real GPUs (ctest label "gpu"; exit 77,
 * skipped, without two GPUs). On the allreduce problem:
 *  - every correct candidate in tests/candidates passes, with its timing
 *    spread (CV) printed;
 *  - every hostile candidate in tests/hostile gets the verdict its first
 *    line announces ("// expect: hang"), and the ordinary candidate that
 *    follows it evaluates correctly on the restarted group;
 *  - a hostile with "// no-faster-than: C.cu" (the memoizing ones, which
 *    skip work they think is done) is timed at no less than KV_HONEST_FLOOR
 *    of candidate C's time at every timed size: it found nothing to skip.
 *    The attack it stands for beat C by 1.5x at 16 MiB (5.8x its own honest
 *    time); honest, it is slower;
 *  - on tests/gpu_problems/inflated_cost (allreduce whose cost model claims
 *    1000 times the bytes), the correct allreduce_nccl.cu and the reference
 *    alone are implausible, the message naming the reference and its cost
 *    model.
 * It runs with NCCL_NVLS_ENABLE=0, so the workers trap the driver's
 * multicast entry points, with secrets planted in its environment
 * (tests/hostile/secret_env.cu looks for them), and with a listener on
 * 127.0.0.1:KV_HOSTILE_NET_PORT in the host's network namespace, which must
 * accept nothing (tests/hostile/net_connect.cu tries it).
 * Prints a table: candidate, expected, got, seconds, restart seconds. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

/* where tests/hostile/net_connect.cu connects */
#define KV_HOSTILE_NET_PORT 47823

static char root[4096];

static int world = 2; /* KEVO_GPU_TEST_WORLD */

/* A memoizing hostile's time against the honest candidate's: a margin far
 * beyond the noise between two evaluations, far below what skipping gains. */
#define KV_HONEST_FLOOR 0.8

/* The correct candidates' times per size, for "// no-faster-than:". */
#define MAX_TIMED 32
static struct {
    char file[256];
    int n_sizes;
    char size[KV_JOB_MAX_SIZES][64];
    double us[KV_JOB_MAX_SIZES];
} timed[MAX_TIMED];
static int n_timed;
static char log_dir[4096];
static int output_cap_kib;

/* The rest of the line after `key` in src (spaces skipped), into out; NULL without one. */
static const char *header_value(const char *src, const char *key, char *out, size_t cap)
{
    const char *e = strstr(src, key);
    if (!e)
        return NULL;
    e += strlen(key);
    while (*e == ' ')
        e++;
    size_t n = 0;
    while (e[n] && e[n] != '\n' && n + 1 < cap)
        n++;
    memcpy(out, e, n);
    out[n] = 0;
    return out;
}

/* The verdict word of "// expect: <verdict>", into out; NULL without one. */
static const char *expected_verdict(const char *src, char *out, size_t cap)
{
    if (!header_value(src, "// expect:", out, cap))
        return NULL;
    out[strcspn(out, " ")] = 0;
    return out;
}

/* A candidate is one file: a hostile that shares its device code with others
 * through a header beside it (#include "memo.cuh") is evaluated with the
 * header's text in place of that line (of the first such line). */
static char *splice_local_header(const char *path, char *src, size_t *len)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return src;
    *slash = 0;
    static const char key[] = "#include \"";
    for (const char *line = src; *line;
         line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
        const char *name = line + strlen(key), *end;
        if (strncmp(line, key, strlen(key)) != 0 || !(end = strchr(name, '"')) || end - name > 200)
            continue;
        char hpath[8400], *h = NULL;
        size_t hlen = 0;
        snprintf(hpath, sizeof hpath, "%s/%.*s", dir, (int)(end - name), name);
        if (access(hpath, R_OK) != 0 || kv_read_file(hpath, &h, &hlen, NULL) != 0)
            continue; /* not beside it: one of kevo's include paths */
        size_t head = (size_t)(line - src);
        const char *tail = strchr(end, '\n');
        tail = tail ? tail : end + strlen(end);
        size_t tlen = strlen(tail);
        char *out = malloc(head + hlen + tlen + 1);
        if (out) {
            memcpy(out, src, head);
            memcpy(out + head, h, hlen);
            memcpy(out + head + hlen, tail, tlen + 1);
            *len = head + hlen + tlen;
            free(src);
            src = out;
        }
        free(h);
        break;
    }
    return src;
}

static int eval_file(kv_evaluator *ev, const kv_problem *p, const char *path, kv_eval_report *r)
{
    char *src = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    if (kv_read_file(path, &src, &len, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    src = splice_local_header(path, src, &len);
    int rc = kv_evaluate(ev, p, src, len, r, &err);
    if (rc != 0)
        fprintf(stderr, "kv_evaluate %s: %s\n", path, err.msg);
    free(src);
    return rc;
}

static void run_ordinary(kv_evaluator *ev, const kv_problem *p, const char *after)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/candidates/allreduce_nccl.cu", root);
    kv_eval_report r;
    int rc = eval_file(ev, p, path, &r);
    KV_CHECKF(rc == 0 && r.verdict == KV_VERDICT_OK, "ordinary candidate after %s: %s (%s)", after,
              rc == 0 ? kv_verdict_name(r.verdict) : "evaluation failed", rc == 0 ? r.message : "");
    if (rc == 0)
        kv_eval_report_free(&r);
}

/* Bytes of every worker log (and rotated .1 file) in the log folder. */
static long long logs_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    long long n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[8400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, "worker-", 7) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            n += st.st_size;
    }
    if (d)
        closedir(d);
    return n;
}

/* A memoizing hostile that got ok: timed at no less than KV_HONEST_FLOOR of
 * the honest candidate's time at each size both were timed at. */
static void check_no_faster(const char *name, const char *honest, const kv_eval_report *r)
{
    int found = -1;
    for (int i = 0; i < n_timed; i++)
        if (strcmp(timed[i].file, honest) == 0)
            found = i;
    KV_CHECKF(found >= 0, "%s: no time of the honest candidate %s (run the candidates first)", name,
              honest);
    if (found < 0)
        return;
    for (int s = 0; s < r->n_sizes; s++)
        for (int h = 0; r->sizes[s].timed && h < timed[found].n_sizes; h++) {
            if (strcmp(timed[found].size[h], r->sizes[s].name) != 0 || timed[found].us[h] <= 0)
                continue;
            double ratio = r->sizes[s].cand.median / timed[found].us[h];
            printf("    %-12s %9.2f us, %.2fx the time of %s (floor %.2f)\n", r->sizes[s].name,
                   r->sizes[s].cand.median, ratio, honest, KV_HONEST_FLOOR);
            KV_CHECKF(ratio >= KV_HONEST_FLOOR,
                      "%s at %s: %.2f us, %.2fx the time of the honest %s: it skipped work", name,
                      r->sizes[s].name, r->sizes[s].cand.median, ratio, honest);
        }
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void test_candidates(kv_evaluator *ev, const kv_problem *p, const char *dir, int hostile)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/%s", root, dir);
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    KV_REQUIRE(n > 0);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        if (len < 4 || strcmp(name + len - 3, ".cu") != 0) {
            free(names[i]);
            continue;
        }
        char file[8400];
        snprintf(file, sizeof file, "%s/%s", path, name);
        char *src = NULL;
        size_t slen;
        char want[32] = "ok", want_msg[160] = "", honest[128] = "";
        if (hostile) {
            if (kv_read_file(file, &src, &slen, NULL) != 0 ||
                !expected_verdict(src, want, sizeof want))
                snprintf(want, sizeof want, "?");
            else if (!header_value(src, "// expect-message:", want_msg, sizeof want_msg))
                want_msg[0] = 0;
            if (src && !header_value(src, "// no-faster-than:", honest, sizeof honest))
                honest[0] = 0;
            free(src);
        }
        kv_eval_report r;
        long long logs_before = logs_bytes(log_dir);
        int rc = eval_file(ev, p, file, &r);
        long long grew = logs_bytes(log_dir) - logs_before;
        const char *got = rc == 0 ? kv_verdict_name(r.verdict) : "(kevo failed)";
        char cell[KV_CELL_NAME_MAX];
        printf("%-12s %-28s expect %-14s got %-14s %6.1f s  restart %.2f s  logs +%lld KiB  %s\n",
               hostile ? "hostile" : "candidate", name, want, got, rc == 0 ? r.wall_s : 0.0,
               kv_evaluator_last_restart_s(ev), grew >> 10,
               rc == 0 ? kv_eval_cell_name(&r, cell) : "");
        /* per rank and job: the first and the last worker_output_kib, a cut mark, the
         * restart's start line */
        KV_CHECKF(grew <= (long long)world * (2 * (output_cap_kib << 10) + 8192),
                  "%s: the worker logs grew by %lld bytes (cap %d KiB per job and rank)", name,
                  grew, output_cap_kib);
        if (rc == 0 && r.verdict != KV_VERDICT_OK)
            printf("    %.300s\n", r.message);
        if (rc == 0 && !hostile)
            for (int s = 0; s < r.n_sizes; s++)
                if (r.sizes[s].timed)
                    printf(
                        "    %-12s ref %9.2f us (cv %4.1f%%)  cand %9.2f us (cv %4.1f%%)  %.2fx\n",
                        r.sizes[s].name, r.sizes[s].ref.median, 100 * r.sizes[s].ref.cv,
                        r.sizes[s].cand.median, 100 * r.sizes[s].cand.cv, r.sizes[s].speedup);
        fflush(stdout);
        KV_CHECKF(strcmp(got, want) == 0, "%s: expected %s, got %s", name, want, got);
        if (rc == 0 && want_msg[0])
            KV_CHECKF(strstr(r.message, want_msg) != NULL, "%s: the message lacks \"%s\": %s", name,
                      want_msg, r.message);
        if (rc == 0 && !hostile && r.verdict == KV_VERDICT_OK && n_timed < MAX_TIMED) {
            snprintf(timed[n_timed].file, sizeof timed[n_timed].file, "%s", name);
            for (int s = 0; s < r.n_sizes; s++) {
                snprintf(timed[n_timed].size[s], sizeof timed[n_timed].size[s], "%s",
                         r.sizes[s].name);
                timed[n_timed].us[s] = r.sizes[s].timed ? r.sizes[s].cand.median : 0;
            }
            timed[n_timed++].n_sizes = r.n_sizes;
        }
        if (rc == 0 && honest[0] && r.verdict == KV_VERDICT_OK)
            check_no_faster(name, honest, &r);
        if (rc == 0)
            kv_eval_report_free(&r);
        if (hostile)
            run_ordinary(ev, p, name);
        free(names[i]);
    }
    free(names);
}

/* Inputs the distributions cannot describe: a permutation input and the
 * problem's inputs.cu hook, on a small local problem made for this test. */
static void test_inputs_machinery(const kv_eval_opts *base)
{
    kv_eval_opts o = *base;
    o.n_sizes = 0; /* every size of this problem, the validation size too */
    kv_err err = {{0}};
    kv_problem p;
    char dir[4200], file[4300];
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/gather_hook", root);
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    kv_evaluator *ev;
    KV_REQUIRE(kv_evaluator_new(&o, &ev, &err) == 0);
    static const struct {
        const char *file, *want;
    } cases[] = {{"reference.cu", "ok"}, {"wrong_scale.cu", "mismatch"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(file, sizeof file, "%s/%s", dir, cases[i].file);
        kv_eval_report r;
        int rc = eval_file(ev, &p, file, &r);
        const char *got = rc == 0 ? kv_verdict_name(r.verdict) : "(kevo failed)";
        printf("inputs       gather_hook/%-16s expect %-14s got %-14s %s\n", cases[i].file,
               cases[i].want, got, rc == 0 ? r.message : "");
        KV_CHECKF(strcmp(got, cases[i].want) == 0, "gather_hook/%s: expected %s, got %s",
                  cases[i].file, cases[i].want, got);
        if (rc == 0)
            kv_eval_report_free(&r);
    }
    kv_evaluator_free(ev);
    kv_problem_free(&p);
}

/* A cost model that claims more bytes than the kernels move: every time is
 * below the floor, the reference's first. */
static void test_implausible(const kv_eval_opts *o)
{
    kv_err err = {{0}};
    kv_problem p;
    char dir[4200], file[4300];
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/inflated_cost", root);
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    kv_evaluator *ev;
    KV_REQUIRE(kv_evaluator_new(o, &ev, &err) == 0);
    snprintf(file, sizeof file, "%s/tests/candidates/allreduce_nccl.cu", root);
    for (int baseline = 0; baseline < 2; baseline++) {
        kv_eval_report r;
        int rc = baseline ? kv_baseline(ev, &p, &r, &err) : eval_file(ev, &p, file, &r);
        const char *got = rc == 0 ? kv_verdict_name(r.verdict) : "(kevo failed)";
        printf("implausible  inflated_cost/%-14s expect %-14s got %-14s %s\n",
               baseline ? "(baseline)" : "allreduce_nccl", "implausible", got,
               rc == 0 ? r.message : err.msg);
        KV_CHECKF(rc == 0 && r.verdict == KV_VERDICT_IMPLAUSIBLE, "inflated_cost: got %s", got);
        if (rc != 0)
            continue;
        KV_CHECK_STR_CONTAINS(r.message, "the reference runs ");
        KV_CHECK_STR_CONTAINS(r.message, "below the floor of ");
        KV_CHECK_STR_CONTAINS(r.message, "the problem's cost model (problem.json, \"cost\") is "
                                         "wrong");
        KV_CHECK(r.speedup == 0);
        kv_eval_report_free(&r);
    }
    kv_evaluator_free(ev);
    kv_problem_free(&p);
}

/* The secrets tests/hostile/secret_env.cu looks for, as a user's shell
 * would hold them; kevo must pass none to a worker. */
static int plant_secrets(void)
{
    static const char *const names[] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                                        "AWS_SECRET_ACCESS_KEY", "KEVO_PLANTED_SECRET"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char v[64];
        snprintf(v, sizeof v, "kevo-planted-%zu", i);
        if (setenv(names[i], v, 1) != 0) {
            perror("setenv");
            return -1;
        }
    }
    return 0;
}

/* A non-blocking listener on 127.0.0.1:KV_HOSTILE_NET_PORT, or -1. */
static int open_listener(void)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(KV_HOSTILE_NET_PORT);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 16) != 0) {
        fprintf(stderr, "listener on 127.0.0.1:%d: %s\n", KV_HOSTILE_NET_PORT, strerror(errno));
        if (l >= 0)
            close(l);
        return -1;
    }
    return l;
}

int main(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    const char *worker = getenv("KEVO_WORKER");
    snprintf(root, sizeof root, "%s", src ? src : ".");
    if (getenv("KEVO_GPU_TEST_WORLD"))
        world = atoi(getenv("KEVO_GPU_TEST_WORLD"));
    if (world < 2 || world > 8)
        world = 2;
    if (!worker || access(worker, X_OK) != 0 || kv_test_gpu_count(worker) < world) {
        printf("skipped: needs %d GPUs and KEVO_WORKER\n", world);
        return 77;
    }
    /* NVLink multicast forbidden, as on the lent machines: the workers then arm their
     * run-time trap (worker/nvls_trap.c), which tests/hostile/multicast_elf_walk.cu needs */
    if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0) {
        perror("setenv NCCL_NVLS_ENABLE");
        return 1;
    }
    int listener = open_listener();
    if (plant_secrets() != 0 || listener < 0)
        return 1;
    kv_eval_opts o;
    kv_eval_defaults(&o, root);
    snprintf(o.worker_path, sizeof o.worker_path, "%s", worker);
    snprintf(o.log_dir, sizeof o.log_dir, "/tmp/kevo-gpu-test-logs");
    snprintf(log_dir, sizeof log_dir, "%s", o.log_dir);
    output_cap_kib = o.output_cap_kib;
    o.world = world;
    /* each candidate is judged on its own: several hostile ones share their device code
     * (their attacks are host code), which SASS dedup would call duplicates */
    o.sass_dedup = 0;
    printf("W=%d\n", world);
    kv_err err = {{0}};
    KV_CHECK(kv_mkdir_p(o.log_dir, 0755, &err) == 0);
    /* the screening protocol keeps the test short; hangs cost the deadline */
    o.warmup = 20;
    o.iters = 50;
    o.job_timeout_s = getenv("KEVO_GPU_TEST_TIMEOUT") ? atof(getenv("KEVO_GPU_TEST_TIMEOUT")) : 20;
    o.n_sizes = 3;
    snprintf(o.sizes[0], sizeof o.sizes[0], "64KiB");
    snprintf(o.sizes[1], sizeof o.sizes[1], "16MiB");
    snprintf(o.sizes[2], sizeof o.sizes[2], "validation");
    kv_problem p;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/problems/allreduce", root);
    if (kv_problem_load(dir, &p, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    kv_evaluator *ev;
    if (kv_evaluator_new(&o, &ev, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* "candidates", "hostile", "inputs" or "implausible" */
    const char *only = getenv("KEVO_GPU_TEST_ONLY");
    if (!only || strcmp(only, "inputs") == 0)
        test_inputs_machinery(&o);
    if (!only || strcmp(only, "implausible") == 0)
        test_implausible(&o);
    if (!only || strcmp(only, "candidates") == 0)
        test_candidates(ev, &p, "candidates", 0);
    if (!only || strcmp(only, "hostile") == 0)
        test_candidates(ev, &p, "hostile", 1);
    int c = accept(listener, NULL, NULL);
    KV_CHECKF(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
              "the listener on 127.0.0.1:%d accepted a connection from candidate code",
              KV_HOSTILE_NET_PORT);
    if (c >= 0)
        close(c);
    close(listener);
    kv_evaluator_free(ev);
    kv_problem_free(&p);
    return kv_test_summary();
}
