/* test_fuzz_inputs.c — the config and problem loaders on mutated versions
 * of the shipped files (configs/NAME.json, problems/NAME/problem.json): byte
 * flips, truncations, repeated keys, huge numbers, deep nesting, \u0000
 * escapes, raw NUL bytes and invalid UTF-8.
 *
 * Every case must end in a load that succeeds or fails with a message that
 * names the file and, unless the text is not a JSON document at all
 * (syntax, nesting, NUL bytes, empty), a JSON path ("$"); no text with a
 * \u0000 escape may load (its string would be cut there). A crash or a
 * sanitizer report fails the test (UBSan halts on its first report here); a
 * case that runs longer than CASE_LIMIT_S is a hang and fails it too. The
 * file of the case at hand stays in the scratch folder, for a crash.
 *
 * Seeded and bounded in time: KEVO_FUZZ_SEED (default 15) and
 * KEVO_FUZZ_SECONDS (default 10, at most 20) change them. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "search/config.h"
#include "common/fsutil.h"
#include "problem/problem.h"
#include "common/rng.h"
#include "test.h"
#include "test_util.h"

#define CASE_LIMIT_S 5
#define MAX_SEEDS 64
#define MAX_TEXT (1u << 20)

const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

typedef struct {
    char path[PATH_MAX]; /* the shipped file */
    char name[128];      /* its problem's name (folder), or "" for a config */
    char *text;
    size_t len;
} seed_file;

static seed_file seeds[MAX_SEEDS];
static int n_seeds;
static char scratch[PATH_MAX - 512]; /* room for problems/<name>/problem.json below */

static double now_s(void)
{
    return (double)kv_monotonic_ns() / 1e9;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_fuzz_inputs: a case hung (over 5 s); its file is in the "
                              "scratch folder printed above\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

/* ---- the shipped files ---------------------------------------------------- */

static void add_seed(const char *path, const char *name)
{
    if (n_seeds >= MAX_SEEDS)
        return;
    seed_file *s = &seeds[n_seeds];
    kv_err err = {{0}};
    if (kv_read_file(path, &s->text, &s->len, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        return;
    }
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->name, sizeof s->name, "%s", name);
    n_seeds++;
}

static void find_seeds(const char *src)
{
    char dir[PATH_MAX], path[PATH_MAX + 300];
    const char *sub[] = {"configs", "problems"};
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/%s", src, sub[k]);
        DIR *d = opendir(dir);
        KV_REQUIRE(d);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            size_t l = strlen(de->d_name);
            if (de->d_name[0] == '.')
                continue;
            if (k == 0 && l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) {
                snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                add_seed(path, "");
            } else if (k == 1) {
                snprintf(path, sizeof path, "%s/%s/problem.json", dir, de->d_name);
                if (access(path, R_OK) == 0)
                    add_seed(path, de->d_name);
            }
        }
        closedir(d);
    }
}

/* ---- mutations -------------------------------------------------------------
 * Each edits buf (len bytes, room for MAX_TEXT) in place and returns the new
 * length. */

typedef size_t (*mutation)(kv_rng *r, char *buf, size_t len);

/* Replaces n bytes at `at` with the len_ins bytes of ins, where it fits. */
static size_t splice(char *buf, size_t len, size_t at, size_t n, const char *ins, size_t len_ins)
{
    if (at > len || n > len - at || len - n + len_ins > MAX_TEXT)
        return len;
    memmove(buf + at + len_ins, buf + at + n, len - at - n);
    memcpy(buf + at, ins, len_ins);
    return len - n + len_ins;
}

/* A random offset of a byte that is one of set, or len when there is none. */
static size_t find_random(kv_rng *r, const char *buf, size_t len, const char *set)
{
    size_t start = len ? (size_t)kv_rng_below(r, len) : 0;
    for (size_t i = 0; i < len; i++) {
        size_t at = (start + i) % len;
        if (buf[at] && strchr(set, buf[at]))
            return at;
    }
    return len;
}

static size_t flip_bytes(kv_rng *r, char *buf, size_t len)
{
    int n = 1 + (int)kv_rng_below(r, 4);
    for (int i = 0; i < n && len; i++)
        buf[kv_rng_below(r, len)] ^= (char)(1u << kv_rng_below(r, 8));
    return len;
}

static size_t truncate_text(kv_rng *r, char *buf, size_t len)
{
    (void)buf;
    return len ? (size_t)kv_rng_below(r, len) : 0;
}

