/* test_gpu_export.c — kevo export on real GPUs (ctest label "gpu"; exit 77,
 * skipped, without two GPUs): the allreduce seeds measured into a run
 * (kevo seed, full protocol), their best per size exported (kevo export),
 * the export built with its own CMake file, and tests/gpu/export_app.cu built
 * against it and run: one process per GPU captures several calls of the
 * exported all-reduce at three sizes (one measured, one between measured
 * sizes, one measured) into a CUDA graph, replays it with fresh inputs and a
 * late rank, compares every output with ncclAllReduce's (bit for bit at
 * W = 2), and times the exported call against NCCL and against what kevo
 * measured for the program the dispatcher chose.
 *
 * Every step's command and output is printed. KEVO_GPU_TEST_WORLD (default
 * 2) sets W; KEVO_GPU_TEST_EXPORT_RUN=DIR reuses a run directory that already
 * holds the seeds (it is made when missing) instead of measuring them again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

static char scratch[4096];

/* Runs argv, prints the command and what it printed; its exit status. */
static int step(const char *what, const char *const *argv, unsigned timeout_s)
{
    char out[4200], err_path[4200];
    snprintf(out, sizeof out, "%s/step.out", scratch);
    snprintf(err_path, sizeof err_path, "%s/step.err", scratch);
    printf("\n==== %s\n$", what);
    for (int i = 0; argv[i]; i++)
        printf(" %s", argv[i]);
    printf("\n");
    fflush(stdout);
    int rc = kv_test_spawn(argv, out, err_path, timeout_s);
    const char *paths[] = {out, err_path};
    for (int f = 0; f < 2; f++) {
        char *text = NULL;
        size_t len = 0;
        kv_err err = {{0}};
        if (kv_read_file(paths[f], &text, &len, &err) == 0 && len > 0) {
            if (f == 1)
                printf("(stderr)\n");
            fwrite(text, 1, len, stdout);
        }
        free(text);
    }
    printf("(exit status %d)\n", rc);
    fflush(stdout);
    return rc;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

static const char *bin, *src;
static int world = 2;

static void test_export_on_gpus(void)
{
    const char *nvcc = env_or("KEVO_NVCC", "nvcc"), *cmake = env_or("KEVO_CMAKE", "cmake");
    const char *nccl_inc = env_or("KEVO_NCCL_INCLUDE", "/usr/include");
    const char *nccl_lib = env_or("KEVO_NCCL_LIBDIR", "/usr/lib");
    const char *arch = env_or("KEVO_CUDA_ARCH", "sm_90a");
    char run[4200], out[4200], build[4300], app[4200], nvcc_var[4200], w[16], inc[4300],
        libdir[4400], rpath[4500], ncclinc[4200], nccllib[4200], gencode[128], appsrc[4200];
    snprintf(w, sizeof w, "%d", world);
    const char *reuse = getenv("KEVO_GPU_TEST_EXPORT_RUN");
    if (reuse && *reuse)
        snprintf(run, sizeof run, "%s", reuse);
    else
        snprintf(run, sizeof run, "%s/run", scratch);
    snprintf(out, sizeof out, "%s/export", scratch);
    snprintf(build, sizeof build, "%s/build", out);
    snprintf(app, sizeof app, "%s/export_app", scratch);
    snprintf(appsrc, sizeof appsrc, "%s/tests/gpu/export_app.cu", src);
    printf("W=%d, run %s, export %s\n", world, run, out);

    /* 1. the seeds, measured with the full protocol (three timed sizes and validation) */
    char archive[4300];
    snprintf(archive, sizeof archive, "%s/archive.mdb", run);
    struct stat st;
    if (!(reuse && *reuse && stat(archive, &st) == 0)) {
        const char *seed[] = {
            bin, "seed",    "--problem", "allreduce", "--run",
            run, "--world", w,           "--sizes",   "64KiB,1MiB,16MiB,validation",
            NULL};
        int rc = step("kevo seed: the allreduce seeds, full protocol", seed, 1800);
        KV_CHECKF(rc == 0 || rc == 4, "kevo seed: exit %d", rc); /* 4: some seed rejected */
        if (rc != 0 && rc != 4)
            return;
    }
    const char *best[] = {bin, "archive", "--run", run, "best", "allreduce", "--per-size", NULL};
    KV_CHECK(step("the best program per size", best, 60) == 0);

    /* 2. the export, built with its own CMake file */
    const char *exp[] = {bin,     "export", "--run",   run, "--problem", "allreduce",
                         "--out", out,      "--world", w,   NULL};
    KV_REQUIRE(step("kevo export", exp, 120) == 0);
    snprintf(nvcc_var, sizeof nvcc_var, "-DCMAKE_CUDA_COMPILER=%s", nvcc);
    const char *conf[] = {cmake, "-S", out, "-B", build, nvcc_var, NULL};
    KV_REQUIRE(step("configure the export", conf, 300) == 0);
    const char *make[] = {cmake, "--build", build, "-j", "8", NULL};
    KV_REQUIRE(step("build the export", make, 900) == 0);

    /* 3. the program that calls it */
    snprintf(inc, sizeof inc, "-I%s/include", out);
    snprintf(ncclinc, sizeof ncclinc, "-I%s", nccl_inc);
    snprintf(libdir, sizeof libdir, "-L%s", build);
    snprintf(nccllib, sizeof nccllib, "-L%s", nccl_lib);
    snprintf(rpath, sizeof rpath, "-Xlinker=-rpath,%s:%s", build, nccl_lib);
    snprintf(gencode, sizeof gencode, "-arch=%s", arch);
    const char *cc[] = {nvcc,
                        "-std=c++17",
                        "-O2",
                        gencode,
                        inc,
                        ncclinc,
                        appsrc,
                        "-o",
                        app,
                        libdir,
                        "-lkevo_export_allreduce",
                        nccllib,
                        "-lnccl",
                        rpath,
                        NULL};
    KV_REQUIRE(step("build tests/gpu/export_app.cu against the export", cc, 300) == 0);

    /* 4. run it: 64 KiB (measured), 300007 elements (between 64 KiB and 1 MiB, odd: the
     * programs' scalar tails), 16 MiB (measured) */
    const char *sizes = env_or("KEVO_GPU_TEST_EXPORT_SIZES", "32768,300007,8388608");
    const char *runapp[] = {app, w, sizes, NULL};
    int rc = step("the exported all-reduce in a CUDA graph, against ncclAllReduce", runapp, 900);
    KV_CHECKF(rc == 0, "export_app: exit %d", rc);
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    src = getenv("KEVO_SOURCE_DIR");
    const char *worker = getenv("KEVO_WORKER");
    world = atoi(env_or("KEVO_GPU_TEST_WORLD", "2"));
    if (world < 2 || world > 8)
        world = 2;
    if (!bin || !src || !worker || access(worker, X_OK) != 0 || kv_test_gpu_count(worker) < world) {
        printf("skipped: needs %d GPUs, KEVO_BIN, KEVO_WORKER and KEVO_SOURCE_DIR\n", world);
        return 77;
    }
    /* NVLink multicast forbidden, as on the lent machines (NCCL's own collectives too) */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    kv_test_fresh_dir(scratch, sizeof scratch, "gpu-export");
    KV_RUN(test_export_on_gpus);
    return kv_test_summary();
}
