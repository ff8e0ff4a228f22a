/* test_compile.c — the compile pipeline with the real nvcc: results, the
 * cache, SASS dedup, errors, timeouts, a missing toolchain, the pool.
 *
 * Exits 77 (skipped) when nvcc cannot be found. The parts that need a
 * successful compilation also need cuobjdump (with nvdisasm); without it
 * they are reported as skipped and the rest still runs. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "evaluator/compile/compile_internal.h" /* kv_compile_trim_errors */
#include "common/clock.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

static kv_compile_opts base; /* defaults with a fresh cache */
static int have_cuobjdump;
static char scratch[1024]; /* a fresh directory for scripts */

static double now_s(void)
{
    return (double)kv_monotonic_ns() / 1e9;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int exec_exists(const char *path)
{
    return access(path, X_OK) == 0;
}

static int find_exec(const char *env, const char *name, const char *fallback, char *out, size_t cap)
{
    const char *e = getenv(env);
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return exec_exists(out);
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(out, cap, "%.*s/%s", (int)n, path, name);
        if (n > 0 && exec_exists(out))
            return 1;
        path += n + (path[n] == ':');
    }
    snprintf(out, cap, "%s", fallback);
    return exec_exists(out);
}

/* cuobjdump as compile.c finds it: $KEVO_CUOBJDUMP, next to nvcc, PATH,
 * /usr/local/cuda/bin */
static int find_cuobjdump(const char *nvcc)
{
    char path[4096];
    const char *e = getenv("KEVO_CUOBJDUMP");
    if (e && *e)
        return exec_exists(e);
    char real[4096];
    const char *cands[2] = {nvcc, realpath(nvcc, real) ? real : NULL};
    for (int i = 0; i < 2; i++) {
        const char *slash = cands[i] ? strrchr(cands[i], '/') : NULL;
        if (!slash)
            continue;
        snprintf(path, sizeof path, "%.*s/cuobjdump", (int)(slash - cands[i]), cands[i]);
        if (exec_exists(path))
            return 1;
    }
    return find_exec("KEVO_NO_SUCH_VARIABLE", "cuobjdump", "/usr/local/cuda/bin/cuobjdump", path,
                     sizeof path);
}

/* Number of temporary compile directories left in the cache. */
static int count_tmp_dirs(const char *cache)
{
    DIR *d = opendir(cache);
    int n = 0;
    struct dirent *de;
    if (!d)
        return -1;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, ".tmp-", 5) == 0)
            n++;
    closedir(d);
    return n;
}

/* 1 when pid is gone (or a zombie nobody of ours has to reap) */
static int process_gone(pid_t pid)
{
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

static int wait_gone(pid_t pid, double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end) {
        if (process_gone(pid))
            return 1;
        usleep(10000);
    }
    return process_gone(pid);
}

static const char *src_a =
    "#include <kevo/kernel.h>\n"
    "__global__ void peer_copy(const float4 *src, float4 *dst, size_t n)\n"
    "{\n"
    "    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (size_t)gridDim.x * blockDim.x)\n"
    "        dst[i] = src[i];\n"
    "}\n"
    "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
    "{\n"
    "    int next = (ctx->rank + 1) % ctx->world;\n"
    "    peer_copy<<<32, 256, 0, ctx->stream>>>((const float4 *)ctx->inputs[0].ptr,\n"
    "        (float4 *)ctx->outputs[0].peer[next], ctx->inputs[0].bytes / 16);\n"
    "    return cudaGetLastError() != cudaSuccess;\n"
    "}\n";

/* the same program with different comments */
static const char *src_a_commented =
    "// the same copy, now documented\n"
    "#include <kevo/kernel.h>\n"
    "/* copies n float4 from src to dst */\n"
    "__global__ void peer_copy(const float4 *src, float4 *dst, size_t n)\n"
    "{\n"
    "    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (size_t)gridDim.x * blockDim.x)\n"
    "        dst[i] = src[i]; // 16 bytes at a time\n"
    "}\n"
    "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
    "{\n"
    "    int next = (ctx->rank + 1) % ctx->world;\n"
    "    peer_copy<<<32, 256, 0, ctx->stream>>>((const float4 *)ctx->inputs[0].ptr,\n"
    "        (float4 *)ctx->outputs[0].peer[next], ctx->inputs[0].bytes / 16);\n"
    "    return cudaGetLastError() != cudaSuccess;\n"
    "}\n";