/* Repeats a key: "key": ... becomes "key": 1, "key": ... */
static size_t repeat_key(kv_rng *r, char *buf, size_t len)
{
    size_t at = find_random(r, buf, len, ":");
    if (at == len)
        return len;
    size_t q1 = at;
    while (q1 > 0 && buf[q1] != '"')
        q1--;
    size_t q0 = q1;
    while (q0 > 0 && buf[q0 - 1] != '"')
        q0--;
    if (q0 == 0 || q1 <= q0)
        return len;
    char ins[200];
    int n = snprintf(ins, sizeof ins, "\"%.*s\": %s, ", (int)(q1 - q0 < 120 ? q1 - q0 : 120),
                     buf + q0, kv_rng_below(r, 2) ? "1" : "\"x\"");
    return splice(buf, len, q0 - 1, 0, ins, (size_t)n);
}

static size_t huge_number(kv_rng *r, char *buf, size_t len)
{
    static const char *const huge[] = {"1e999",
                                       "-1e999",
                                       "9007199254740993",
                                       "18446744073709551616",
                                       "1e308",
                                       "-0",
                                       "4.9e-324",
                                       "1e-400",
                                       "123456789012345678901234567890",
                                       "2147483648",
                                       "-2147483649"};
    size_t at = find_random(r, buf, len, "0123456789");
    if (at == len)
        return len;
    size_t end = at;
    while (end < len && strchr("0123456789.eE+-", buf[end]))
        end++;
    const char *h = huge[kv_rng_below(r, sizeof huge / sizeof huge[0])];
    return splice(buf, len, at, end - at, h, strlen(h));
}

/* A value becomes [[[...1...]]], from a few levels past the limit to 100,000. */
static size_t deep_nesting(kv_rng *r, char *buf, size_t len)
{
    static const size_t depths[] = {63, 64, 65, 1000, 1001, 100000};
    size_t depth = depths[kv_rng_below(r, sizeof depths / sizeof depths[0])];
    size_t at = find_random(r, buf, len, ":[");
    if (at == len || 2 * depth + 1 > MAX_TEXT - len)
        return len;
    char *ins = malloc(2 * depth + 1);
    if (!ins)
        return len;
    memset(ins, '[', depth);
    ins[depth] = '1';
    memset(ins + depth + 1, ']', depth);
    size_t n = splice(buf, len, at + 1, 0, ins, 2 * depth + 1);
    free(ins);
    return n;
}

/* \u0000 after a quote: inside a string (or key) when the quote opens one. */
static size_t nul_escape(kv_rng *r, char *buf, size_t len)
{
    size_t at = find_random(r, buf, len, "\"");
    return at == len ? len : splice(buf, len, at + 1, 0, "\\u0000", 6);
}

static size_t raw_nul(kv_rng *r, char *buf, size_t len)
{
    return splice(buf, len, len ? (size_t)kv_rng_below(r, len) : 0, 0, "\0", 1);
}

static size_t bad_utf8(kv_rng *r, char *buf, size_t len)
{
    static const char *const bad[] = {
        "\x80", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xff\xfe", "\xf4\x90\x80\x80", "\xe2\x82"};
    size_t at = find_random(r, buf, len, "\"");
    const char *b = bad[kv_rng_below(r, sizeof bad / sizeof bad[0])];
    return at == len ? len : splice(buf, len, at + 1, 0, b, strlen(b));
}

static const struct {
    const char *name;
    mutation fn;
} mutations[] = {
    {"flip", flip_bytes},         {"truncate", truncate_text}, {"repeat-key", repeat_key},
    {"huge-number", huge_number}, {"deep", deep_nesting},      {"nul-escape", nul_escape},
    {"raw-nul", raw_nul},         {"bad-utf8", bad_utf8},
};
#define N_MUTATIONS (sizeof mutations / sizeof mutations[0])

/* ---- one case ----------------------------------------------------------------- */

/* Messages that need no JSON path: the text is not a JSON document. */
static int is_document_error(const char *msg)
{
    static const char *const whole[] = {"invalid JSON", "nested too deep", "empty", "NUL byte",
                                        "out of memory"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strstr(msg, whole[i]))
            return 1;
    return 0;
}

/* Whether text holds a \u0000 escape (not an escaped backslash before
 * "u0000"). A loader that accepts one has read a string cut at its NUL. */
static int has_nul_escape(const char *text, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++) {
        if (text[i] != '\\')
            continue;
        if (memcmp(text + i, "\\u0000", 6) == 0)
            return 1;
        i++; /* the escaped character, a backslash included */
    }
    return 0;
}

typedef struct {
    int cases, refused;
    int by_mutation[N_MUTATIONS];
} tally;

static void check_message(const char *file, const char *msg, const char *what)
{
    KV_CHECKF(strstr(msg, file) != NULL, "%s: the message does not name %s: %s", what, file, msg);
    KV_CHECKF(is_document_error(msg) || strstr(msg, ": $") != NULL,
              "%s: the message has no JSON path: %s", what, msg);
}

