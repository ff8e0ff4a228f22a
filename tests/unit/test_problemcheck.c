/* test_problemcheck.c — the kept verdicts of problem checks
 * (evaluator/evaluator.h): the key follows W and the bytes of
 * problem.json, reference.cu, inputs.cu and check.c, not where the folder
 * is; a verdict made from a self-check's report; an entry written whole by
 * a rename (the old file's inode is never rewritten) and read back as it
 * was; a damaged, foreign or unreadable entry is absent, with a warning
 * naming the file, never a pass. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "test.h"
#include "test_util.h"

/* A copy of problems/allreduce in a fresh folder (as <folder>/allreduce,
 * the name a problem's folder must have); its path into dir. */
static void copy_allreduce(char *dir, size_t cap)
{
    static const char *const files[] = {"problem.json", "reference.cu", "check.c"};
    kv_err err = {{0}};
    char root[4000];
    kv_test_fresh_dir(root, sizeof root, "pcheck-problem");
    snprintf(dir, cap, "%s/allreduce", root);
    KV_REQUIRE(mkdir(dir, 0755) == 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[4200], to[4200], *text = NULL;
        size_t len = 0;
        snprintf(from, sizeof from, "%s/problems/allreduce/%s", getenv("KEVO_SOURCE_DIR"),
                 files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        KV_REQUIRE(kv_read_file(from, &text, &len, &err) == 0);
        KV_REQUIRE(kv_write_file_atomic(to, text, len, &err) == 0);
        free(text);
    }
}

/* The key of the problem in dir at W into key. */
static void key_of(const char *dir, int world, char key[KV_SHA256_HEX_LEN])
{
    kv_problem p;
    kv_err err = {{0}};
    key[0] = '\0';
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    KV_CHECKF(kv_pcheck_key(&p, world, key, &err) == 0, "%s", err.msg);
    kv_problem_free(&p);
}

static void append(const char *dir, const char *file, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "a");
    KV_REQUIRE(f != NULL);
    KV_CHECK(fputs(text, f) >= 0);
    KV_CHECK(fclose(f) == 0);
}

