#define _XOPEN_SOURCE 700 /* nftw */
#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "protocol/protocol.h"

#include <curl/curl.h>

#define MAX_DIRS 64
static char *made[MAX_DIRS];
static int n_made;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

char *kv_test_slurp(const char *path, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    kv_err err = {{0}};
    if (kv_read_file_max(path, KV_MAX_ARTEFACT_BYTES, &text, &n, &err) != 0) {
        fprintf(stderr, "kv_test_slurp: %s\n", err.msg);
        text = strdup("");
        if (!text)
            abort();
        n = 0;
    }
    if (len)
        *len = n;
    return text;
}

int kv_test_rm_rf(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup(void)
{
    if (getenv("KEVO_KEEP_TEST_DIRS"))
        return;
    for (int i = 0; i < n_made; i++) {
        kv_test_rm_rf(made[i]);
        free(made[i]);
    }
    n_made = 0;
}

void kv_test_fresh_dir(char *out, size_t cap, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if ((size_t)snprintf(out, cap, "%s/kevo-%s-XXXXXX", tmp, tag) >= cap || !mkdtemp(out)) {
        perror("kv_test_fresh_dir");
        exit(2);
    }
    if (n_made == 0)
        atexit(cleanup);
    if (n_made < MAX_DIRS)
        made[n_made++] = strdup(out);
}

/* In the child: fd opened on path (or /dev/null) as target. */
static void redirect(const char *path, int flags, int target)
{
    int fd = open(path ? path : "/dev/null", flags, 0644);
    if (fd < 0 || dup2(fd, target) < 0)
        _exit(126);
    if (fd != target)
        close(fd);
}

int kv_test_spawn(const char *const *argv, const char *out_path, const char *err_path,
                  unsigned timeout_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        redirect(NULL, O_RDONLY, 0);
        redirect(out_path, O_WRONLY | O_CREAT | O_TRUNC, 1);
        redirect(err_path, O_WRONLY | O_CREAT | O_TRUNC, 2);
        alarm(timeout_s); /* kept across exec */
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) != pid)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

uint64_t kv_test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *const words[] = {
    "__global__",
    "void",
    "int",
    "float",
    "const",
    "__restrict__",
    "blockIdx.x",
    "threadIdx.x",
    "blockDim.x",
    "gridDim.x",
    "for",
    "if",
    "return",
    "__syncthreads();",
    "uint4",
    "float4",
    "__nv_bfloat16",
    "ctx->rank",
    "ctx->world",
    "ctx->stream",
    "peer",
    "offset",
    "chunk",
    "+=",
    "=",
    "<",
    "*",
    "+",
    "(",
    ")",
    "{",
    "}",
    ";",
    "[",
    "]",
    "\n",
    "\n    ",
    "\n        ",
    "acquire",
    "release",
    "flag",
    "epoch",
    "kevo_run",
    "kevo_ctx",
    "size_t",
    "#pragma unroll",
    "asm volatile(\"st.release.sys.global.u32",
    "cp.async.bulk",
    "mbarrier",
    "ld.acquire",
};

void kv_test_random_source(char *buf, size_t cap, uint64_t seed, size_t len)
{
    uint64_t st = seed * 0x2545F4914F6CDD1Dull + 7;
    size_t n = 0;
    if (len >= cap)
        len = cap - 1;
    /* a unique header so that no two seeds give the same normalised source */
    n += (size_t)snprintf(buf, cap, "// candidate %llu\nint kv_seed_%llu = %llu;\n",
                          (unsigned long long)seed, (unsigned long long)seed,
                          (unsigned long long)seed);
    while (n < len) {
        uint64_t r = kv_test_rand(&st);
        char tmp[64];
        const char *w;
        if (r % 7 == 0) {
            snprintf(tmp, sizeof tmp, "v%llu", (unsigned long long)(r >> 8) % 97);
            w = tmp;
        } else if (r % 11 == 0) {
            snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)(r >> 8) % 4096);
            w = tmp;
        } else {
            w = words[(r >> 8) % (sizeof words / sizeof words[0])];
        }
        size_t wl = strlen(w);
        if (n + wl + 1 > len)
            break;
        memcpy(buf + n, w, wl);
        n += wl;
        buf[n++] = ' ';
    }
    while (n < len)
        buf[n++] = ' ';
    buf[len] = 0;
}