/* the same kernel launched with another grid: the same SASS, other host code */
static const char *src_a_grid64 =
    "#include <kevo/kernel.h>\n"
    "__global__ void peer_copy(const float4 *src, float4 *dst, size_t n)\n"
    "{\n"
    "    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (size_t)gridDim.x * blockDim.x)\n"
    "        dst[i] = src[i];\n"
    "}\n"
    "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
    "{\n"
    "    int next = (ctx->rank + 1) % ctx->world;\n"
    "    peer_copy<<<64, 256, 0, ctx->stream>>>((const float4 *)ctx->inputs[0].ptr,\n"
    "        (float4 *)ctx->outputs[0].peer[next], ctx->inputs[0].bytes / 16);\n"
    "    return cudaGetLastError() != cudaSuccess;\n"
    "}\n";

static void test_compile_and_cache(void)
{
    if (!have_cuobjdump) {
        printf("skipped test_compile_and_cache: cuobjdump not found\n");
        return;
    }
    kv_compile_result r, r2, r3;
    kv_err err;
    double t0 = now_s();
    KV_REQUIRE(kv_compile(&base, src_a, strlen(src_a), &r, &err) == 0);
    double cold = now_s() - t0;
    KV_CHECKF(r.status == KV_COMPILE_OK, "status %d: %s", r.status, kv_test_str(r.errors));
    KV_CHECK(!r.cached);
    KV_CHECK(r.seconds > 0);
    KV_CHECK(strlen(r.key) == 64);
    KV_CHECK(strlen(r.sass_hash) == 64);
    KV_CHECK(file_exists(r.so_path));
    KV_CHECK_STR_CONTAINS(r.sass, "Function : _Z9peer_copy");
    KV_CHECK_STR_CONTAINS(r.ptx, ".version");
    KV_CHECK_STR_CONTAINS(r.report, "registers");
    KV_CHECK_STR_CONTAINS(r.imports, "cudaGetLastError\n");
    KV_CHECK_STR_CONTAINS(r.imports, "__cudaRegisterFatBinary\n");
    KV_CHECK(strstr(kv_test_str(r.imports), "@") == NULL);
    static const char *const files[] = {"cand.so",     "cand.sass",  "cand.ptx",
                                        "imports.txt", "report.txt", "candidate.cu"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", r.dir, files[i]);
        KV_CHECKF(file_exists(path), "%s", path);
    }
    KV_CHECK(count_tmp_dirs(base.cache_dir) == 0);

    t0 = now_s();
    KV_REQUIRE(kv_compile(&base, src_a, strlen(src_a), &r2, &err) == 0);
    double hit = now_s() - t0;
    KV_CHECK(r2.status == KV_COMPILE_OK && r2.cached);
    KV_CHECK(strcmp(r.key, r2.key) == 0);
    KV_CHECK(strcmp(r.sass_hash, r2.sass_hash) == 0);
    KV_CHECK(strcmp(r.so_path, r2.so_path) == 0);
    KV_CHECK(r2.seconds == 0);
    KV_CHECKF(hit < 1.0, "cache hit took %.3f s", hit);
    KV_CHECK_STR_CONTAINS(r2.report, "registers");
    printf("cold compile %.2f s (nvcc+cuobjdump %.2f s), cache hit %.4f s\n", cold, r.seconds, hit);

    KV_REQUIRE(kv_compile(&base, src_a_commented, strlen(src_a_commented), &r3, &err) == 0);
    KV_CHECKF(r3.status == KV_COMPILE_OK, "%s", kv_test_str(r3.errors));
    KV_CHECK(!r3.cached);
    KV_CHECK(strcmp(r.key, r3.key) != 0);
    KV_CHECKF(strcmp(r.sass_hash, r3.sass_hash) == 0, "%s vs %s", r.sass_hash, r3.sass_hash);

    /* the same kernel, another grid chosen on the host: the SASS is the same,
     * the dedup key is not (a template move on a host-only parameter is a
     * new program) */
    kv_compile_result grid64;
    KV_REQUIRE(kv_compile(&base, src_a_grid64, strlen(src_a_grid64), &grid64, &err) == 0);
    KV_CHECKF(grid64.status == KV_COMPILE_OK, "%s", kv_test_str(grid64.errors));
    KV_CHECKF(grid64.sass && r.sass && strcmp(r.sass, grid64.sass) == 0, "the SASS differs");
    KV_CHECKF(strcmp(r.sass_hash, grid64.sass_hash) != 0, "host code ignored: %s",
              grid64.sass_hash);
    kv_compile_result_free(&grid64);

    /* a large kernel's SASS passes 1 MiB: its entry still loads from the cache */
    char sass_path[4200];
    snprintf(sass_path, sizeof sass_path, "%s/cand.sass", r.dir);
    FILE *f = fopen(sass_path, "a");
    KV_REQUIRE(f);
    for (int i = 0; i < 40000; i++)
        fprintf(f, "        /*%04x*/  NOP ;  /* padding line of a large kernel */\n", i);
    KV_REQUIRE(fclose(f) == 0);
    kv_compile_result r4;
    KV_REQUIRE(kv_compile(&base, src_a, strlen(src_a), &r4, &err) == 0);
    KV_CHECKF(r4.status == KV_COMPILE_OK && r4.cached, "status %d, cached %d: %s", r4.status,
              r4.cached, kv_test_str(r4.errors));
    KV_CHECKF(r4.sass && strlen(r4.sass) > ((size_t)2 << 20), "SASS of %zu bytes",
              r4.sass ? strlen(r4.sass) : 0);
    kv_compile_result_free(&r4);

    kv_compile_result_free(&r);
    kv_compile_result_free(&r2);
    kv_compile_result_free(&r3);
    KV_CHECK(r.sass == NULL && r.errors == NULL);
}