static void test_key(void)
{
    char src[4200], dir[4096], k0[KV_SHA256_HEX_LEN], k[KV_SHA256_HEX_LEN];
    snprintf(src, sizeof src, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    copy_allreduce(dir, sizeof dir);
    key_of(src, 2, k0);
    KV_CHECK(strlen(k0) == 64);
    key_of(dir, 2, k);
    KV_CHECKF(strcmp(k, k0) == 0, "a copy elsewhere has another key: %s, %s", k, k0);
    key_of(dir, 4, k);
    KV_CHECK(strcmp(k, k0) != 0);
    append(dir, "reference.cu", "\n");
    key_of(dir, 2, k);
    KV_CHECK(strcmp(k, k0) != 0);
    char k1[KV_SHA256_HEX_LEN];
    memcpy(k1, k, sizeof k1);
    append(dir, "check.c", "/* changed */\n");
    key_of(dir, 2, k);
    KV_CHECK(strcmp(k, k1) != 0);
    memcpy(k1, k, sizeof k1);
    append(dir, "problem.json", " ");
    key_of(dir, 2, k);
    KV_CHECK(strcmp(k, k1) != 0);
    memcpy(k1, k, sizeof k1);
    append(dir, "inputs.cu", ""); /* an inputs hook appears, empty */
    key_of(dir, 2, k);
    KV_CHECK(strcmp(k, k1) != 0);
    /* a file that cannot be read is named */
    kv_problem p;
    kv_err err = {{0}};
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    char check[4200];
    snprintf(check, sizeof check, "%s/check.c", dir);
    KV_REQUIRE(unlink(check) == 0);
    KV_CHECK(kv_pcheck_key(&p, 2, k, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "check.c");
    KV_CHECK_STR_CONTAINS(err.msg, "problem allreduce");
    kv_problem_free(&p);
}

/* A problem of two sizes, for verdicts made by hand. */
static void load_allreduce(kv_problem *p)
{
    char src[4200];
    kv_err err = {{0}};
    snprintf(src, sizeof src, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    if (kv_problem_load(src, p, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

static void test_from_report(void)
{
    kv_problem p;
    load_allreduce(&p);
    kv_eval_report r;
    memset(&r, 0, sizeof r);
    r.verdict = KV_VERDICT_MISMATCH;
    snprintf(r.message, sizeof r.message, "the reference does not agree with itself at size %s",
             p.sizes[1].name);
    r.n_sizes = 2;
    for (int s = 0; s < 2; s++) {
        snprintf(r.sizes[s].name, sizeof r.sizes[s].name, "%s", p.sizes[s].name);
        r.sizes[s].checked = 1;
        r.sizes[s].ok = s == 0;
        r.sizes[s].ref_plain = s;
    }
    kv_pcheck v;
    kv_err err = {{0}};
    KV_REQUIRE(kv_pcheck_from_report(&v, &p, 2, &r, &err) == 0);
    KV_CHECK(!v.ok && v.self == KV_PCHECK_FAIL && v.host == KV_PCHECK_NOT_RUN && v.world == 2);
    KV_CHECK(strcmp(v.message, r.message) == 0 && strcmp(v.problem, "allreduce") == 0);
    KV_CHECK(v.n_sizes == p.n_sizes);
    KV_CHECK(v.sizes[0].self == KV_PCHECK_PASS && !v.sizes[0].ref_plain);
    KV_CHECK(v.sizes[1].self == KV_PCHECK_FAIL && v.sizes[1].ref_plain);
    KV_CHECK(p.n_sizes < 3 || v.sizes[2].self == KV_PCHECK_NOT_RUN);
    r.verdict = KV_VERDICT_OK;
    r.message[0] = '\0';
    KV_REQUIRE(kv_pcheck_from_report(&v, &p, 2, &r, &err) == 0);
    KV_CHECK(v.ok && v.self == KV_PCHECK_PASS && v.message[0] == '\0');
    /* a reference that hung is no verdict on its code */
    r.verdict = KV_VERDICT_HANG;
    snprintf(r.message, sizeof r.message, "size x: missed its deadline");
    v.ok = 7;
    KV_CHECK(kv_pcheck_from_report(&v, &p, 2, &r, &err) != 0 && v.ok == 7);
    KV_CHECK_STR_CONTAINS(err.msg, "the reference of allreduce failed its self-check: hang: "
                                   "size x: missed its deadline");
    kv_problem_free(&p);
}

/* A verdict with every member set. */
static void sample(kv_pcheck *v, const kv_problem *p)
{
    memset(v, 0, sizeof *v);
    snprintf(v->problem, sizeof v->problem, "%s", p->name);
    v->world = 2;
    v->ok = 0;
    v->self = KV_PCHECK_PASS;
    v->host = KV_PCHECK_FAIL;
    snprintf(v->message, sizeof v->message,
             "the reference disagrees with its host check at size "
             "%s: rank 1, y[3]: got 2, want 1",
             p->sizes[0].name);
    v->n_sizes = p->n_sizes;
    for (int s = 0; s < p->n_sizes; s++) {
        kv_pcheck_size *cs = &v->sizes[s];
        snprintf(cs->name, sizeof cs->name, "%s", p->sizes[s].name);
        cs->validation = p->sizes[s].validation;
        cs->self = KV_PCHECK_PASS;
        cs->ref_plain = s % 2;
        cs->host = s == 0 ? KV_PCHECK_FAIL : s == 1 ? KV_PCHECK_SKIPPED : KV_PCHECK_PASS;
        cs->host_too_large = s == p->n_sizes - 1;
        cs->host_checked = 1000 * (s + 1);
        cs->host_failed = s == 0 ? 3 : 0;
        cs->host_worst = 0.125 * s;
    }
}

typedef struct {
    int n;
    char last[2048];
} warnings;

static void on_warn(const char *msg, void *ctx)
{
    warnings *w = ctx;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
}

static void test_put_get(void)
{
    kv_problem p;
    load_allreduce(&p);
    char cache[4096], key[KV_SHA256_HEX_LEN], path[PATH_MAX], second[PATH_MAX + 8];
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-cache");
    key_of(p.dir, 2, key);
    kv_pcheck v, back;
    kv_err err = {{0}};
    warnings w = {0, ""};
    KV_CHECK(kv_pcheck_get(cache, key, &back, on_warn, &w, &err) == KV_NOTFOUND && w.n == 0);
    sample(&v, &p);
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_CHECK(v.checked_at > 1700000000); /* set to now */
    KV_REQUIRE(kv_pcheck_get(cache, key, &back, on_warn, &w, &err) == 0);
    KV_CHECK(w.n == 0);
    KV_CHECKF(memcmp(&v, &back, sizeof v) == 0, "the verdict read back differs");

    /* replaced by a rename: a second name of the old file keeps the old text */
    KV_REQUIRE(kv_pcheck_path(cache, key, path, &err) == 0);
    snprintf(second, sizeof second, "%s.old", path);
    KV_REQUIRE(link(path, second) == 0);
    char *before = NULL, *after = NULL, *old = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file(path, &before, &len, &err) == 0);
    v.ok = 1;
    v.host = KV_PCHECK_PASS;
    v.message[0] = '\0';
    v.sizes[0].host = KV_PCHECK_PASS;
    v.checked_at = 0;
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_REQUIRE(kv_read_file(path, &after, &len, &err) == 0);
    KV_REQUIRE(kv_read_file(second, &old, &len, &err) == 0);
    KV_CHECK(strcmp(old, before) == 0 && strcmp(after, before) != 0);
    KV_REQUIRE(kv_pcheck_get(cache, key, &back, on_warn, &w, &err) == 0);
    KV_CHECK(back.ok && back.host == KV_PCHECK_PASS && w.n == 0);
    KV_CHECK(unlink(second) == 0);
    /* nothing but the entry is left in the folder (no temporary file) */
    char dir[PATH_MAX + 16], listing[8192] = "";
    snprintf(dir, sizeof dir, "%s/problemcheck", cache);
    FILE *ls = NULL;
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    ls = popen(cmd, "r");
    KV_REQUIRE(ls != NULL);
    size_t n = fread(listing, 1, sizeof listing - 1, ls);
    listing[n] = '\0';
    KV_CHECK(pclose(ls) == 0);
    char want[128];
    snprintf(want, sizeof want, "%s.json\n", key);
    KV_CHECKF(strcmp(listing, want) == 0, "the folder holds: %s", listing);
    free(before);
    free(after);
    free(old);

    /* a cache folder that cannot be made is named */
    char file[PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/plain-file", cache);
    KV_REQUIRE(kv_write_file_atomic(file, "x", 1, &err) == 0);
    KV_CHECK(kv_pcheck_put(file, key, &v, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, file);
    kv_problem_free(&p);
}

/* Each damaged entry: KV_NOTFOUND, one warning naming the file, never 0. */
static void test_damaged(void)
{
    kv_problem p;
    load_allreduce(&p);
    char cache[4096], key[KV_SHA256_HEX_LEN], path[PATH_MAX];
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-damaged");
    key_of(p.dir, 2, key);
    kv_pcheck v;
    kv_err err = {{0}};
    sample(&v, &p);
    v.ok = 1;
    v.host = KV_PCHECK_PASS;
    v.message[0] = '\0';
    v.sizes[0].host = KV_PCHECK_PASS;
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_REQUIRE(kv_pcheck_path(cache, key, path, &err) == 0);
    char *good = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file(path, &good, &len, &err) == 0);
    cJSON *o = kv_pcheck_json(&v, key);
    KV_REQUIRE(o != NULL);

    /* variants of the good entry, each wrong in one way */
    struct {
        const char *what, *member;
        cJSON *value; /* NULL: the member removed */
    } edits[] = {
        {"another version", "version", cJSON_CreateNumber(KV_PCHECK_VERSION + 1)},
        {"another key", "key", cJSON_CreateString("00")},
        {"ok without its checks", "selfcheck", cJSON_CreateString("fail")},
        {"ok as a string", "ok", cJSON_CreateString("true")},
        {"no ok", "ok", NULL},
        {"a skipped whole", "host_check", cJSON_CreateString("skipped")},
        {"ok beating its floor", "floor_check", cJSON_CreateString("fail")},
        {"no floor check", "floor_check", NULL},
        {"an unknown result", "selfcheck", cJSON_CreateString("passed")},
        {"sizes not a list", "sizes", cJSON_CreateString("all")},
        {"W out of range", "world", cJSON_CreateNumber(99)},
    };
    size_t n_edits = sizeof edits / sizeof edits[0];
    int cases = (int)n_edits + 5;
    for (int i = 0; i < cases; i++) {
        char *text = NULL;
        size_t tlen = 0;
        if (i < (int)n_edits) {
            cJSON *c = cJSON_Duplicate(o, 1);
            KV_REQUIRE(c != NULL);
            if (edits[i].value)
                cJSON_ReplaceItemInObjectCaseSensitive(c, edits[i].member, edits[i].value);
            else
                cJSON_DeleteItemFromObjectCaseSensitive(c, edits[i].member);
            text = cJSON_Print(c);
            cJSON_Delete(c);
            tlen = strlen(text);
        } else if (i == (int)n_edits) {
            text = strdup(good);
            tlen = len / 2; /* cut short */
        } else if (i == (int)n_edits + 1) {
            text = strdup("");
        } else if (i == (int)n_edits + 2) {
            text = strdup("not json\n");
            tlen = strlen(text);
        } else if (i == (int)n_edits + 3) {
            /* a size without its host check's result */
            cJSON *c = cJSON_Duplicate(o, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "sizes"), 0), "host_check");
            text = cJSON_Print(c);
            cJSON_Delete(c);
            tlen = strlen(text);
        } else {
            text = strdup("[]");
            tlen = 2;
        }
        KV_REQUIRE(text != NULL);
        KV_REQUIRE(kv_write_file_atomic(path, text, tlen, &err) == 0);
        free(text);
        warnings w = {0, ""};
        kv_pcheck back;
        back.ok = 1;
        int rc = kv_pcheck_get(cache, key, &back, on_warn, &w, &err);
        KV_CHECKF(rc == KV_NOTFOUND && w.n == 1 && !back.ok, "case %d (%s): rc %d, %d warnings", i,
                  i < (int)n_edits ? edits[i].what : "text", rc, w.n);
        KV_CHECK_STR_CONTAINS(w.last, path);
        KV_CHECK_STR_CONTAINS(w.last, "checking again");
    }
    /* a folder in its place */
    KV_REQUIRE(unlink(path) == 0 && mkdir(path, 0755) == 0);
    warnings w = {0, ""};
    kv_pcheck back;
    KV_CHECK(kv_pcheck_get(cache, key, &back, on_warn, &w, &err) == KV_NOTFOUND && w.n == 1);
    KV_CHECK_STR_CONTAINS(w.last, path);
    KV_CHECK(rmdir(path) == 0);
    /* unreadable (not for root, who reads it anyway) */
    if (geteuid() != 0) {
        KV_REQUIRE(kv_write_file_atomic(path, good, len, &err) == 0 && chmod(path, 0) == 0);
        w.n = 0;
        KV_CHECK(kv_pcheck_get(cache, key, &back, on_warn, &w, &err) == KV_NOTFOUND && w.n == 1);
        KV_CHECK_STR_CONTAINS(w.last, path);
        KV_CHECK(chmod(path, 0644) == 0);
    }
    /* and put replaces a damaged entry */
    KV_REQUIRE(kv_write_file_atomic(path, "{", 1, &err) == 0);
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_CHECK(kv_pcheck_get(cache, key, &back, NULL, NULL, &err) == 0 && back.ok);
    cJSON_Delete(o);
    free(good);
    kv_problem_free(&p);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    KV_RUN(test_key);
    KV_RUN(test_from_report);
    KV_RUN(test_put_get);
    KV_RUN(test_damaged);
    return kv_test_summary();
}