int kv_test_gpu_eval_setup(char *root, size_t cap, kv_eval_opts *o)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    const char *worker = getenv("KEVO_WORKER");
    snprintf(root, cap, "%s", src ? src : ".");
    int world = getenv("KEVO_GPU_TEST_WORLD") ? atoi(getenv("KEVO_GPU_TEST_WORLD")) : 2;
    if (world < 2 || world > 8)
        world = 2;
    if (!worker || access(worker, X_OK) != 0 || kv_test_gpu_count(worker) < world) {
        printf("skipped: needs %d GPUs and KEVO_WORKER\n", world);
        return 77;
    }
    kv_eval_defaults(o, root);
    snprintf(o->worker_path, sizeof o->worker_path, "%s", worker);
    snprintf(o->log_dir, sizeof o->log_dir, "/tmp/kevo-gpu-test-logs");
    o->world = world;
    o->job_timeout_s = 300;
    kv_err err = {{0}};
    if (kv_mkdir_p(o->log_dir, 0755, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}

int kv_test_listed(const char *list, const char *name)
{
    if (!list || !*list)
        return 1;
    size_t n = strlen(name);
    for (const char *s = list; (s = strstr(s, name)); s += n)
        if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == 0))
            return 1;
    return 0;
}

int kv_test_gpu_count(const char *worker)
{
    char cmd[4200];
    if (snprintf(cmd, sizeof cmd, "%s --doctor 2>/dev/null", worker) >= (int)sizeof cmd)
        return 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    if (pclose(p) != 0)
        return 0;
    /* read through the protocol's codec, as kevo reads it */
    static kv_proto_doctor rep;
    kv_err err = {{0}};
    if (kv_proto_doctor_from_json(buf, &rep, &err) != 0) {
        fprintf(stderr, "%s --doctor: %s\n", worker, err.msg);
        return 0;
    }
    return rep.n_gpus;
}

typedef struct {
    char *p;
    size_t n;
    int oom;
} body_buf;

static size_t collect(char *d, size_t size, size_t n, void *u)
{
    body_buf *b = u;
    size_t len = size * n;
    char *grown = realloc(b->p, b->n + len + 1);
    if (!grown) {
        b->oom = 1;
        return 0;
    }
    memcpy(grown + b->n, d, len);
    b->p = grown;
    b->n += len;
    b->p[b->n] = 0;
    return len;
}

void kv_test_no_proxy(void)
{
    static const char *const vars[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                                       "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

char *kv_test_http_get(int port, const char *path)
{
    body_buf b = {NULL, 0, 0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *e = curl_easy_init();
    if (!e)
        return NULL;
    CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, url);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(e, CURLOPT_PROXY, ""); /* straight to 127.0.0.1 */
    if (rc == CURLE_OK)
        rc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    if (rc != CURLE_OK || b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int kv_test_llm_server_start(kv_test_llm_server *s, const char *script)
{
    int p[2];
    char path[4096];
    s->pid = -1;
    s->port = 0;
    const char *src = getenv("KEVO_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "llm_server: KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return -1;
    }
    snprintf(path, sizeof path, "%s/tests/support/llm_server.py", src);
    if (pipe(p) != 0) {
        perror("pipe");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        if (dup2(p[1], 1) < 0)
            _exit(127);
        close(p[0]);
        close(p[1]);
        execlp("python3", "python3", path, script, (char *)NULL);
        _exit(127);
    }
    s->pid = (int)pid;
    close(p[1]);
    char buf[32] = {0};
    size_t n = 0;
    while (n < sizeof buf - 1 && !strchr(buf, '\n')) {
        ssize_t k = read(p[0], buf + n, sizeof buf - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(p[0]);
    s->port = atoi(buf);
    /* it answers before the tests start (a loaded machine starts it slowly) */
    char *st = NULL;
    for (int i = 0; s->port > 0 && i < 100 && !(st = kv_test_http_get(s->port, "/stats")); i++)
        usleep(100000);
    if (!st) {
        fprintf(stderr, "llm_server: the local server did not start or does not answer "
                        "(python3?)\n");
        kv_test_llm_server_stop(s);
        return -1;
    }
    free(st);
    return 0;
}

void kv_test_llm_server_stop(kv_test_llm_server *s)
{
    if (s->pid > 0) {
        kill((pid_t)s->pid, SIGKILL);
        waitpid((pid_t)s->pid, NULL, 0);
    }
    s->pid = -1;
}