/* A candidate that includes a file outside the compile step's roots (the
 * run directory, /root): compile_error, and nothing of the file's content in
 * the message, the report or the cache. */
static void test_include_outside(void)
{
    char dir[1200], secret[1300], src[2048];
    snprintf(dir, sizeof dir, "%s/run-dir", scratch);
    snprintf(secret, sizeof secret, "%s/secret.txt", dir);
    kv_err err;
    static const char content[] = "kevo_secret_content_7391 leaked;\n";
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0 &&
               kv_write_file_atomic(secret, content, strlen(content), &err) == 0);
    snprintf(src, sizeof src,
             "#include \"%s\"\nextern \"C\" int kevo_init(void *c) { return 0; }\n", secret);
    kv_compile_result r;
    KV_REQUIRE(kv_compile(&base, src, strlen(src), &r, &err) == 0);
    printf("include outside: %s\n", r.errors ? r.errors : "(no message)");
    KV_CHECK(r.status == KV_COMPILE_ERROR);
    KV_CHECK_STR_CONTAINS(r.errors, "secret.txt");
    KV_CHECK(!r.errors || strstr(r.errors, "kevo_secret_content") == NULL);
    KV_CHECK(!r.report || strstr(r.report, "kevo_secret_content") == NULL);
    kv_compile_result_free(&r);
}

/* An include that never ends or never arrives is a compile_error in
 * seconds, not a compiler growing without bound or waiting out the
 * timeout: a literal /dev/zero, a FIFO in an include folder and a name
 * climbing with ".." are refused before nvcc runs; /dev/zero named by a
 * macro (which no scan sees) meets the memory bound. */