/* Writes the case, loads it with the loader of its kind, checks the outcome. */
static void run_case(const seed_file *s, const char *text, size_t len, const char *what, tally *t)
{
    kv_err err = {{0}};
    char dir[PATH_MAX], file[PATH_MAX + 64];
    int rc;
    alarm(CASE_LIMIT_S);
    if (!s->name[0]) {
        snprintf(file, sizeof file, "%s/case.json", scratch);
        KV_REQUIRE(kv_write_file_atomic(file, text, len, &err) == 0);
        kv_config cfg;
        rc = kv_config_load(file, &cfg, &err);
    } else {
        snprintf(dir, sizeof dir, "%s/problems/%s", scratch, s->name);
        snprintf(file, sizeof file, "%s/problem.json", dir);
        KV_REQUIRE(kv_write_file_atomic(file, text, len, &err) == 0);
        kv_problem *p = calloc(1, sizeof *p);
        KV_REQUIRE(p);
        rc = kv_problem_load(dir, p, &err);
        kv_problem_free(p);
        free(p);
    }
    alarm(0);
    t->cases++;
    if (rc != 0) {
        t->refused++;
        check_message(file, err.msg, what);
    } else {
        KV_CHECKF(!has_nul_escape(text, len), "%s: loaded a text with a \\u0000 escape", what);
    }
}

/* The scratch problems/<name> folders, with the files a problem needs. */
static void make_problem_dirs(void)
{
    char dir[PATH_MAX + 200], path[PATH_MAX + 300];
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/problems", scratch);
    KV_REQUIRE(mkdir(dir, 0755) == 0);
    for (int i = 0; i < n_seeds; i++) {
        if (!seeds[i].name[0])
            continue;
        snprintf(dir, sizeof dir, "%s/problems/%s", scratch, seeds[i].name);
        KV_REQUIRE(mkdir(dir, 0755) == 0);
        const char *files[] = {"reference.cu", "inputs.cu"};
        for (int f = 0; f < 2; f++) {
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            KV_REQUIRE(kv_write_file_atomic(path, "// fuzz\n", 8, &err) == 0);
        }
    }
}

static void test_fuzz(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    find_seeds(src && *src ? src : ".");
    KV_REQUIRE(n_seeds > 5);
    const char *e = getenv("KEVO_FUZZ_SEED");
    uint64_t seed = e && *e ? strtoull(e, NULL, 10) : 15;
    e = getenv("KEVO_FUZZ_SECONDS");
    double budget = e && *e ? atof(e) : 10;
    if (!(budget > 0) || budget > 20)
        budget = 20;
    kv_test_fresh_dir(scratch, sizeof scratch, "fuzz");
    make_problem_dirs();
    printf("fuzz: seed %llu, %d shipped files, %.0f s, cases written to %s\n",
           (unsigned long long)seed, n_seeds, budget, scratch);
    fflush(stdout);
    signal(SIGALRM, on_alarm);

    /* the shipped files themselves load */
    tally t = {0};
    for (int i = 0; i < n_seeds; i++) {
        run_case(&seeds[i], seeds[i].text, seeds[i].len, seeds[i].path, &t);
        KV_CHECKF(t.refused == 0, "shipped %s refused", seeds[i].path);
    }

    char *buf = malloc(MAX_TEXT);
    KV_REQUIRE(buf);
    kv_rng r;
    kv_rng_seed(&r, seed);
    double t0 = now_s();
    t = (tally){0};
    while (now_s() - t0 < budget) {
        const seed_file *s = &seeds[kv_rng_below(&r, (uint64_t)n_seeds)];
        size_t len = s->len < MAX_TEXT ? s->len : MAX_TEXT;
        memcpy(buf, s->text, len);
        int n = 1 + (int)kv_rng_below(&r, 3), m = 0;
        for (int k = 0; k < n; k++) {
            m = (int)kv_rng_below(&r, N_MUTATIONS);
            len = mutations[m].fn(&r, buf, len);
        }
        t.by_mutation[m]++;
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "case %d (%s, last %s)", t.cases, s->path, mutations[m].name);
        run_case(s, buf, len, what, &t);
        if (kv_test_failed > 20)
            break;
    }
    free(buf);
    printf("fuzz: %d cases in %.1f s, %d refused, %d loaded; last mutation:", t.cases, now_s() - t0,
           t.refused, t.cases - t.refused);
    for (size_t m = 0; m < N_MUTATIONS; m++)
        printf(" %s %d", mutations[m].name, t.by_mutation[m]);
    printf("\n");
    KV_CHECK(t.cases >= 100);
    for (int i = 0; i < n_seeds; i++)
        free(seeds[i].text);
    if (!kv_test_failed)
        kv_test_rm_rf(scratch);
}

int main(void)
{
    KV_RUN(test_fuzz);
    return kv_test_summary();
}