static void test_endless_includes(void)
{
    kv_compile_opts o = base;
    o.timeout_s = 30; /* what the checks below must beat by far */
    char inc[1200], path[1400];
    snprintf(inc, sizeof inc, "%s/fifo-include", scratch);
    snprintf(path, sizeof path, "%s/kevo", inc);
    kv_err err;
    KV_REQUIRE(kv_mkdir_p(path, 0755, &err) == 0);
    char from[PATH_MAX + 32], *text = NULL;
    size_t len;
    snprintf(from, sizeof from, "%s/kevo/kernel.h", base.include_dir);
    snprintf(path, sizeof path, "%s/kevo/kernel.h", inc);
    KV_REQUIRE(kv_read_file(from, &text, &len, &err) == 0 &&
               kv_write_file_atomic(path, text, len, &err) == 0);
    free(text);
    snprintf(path, sizeof path, "%s/pipe.h", inc);
    KV_REQUIRE(mkfifo(path, 0644) == 0 || errno == EEXIST);
    snprintf(o.include_dir, sizeof o.include_dir, "%s", inc);

    static const struct {
        const char *src, *says;
    } cases[] = {
        {"#include \"/dev/zero\"\n", "/dev/zero is a character device, not a regular file"},
        {"#include <kevo/kernel.h>\n# /* */ include \"pipe.h\"\n", "pipe.h is a FIFO"},
        {"%:include <../../../../../../../../dev/zero>\n", "may not climb out"},
        {"#if __has_include(\"/dev/zero\")\n#endif\n", "/dev/zero is a character device"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_compile_result r;
        double t0 = now_s();
        KV_REQUIRE(kv_compile(&o, cases[i].src, strlen(cases[i].src), &r, &err) == 0);
        double took = now_s() - t0;
        KV_CHECKF(r.status == KV_COMPILE_ERROR && took < 5, "case %zu: status %d after %.1f s", i,
                  (int)r.status, took);
        KV_CHECK_STR_CONTAINS(r.errors, cases[i].says);
        KV_CHECK_STR_CONTAINS(r.errors, "candidate.cu:");
        kv_compile_result_free(&r);
    }

    /* a name the preprocessor computes: the memory bound ends it */
    static const char macro[] = "#define ZERO \"/dev/zero\"\n#include ZERO\n";
    o.mem_max = (size_t)1 << 30;
    kv_compile_result r;
    double t0 = now_s();
    KV_REQUIRE(kv_compile(&o, macro, strlen(macro), &r, &err) == 0);
    double took = now_s() - t0;
    struct rusage ru;
    KV_REQUIRE(getrusage(RUSAGE_CHILDREN, &ru) == 0);
    printf("macro include of /dev/zero: %.1f s, the largest child %ld MiB: %s\n", took,
           ru.ru_maxrss / 1024, r.errors ? r.errors : "(no message)");
    KV_CHECKF(r.status == KV_COMPILE_ERROR && took < 20, "status %d after %.1f s", (int)r.status,
              took);
    KV_CHECK_STR_CONTAINS(r.errors, "out of memory");
    KV_CHECKF((size_t)ru.ru_maxrss * 1024 <= o.mem_max, "a child grew to %ld KiB", ru.ru_maxrss);
    kv_compile_result_free(&r);
}

static void test_syntax_error(void)
{
    const char *src = "#include <kevo/kernel.h>\n"
                      "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
                      "{\n"
                      "    (void)ctx;\n"
                      "    int x = 1\n"
                      "    return x;\n"
                      "}\n";
    kv_compile_result r;
    kv_err err;
    KV_REQUIRE(kv_compile(&base, src, strlen(src), &r, &err) == 0);
    KV_CHECK(r.status == KV_COMPILE_ERROR);
    /* nvcc reports the missing ';' on the next line */
    KV_CHECK_STR_CONTAINS(r.errors, "candidate.cu(6): error");
    KV_CHECK_STR_CONTAINS(r.errors, "expected a \";\"");
    KV_CHECK(strstr(kv_test_str(r.errors), ".tmp-") == NULL);
    KV_CHECK(strstr(kv_test_str(r.errors), base.cache_dir) == NULL);
    KV_CHECK(r.sass == NULL && r.so_path[0] == '\0');
    /* errors are not cached entries */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", base.cache_dir, r.key);
    KV_CHECK(!file_exists(dir));
    KV_CHECK(count_tmp_dirs(base.cache_dir) == 0);
    kv_compile_result_free(&r);

    /* an error in a kernel, further down */
    const char *src2 = "#include <kevo/kernel.h>\n"
                       "__global__ void k(float *p)\n"
                       "{\n"
                       "    p[threadIdx.x] = not_declared;\n"
                       "}\n"
                       "extern \"C\" int kevo_run(kevo_ctx *ctx) { (void)ctx; return 0; }\n";
    KV_REQUIRE(kv_compile(&base, src2, strlen(src2), &r, &err) == 0);
    KV_CHECK(r.status == KV_COMPILE_ERROR);
    KV_CHECK_STR_CONTAINS(r.errors, "candidate.cu(4): error: identifier \"not_declared\"");
    KV_CHECK_STR_CONTAINS(r.errors, "p[threadIdx.x] = not_declared;"); /* context */
    kv_compile_result_free(&r);
}

/* A fake nvcc that answers --version and otherwise sleeps in a grandchild,
 * whose pid it writes where a confined compile step may: its output, and
 * sleep.pid in its own folder (under the cache's .tmp-*). */
static void write_sleeper(char *path, size_t cap)
{
    snprintf(path, cap, "%s/slow-nvcc", scratch);
    static const char script[] =
        "#!/bin/sh\n"
        "if [ \"$1\" = --version ]; then echo 'fake nvcc for kevo tests'; exit 0; fi\n"
        "echo starting >&2\n"
        "sleep 30 &\n"
        "echo \"sleeper-pid: $!\" >&2\n"
        "echo $! > sleep.pid.tmp && mv sleep.pid.tmp sleep.pid\n"
        "wait\n";
    kv_err err;
    if (kv_write_file_atomic(path, script, strlen(script), &err) != 0 || chmod(path, 0755) != 0) {
        fprintf(stderr, "write_sleeper: %s\n", err.msg);
        exit(2);
    }
}

/* The pid in the sleep.pid of a compile folder under cache, waiting up to 3 s. */
static pid_t read_pid(const char *cache)
{
    for (int i = 0; i < 300; i++) {
        DIR *d = opendir(cache);
        struct dirent *de;
        pid_t pid = -1;
        while (d && pid < 0 && (de = readdir(d)) != NULL) {
            char path[8400];
            char *text = NULL;
            snprintf(path, sizeof path, "%s/%s/sleep.pid", cache, de->d_name);
            if (strncmp(de->d_name, ".tmp-", 5) == 0 && kv_read_file(path, &text, NULL, NULL) == 0)
                pid = (pid_t)atol(text);
            free(text);
        }
        if (d)
            closedir(d);
        if (pid > 0)
            return pid;
        usleep(10000);
    }
    return -1;
}

static void test_timeout(void)
{
    kv_compile_opts o = base;
    write_sleeper(o.nvcc, sizeof o.nvcc);
    o.timeout_s = 1.0;
    kv_compile_result r;
    kv_err err;
    double t0 = now_s();
    KV_REQUIRE(kv_compile(&o, src_a, strlen(src_a), &r, &err) == 0);
    double took = now_s() - t0;
    KV_CHECK(r.status == KV_COMPILE_TIMEOUT);
    KV_CHECKF(took < 3.0, "took %.2f s", took);
    KV_CHECK_STR_CONTAINS(r.errors, "timed out");
    const char *said = r.report ? strstr(r.report, "sleeper-pid: ") : NULL;
    pid_t sleeper = said ? (pid_t)atol(said + strlen("sleeper-pid: ")) : -1;
    KV_CHECKF(sleeper > 0, "%s", r.report ? r.report : "(no output)");
    if (sleeper > 0)
        KV_CHECKF(wait_gone(sleeper, 2.0), "sleep %ld still runs", (long)sleeper);
    /* nothing of ours is left to reap */
    KV_CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", o.cache_dir, r.key);
    KV_CHECK(!file_exists(dir));
    KV_CHECK(count_tmp_dirs(o.cache_dir) == 0);
    kv_compile_result_free(&r);
}

/* freeing a pool kills what it still runs */
static void test_pool_free_kills(void)
{
    kv_compile_opts o = base;
    write_sleeper(o.nvcc, sizeof o.nvcc);
    o.timeout_s = 60;
    o.jobs = 1;
    kv_compile_pool *p;
    kv_err err;
    uint64_t t;
    KV_REQUIRE(kv_compile_pool_new(&o, &p, &err) == 0);
    KV_CHECK(kv_compile_submit(p, src_a, strlen(src_a), &t, &err) == 0);
    KV_CHECK(kv_compile_poll(p, &err) == 0);
    int fds[4];
    KV_CHECK(kv_compile_pollfds(p, fds, 4) == 1);
    pid_t sleeper = read_pid(o.cache_dir);
    KV_CHECK(sleeper > 0);
    double t0 = now_s();
    kv_compile_pool_free(p);
    KV_CHECK(now_s() - t0 < 1.0);
    if (sleeper > 0)
        KV_CHECK(wait_gone(sleeper, 2.0));
    KV_CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    KV_CHECK(count_tmp_dirs(o.cache_dir) == 0);
}

static void test_missing_nvcc(void)
{
    kv_compile_opts o = base;
    snprintf(o.nvcc, sizeof o.nvcc, "%s/no-such-dir/nvcc", scratch);
    kv_compile_result r;
    kv_err err;
    KV_REQUIRE(kv_compile(&o, src_a, strlen(src_a), &r, &err) == 0);
    KV_CHECK(r.status == KV_COMPILE_FAILED);
    KV_CHECK_STR_CONTAINS(r.errors, o.nvcc);
    kv_compile_result_free(&r);

    /* through the environment, as kv_compile_defaults reads it */
    char *saved = getenv("KEVO_NVCC") ? strdup(getenv("KEVO_NVCC")) : NULL;
    KV_CHECK(setenv("KEVO_NVCC", "/nonexistent/kevo/nvcc", 1) == 0);
    kv_compile_defaults(&o, getenv("KEVO_SOURCE_DIR") ? getenv("KEVO_SOURCE_DIR") : ".");
    KV_CHECK(strcmp(o.nvcc, "/nonexistent/kevo/nvcc") == 0);
    snprintf(o.cache_dir, sizeof o.cache_dir, "%s", base.cache_dir);
    KV_REQUIRE(kv_compile(&o, src_a, strlen(src_a), &r, &err) == 0);
    KV_CHECK(r.status == KV_COMPILE_FAILED);
    KV_CHECK_STR_CONTAINS(r.errors, "/nonexistent/kevo/nvcc");
    kv_compile_result_free(&r);
    if (saved) {
        setenv("KEVO_NVCC", saved, 1);
        free(saved);
    } else {
        unsetenv("KEVO_NVCC");
    }

    /* not an executable */
    snprintf(o.nvcc, sizeof o.nvcc, "%s", scratch);
    KV_REQUIRE(kv_compile(&o, src_a, strlen(src_a), &r, &err) == 0);
    KV_CHECK(r.status == KV_COMPILE_FAILED);
    KV_CHECK_STR_CONTAINS(r.errors, scratch);
    kv_compile_result_free(&r);
}

static void test_defaults(void)
{
    kv_compile_opts o;
    char *saved_arch = getenv("KEVO_CUDA_ARCH") ? strdup(getenv("KEVO_CUDA_ARCH")) : NULL;
    char *saved_cache = getenv("KEVO_CACHE_DIR") ? strdup(getenv("KEVO_CACHE_DIR")) : NULL;
    unsetenv("KEVO_CUDA_ARCH");
    setenv("KEVO_CACHE_DIR", "/some/cache", 1);
    kv_compile_defaults(&o, ".");
    KV_CHECK(strcmp(o.arch, "sm_90a") == 0);
    KV_CHECK(strcmp(o.cache_dir, "/some/cache") == 0);
    KV_CHECK(o.timeout_s == 120.0 && o.jobs == 0);
    KV_CHECK(o.include_dir[0] == '/');
    KV_CHECK(strstr(o.include_dir, "/include") != NULL);
    KV_CHECK(strstr(o.patterns_dir, "/patterns") != NULL);
    setenv("KEVO_CUDA_ARCH", "sm_100a", 1);
    unsetenv("KEVO_CACHE_DIR");
    char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    kv_compile_defaults(&o, ".");
    KV_CHECK(strcmp(o.arch, "sm_100a") == 0);
    KV_CHECK(strcmp(o.cache_dir, "/xdg/kevo") == 0);
    if (saved_xdg) {
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
        free(saved_xdg);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    if (saved_arch) {
        setenv("KEVO_CUDA_ARCH", saved_arch, 1);
        free(saved_arch);
    } else {
        unsetenv("KEVO_CUDA_ARCH");
    }
    if (saved_cache) {
        setenv("KEVO_CACHE_DIR", saved_cache, 1);
        free(saved_cache);
    } else {
        unsetenv("KEVO_CACHE_DIR");
    }

    /* a bad architecture is refused up front */
    o = base;
    snprintf(o.arch, sizeof o.arch, "sm_90a;rm");
    kv_compile_pool *p;
    kv_err err;
    KV_CHECK(kv_compile_pool_new(&o, &p, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "sm_90a;rm");
}

/* small sources without the ABI header: quicker to compile */
static void pool_source(char *buf, size_t cap, int i)
{
    snprintf(buf, cap,
             "__global__ void kernel_%d(float *p) { p[threadIdx.x] *= %d.0f; }\n"
             "extern \"C\" int kevo_run(void *ctx) { (void)ctx; kernel_%d<<<1, 32>>>(0); "
             "return 0; }\n",
             i, i + 2, i);
}

static void test_pool(void)
{
    if (!have_cuobjdump) {
        printf("skipped test_pool: cuobjdump not found\n");
        return;
    }
    kv_compile_opts o = base;
    o.jobs = 2;
    kv_compile_pool *p;
    kv_err err;
    KV_REQUIRE(kv_compile_pool_new(&o, &p, &err) == 0);
    char src[4][512];
    uint64_t tickets[5];
    for (int i = 0; i < 4; i++) {
        pool_source(src[i], sizeof src[i], i);
        KV_CHECK(kv_compile_submit(p, src[i], strlen(src[i]), &tickets[i], &err) == 0);
    }
    /* the same source as #0 while #0 is queued or running */
    KV_CHECK(kv_compile_submit(p, src[0], strlen(src[0]), &tickets[4], &err) == 0);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < i; k++)
            KV_CHECK(tickets[i] != tickets[k]);

    /* drive it by hand, as the coordinator's event loop would */
    kv_compile_result res[5];
    int got[5] = {0}, n = 0, max_running = 0;
    double end = now_s() + 300;
    while (n < 5 && now_s() < end) {
        KV_CHECK(kv_compile_poll(p, &err) >= 0);
        int fds[8];
        int nf = kv_compile_pollfds(p, fds, 8);
        if (nf > max_running)
            max_running = nf;
        uint64_t t;
        kv_compile_result r;
        while (kv_compile_take(p, &t, &r) == 0) {
            int idx = -1;
            for (int i = 0; i < 5; i++)
                if (tickets[i] == t && !got[i])
                    idx = i;
            KV_CHECKF(idx >= 0, "unknown ticket %llu", (unsigned long long)t);
            if (idx < 0) {
                kv_compile_result_free(&r);
                continue;
            }
            res[idx] = r;
            got[idx] = 1;
            n++;
        }
        struct pollfd pfd[8];
        for (int i = 0; i < nf; i++) {
            pfd[i].fd = fds[i];
            pfd[i].events = POLLIN;
        }
        if (n < 5)
            poll(pfd, (nfds_t)nf, 100);
    }
    KV_CHECK(n == 5);
    KV_CHECKF(max_running <= 2, "%d compilations at once", max_running);
    KV_CHECK(max_running >= 1);
    for (int i = 0; i < 5; i++) {
        if (!got[i])
            continue;
        char name[64];
        snprintf(name, sizeof name, "Function : _Z8kernel_%dPf", i % 4);
        KV_CHECKF(res[i].status == KV_COMPILE_OK, "%d: %s", i, kv_test_str(res[i].errors));
        KV_CHECK_STR_CONTAINS(res[i].sass, name);
    }
    if (got[0] && got[4]) {
        KV_CHECK(strcmp(res[0].key, res[4].key) == 0);
        KV_CHECK(strcmp(res[0].so_path, res[4].so_path) == 0);
        /* compiled once: one of the two is a copy of the other's result */
        KV_CHECK(res[0].cached + res[4].cached == 1);
    }
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < i; k++)
            if (got[i] && got[k])
                KV_CHECK(strcmp(res[i].sass_hash, res[k].sass_hash) != 0);

    /* a source compiled before: served at once, without a process */
    uint64_t t;
    kv_compile_result r;
    KV_CHECK(kv_compile_submit(p, src[2], strlen(src[2]), &t, &err) == 0);
    KV_CHECK(kv_compile_poll(p, &err) == 1);
    KV_CHECK(kv_compile_pollfds(p, (int[4]){0}, 4) == 0);
    KV_CHECK(kv_compile_take(p, &t, &r) == 0 && r.cached && r.status == KV_COMPILE_OK);
    kv_compile_result_free(&r);
    KV_CHECK(kv_compile_take(p, &t, &r) == KV_NOTFOUND);
    KV_CHECK(kv_compile_wait_all(p, &err) == 0);

    for (int i = 0; i < 5; i++)
        if (got[i])
            kv_compile_result_free(&res[i]);
    kv_compile_pool_free(p);
    KV_CHECK(count_tmp_dirs(o.cache_dir) == 0);
}

/* wait_all with a mix of results: an error, a cached one, a failure */
static void test_wait_all(void)
{
    kv_compile_opts o = base;
    o.jobs = 2;
    kv_compile_pool *p;
    kv_err err;
    KV_REQUIRE(kv_compile_pool_new(&o, &p, &err) == 0);
    const char *bad = "this is not CUDA\n";
    uint64_t t1, t2, t;
    KV_CHECK(kv_compile_submit(p, bad, strlen(bad), &t1, &err) == 0);
    KV_CHECK(kv_compile_submit(p, bad, strlen(bad), &t2, &err) == 0);
    KV_CHECK(kv_compile_wait_all(p, &err) == 0);
    int seen = 0;
    kv_compile_result r;
    while (kv_compile_take(p, &t, &r) == 0) {
        KV_CHECK(t == t1 || t == t2);
        KV_CHECK(r.status == KV_COMPILE_ERROR);
        KV_CHECK_STR_CONTAINS(r.errors, "candidate.cu(1): error");
        kv_compile_result_free(&r);
        seen++;
    }
    KV_CHECK(seen == 2);
    kv_compile_pool_free(p);
}

static char *load_fixture(const char *name)
{
    char path[4096];
    const char *root = getenv("KEVO_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fixtures/compile/%s", root && *root ? root : ".", name);
    char *text = NULL;
    kv_err err;
    if (kv_read_file(path, &text, NULL, &err) != 0)
        fprintf(stderr, "fixture: %s\n", err.msg);
    return text;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void test_trim(void)
{
    /* saved from nvcc compiling tests/fixtures/compile/errors.cu as
     * /tmp/kevo-trim/candidate.cu */
    char *text = load_fixture("nvcc_errors.stderr");
    KV_REQUIRE(text != NULL);
    char *t = kv_compile_trim_errors(text, "/tmp/kevo-trim/candidate.cu", 40);
    KV_REQUIRE(t != NULL);
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(5): error: identifier \"undefined_thing\" is undefined");
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(7): error: expected a \";\"");
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(9): error: identifier \"missing\"");
    KV_CHECK_STR_CONTAINS(t, "    p[threadIdx.x] = undefined_thing;"); /* context line */
    KV_CHECK(strstr(t, "/tmp/kevo-trim") == NULL);
    KV_CHECK(strstr(t, "errors detected") == NULL);
    KV_CHECK(count_lines(t) == 9); /* 3 errors, each with its line and caret */
    free(t);

    /* a small budget: the first error whole, then a count of the rest */
    t = kv_compile_trim_errors(text, "/tmp/kevo-trim/candidate.cu", 3);
    KV_REQUIRE(t != NULL);
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(5): error");
    KV_CHECK(strstr(t, "candidate.cu(7)") == NULL);
    KV_CHECK_STR_CONTAINS(t, "(2 more errors)");
    free(t);
    free(text);

    /* warnings of the candidate are kept; ptxas info is not */
    text = load_fixture("nvcc_warning.stderr");
    KV_REQUIRE(text != NULL);
    t = kv_compile_trim_errors(text, "/tmp/kevo-trim/candidate.cu", 40);
    KV_REQUIRE(t != NULL);
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(4): warning #177-D: variable \"unused\"");
    KV_CHECK(strstr(t, "ptxas info") == NULL);
    KV_CHECK(strstr(t, "Remark") == NULL);
    free(t);
    free(text);

    /* a flood is capped at max_lines (+ the count line) */
    char flood[64 * 1024];
    size_t off = 0;
    for (int i = 1; i <= 200; i++)
        off += (size_t)snprintf(flood + off, sizeof flood - off,
                                "/x/candidate.cu(%d): error: bad thing %d\n  code %d;\n  ^\n\n", i,
                                i, i);
    t = kv_compile_trim_errors(flood, "/x/candidate.cu", 40);
    KV_REQUIRE(t != NULL);
    KV_CHECK(count_lines(t) <= 41);
    KV_CHECK_STR_CONTAINS(t, "candidate.cu(1): error: bad thing 1\n");
    KV_CHECK_STR_CONTAINS(t, "more errors)");
    free(t);

    /* nothing to report */
    t = kv_compile_trim_errors("ptxas info    : Used 10 registers\n", "candidate.cu", 40);
    KV_CHECK(t != NULL && t[0] == '\0');
    free(t);
    t = kv_compile_trim_errors(NULL, NULL, 0);
    KV_CHECK(t != NULL && t[0] == '\0');
    free(t);
}

/* open descriptors of this process (to catch leaks) */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

int main(void)
{
    char nvcc[4096];
    if (!find_exec("KEVO_NVCC", "nvcc", "/usr/local/cuda/bin/nvcc", nvcc, sizeof nvcc)) {
        printf("skipped: nvcc not found (%s)\n", nvcc);
        return 77;
    }
    const char *root = getenv("KEVO_SOURCE_DIR");
    kv_compile_defaults(&base, root && *root ? root : ".");
    snprintf(base.nvcc, sizeof base.nvcc, "%s", nvcc);
    kv_test_fresh_dir(base.cache_dir, sizeof base.cache_dir, "compile-cache");
    kv_test_fresh_dir(scratch, sizeof scratch, "compile-scratch");
    have_cuobjdump = find_cuobjdump(nvcc);
    if (!have_cuobjdump)
        printf("note: cuobjdump not found (set KEVO_CUOBJDUMP): "
               "successful compilations are not tested\n");

    int fds_before = count_fds();
    KV_RUN(test_trim);
    KV_RUN(test_defaults);
    KV_RUN(test_missing_nvcc);
    KV_RUN(test_timeout);
    KV_RUN(test_pool_free_kills);
    KV_RUN(test_syntax_error);
    KV_RUN(test_include_outside);
    KV_RUN(test_endless_includes);
    KV_RUN(test_wait_all);
    KV_RUN(test_compile_and_cache);
    KV_RUN(test_pool);
    kv_test_current = "main";
    KV_CHECKF(count_fds() == fds_before, "%d descriptors open, %d before", count_fds(), fds_before);
    return kv_test_summary();
}
