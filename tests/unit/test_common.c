/* test_common.c — tests of common/: sha256, source, suggest, fsutil, clock. */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/sha256.h"
#include "common/source.h"
#include "common/suggest.h"

/* xorshift64*: deterministic, so failures reproduce. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

static int hex_is(const void *data, size_t len, const char *want)
{
    uint8_t d[KV_SHA256_LEN];
    char hex[KV_SHA256_HEX_LEN];
    if (kv_sha256(data, len, d) != 0) {
        fprintf(stderr, "  kv_sha256 failed\n");
        return 0;
    }
    kv_sha256_hex(d, hex);
    if (strcmp(hex, want) != 0) {
        fprintf(stderr, "  sha256 got %s\n  want       %s\n", hex, want);
        return 0;
    }
    return 1;
}

/* ---- sha256 -------------------------------------------------------------- */

static void test_sha256_vectors(void)
{
    KV_CHECK(hex_is("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    KV_CHECK(hex_is("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    KV_CHECK(hex_is(m448, strlen(m448),
                    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    KV_CHECK(hex_is(m896, strlen(m896),
                    "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"));

    size_t n = 1000000;
    char *a = malloc(n);
    KV_REQUIRE(a != NULL);
    memset(a, 'a', n);
    KV_CHECK(hex_is(a, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    free(a);
}

static void test_sha256_incremental(void)
{
    /* Lengths around the 55/56/64-byte padding edges, fed in odd chunks. */
    size_t max = 1000;
    uint8_t *buf = malloc(max);
    KV_REQUIRE(buf != NULL);
    for (size_t i = 0; i < max; i++)
        buf[i] = (uint8_t)rng();

    static const size_t chunks[] = {1, 3, 7, 13, 63, 64, 65, 127, 200};
    int all_ok = 1;
    for (size_t len = 0; len <= max; len += (len < 130 ? 1 : 37)) {
        uint8_t want[KV_SHA256_LEN];
        if (kv_sha256(buf, len, want) != 0)
            all_ok = 0;
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            kv_sha256_ctx h;
            kv_sha256_init(&h);
            size_t off = 0;
            while (off < len) {
                size_t take = chunks[c] < len - off ? chunks[c] : len - off;
                kv_sha256_update(&h, buf + off, take);
                off += take;
            }
            uint8_t got[KV_SHA256_LEN];
            if (kv_sha256_final(&h, got) != 0 || memcmp(got, want, sizeof got) != 0) {
                fprintf(stderr, "  mismatch len=%zu chunk=%zu\n", len, chunks[c]);
                all_ok = 0;
            }
        }
        /* Random chunking, including empty updates. */
        kv_sha256_ctx h;
        kv_sha256_init(&h);
        size_t off = 0;
        while (off < len) {
            size_t take = rng_below(len - off + 1);
            kv_sha256_update(&h, buf + off, take);
            off += take;
        }
        uint8_t got[KV_SHA256_LEN];
        if (kv_sha256_final(&h, got) != 0 || memcmp(got, want, sizeof got) != 0)
            all_ok = 0;
    }
    KV_CHECK(all_ok);

    /* The FIPS one-million-'a' vector in 997-byte pieces. */
    char piece[997];
    memset(piece, 'a', sizeof piece);
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    size_t left = 1000000;
    while (left > 0) {
        size_t take = left < sizeof piece ? left : sizeof piece;
        kv_sha256_update(&h, piece, take);
        left -= take;
    }
    uint8_t d[KV_SHA256_LEN];
    char hex[KV_SHA256_HEX_LEN];
    KV_CHECK(kv_sha256_final(&h, d) == 0);
    kv_sha256_hex(d, hex);
    KV_CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);

    /* A hash abandoned half way frees its context (the sanitizer build
     * reports a leak otherwise), and a context can be started again. */
    kv_sha256_init(&h);
    kv_sha256_update(&h, "ab", 2);
    kv_sha256_discard(&h);
    KV_CHECK(h.md == NULL);
    kv_sha256_init(&h);
    kv_sha256_update(&h, "a", 1);
    kv_sha256_update(&h, "bc", 2);
    KV_CHECK(kv_sha256_final(&h, d) == 0);
    kv_sha256_hex(d, hex);
    KV_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    free(buf);
}

/* ---- source -------------------------------------------------------------- */

static int norm_is(const char *src, const char *want)
{
    char *out = NULL;
    size_t len = 0;
    if (kv_source_normalise(src, strlen(src), &out, &len) != 0)
        return 0;
    int ok = strcmp(out, want) == 0 && len == strlen(want);
    if (!ok)
        fprintf(stderr, "  normalise(\"%s\")\n    got  \"%s\"\n    want \"%s\"\n", src, out, want);
    free(out);
    return ok;
}

static void test_source_normalise(void)
{
    KV_CHECK(norm_is("", ""));
    KV_CHECK(norm_is("   \n\t  ", ""));
    KV_CHECK(norm_is("  int  x ;  ", "int x ;"));
    KV_CHECK(norm_is("a\r\n\r\nb\r\n", "a\nb"));
    KV_CHECK(norm_is("a/**/b", "a b"));
    KV_CHECK(norm_is("a /* x */ b", "a b"));
    KV_CHECK(norm_is("a // comment\nb", "a\nb"));
    KV_CHECK(norm_is("a // comment", "a"));
    KV_CHECK(norm_is("/* lead */ a", "a"));
    KV_CHECK(norm_is("a /* multi\nline\n*/ b", "a b"));
    KV_CHECK(norm_is("a /* unterminated", "a"));
    KV_CHECK(norm_is("a/b", "a/b"));
    KV_CHECK(norm_is("x = a / *p;", "x = a / *p;"));
    KV_CHECK(norm_is("/* a */ /* b */ c", "c"));
    KV_CHECK(norm_is("a /* x // y */ b", "a b"));
    KV_CHECK(norm_is("a // x /* y\nb */", "a\nb */"));
    KV_CHECK(norm_is("a // spliced \\\n still comment\nb", "a\nb"));

    /* Literals are copied verbatim. */
    KV_CHECK(norm_is("s = \"http://x  y\";", "s = \"http://x  y\";"));
    KV_CHECK(norm_is("s = \"/* not a comment */\";", "s = \"/* not a comment */\";"));
    KV_CHECK(norm_is("s = \"a\\\"  // b\" ;  // c", "s = \"a\\\"  // b\" ;"));
    KV_CHECK(norm_is("s = \"a\\\\\"  // c", "s = \"a\\\\\""));
    KV_CHECK(norm_is("c = '\"'  ;", "c = '\"' ;"));
    KV_CHECK(norm_is("c = '\\''  ; d = '/'", "c = '\\'' ; d = '/'"));
    KV_CHECK(norm_is("c = '/' /* x */ ;", "c = '/' ;"));
    KV_CHECK(norm_is("s = \"\t\";", "s = \"\t\";"));
    KV_CHECK(norm_is("u8'x'  L'y'", "u8'x' L'y'"));

    /* C++14 digit separators do not start character literals. */
    KV_CHECK(norm_is("n = 1'000'000;   // m", "n = 1'000'000;"));
    KV_CHECK(norm_is("h = 0xFF'FF'FF;  x", "h = 0xFF'FF'FF; x"));

    /* A stray quote only affects its own line. */
    KV_CHECK(norm_is("#error don't\n  int   x;", "#error don't\nint x;"));

    const char *a = "__global__ void k(float *x) {\n"
                    "    // scale\n"
                    "    x[threadIdx.x] *= 2.0f; /* in place */\n"
                    "}\n";
    const char *b = "/* header */ __global__   void k(float *x) {\r\n"
                    "\tx[threadIdx.x]\t*= 2.0f;\n"
                    "  // trailing note\n"
                    "}";
    const char *c = "__global__ void k(float *x) {\n"
                    "    x[threadIdx.x] *= 3.0f;\n"
                    "}\n";
    const char *d = "__global__ void k(float *x) {\n x[threadIdx.x] *= 2.0f;\n} ";
    uint8_t ha[KV_SHA256_LEN], hb[KV_SHA256_LEN], hc[KV_SHA256_LEN], hd[KV_SHA256_LEN];
    KV_REQUIRE(kv_source_hash(a, strlen(a), ha) == 0);
    KV_REQUIRE(kv_source_hash(b, strlen(b), hb) == 0);
    KV_REQUIRE(kv_source_hash(c, strlen(c), hc) == 0);
    KV_REQUIRE(kv_source_hash(d, strlen(d), hd) == 0);
    /* Line ends are kept (the preprocessor needs them), so a and d only
     * differ in comments, indentation and blank lines. */
    KV_CHECK(memcmp(ha, hd, sizeof ha) == 0);
    KV_CHECK(memcmp(ha, hb, sizeof ha) == 0);
    KV_CHECK(memcmp(ha, hc, sizeof ha) != 0);

    /* A directive ends at its line end: joining lines changes the program. */
    const char *m1 = "#define A 1\nint x;", *m2 = "#define A 1 int x;";
    uint8_t hm1[KV_SHA256_LEN], hm2[KV_SHA256_LEN];
    KV_REQUIRE(kv_source_hash(m1, strlen(m1), hm1) == 0);
    KV_REQUIRE(kv_source_hash(m2, strlen(m2), hm2) == 0);
    KV_CHECK(memcmp(hm1, hm2, sizeof hm1) != 0);

    /* Whitespace inside a string literal is significant. */
    const char *s1 = "puts(\"a b\");", *s2 = "puts(\"a  b\");";
    uint8_t h1[KV_SHA256_LEN], h2[KV_SHA256_LEN];
    KV_REQUIRE(kv_source_hash(s1, strlen(s1), h1) == 0);
    KV_REQUIRE(kv_source_hash(s2, strlen(s2), h2) == 0);
    KV_CHECK(memcmp(h1, h2, sizeof h1) != 0);

    /* The hash is the SHA-256 of the normalised text. */
    uint8_t hn[KV_SHA256_LEN];
    const char *dn = "__global__ void k(float *x) {\nx[threadIdx.x] *= 2.0f;\n}";
    kv_sha256(dn, strlen(dn), hn);
    KV_CHECK(memcmp(hn, hd, sizeof hn) == 0);

    /* Random bytes never break the normaliser (length bound, termination). */
    int ok = 1;
    char rb[512];
    static const char alphabet[] = "/*\"'\\ \n\tab1";
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = rng_below(sizeof rb);
        for (size_t i = 0; i < len; i++)
            rb[i] = alphabet[rng_below(sizeof alphabet - 1)];
        char *out;
        size_t ol;
        if (kv_source_normalise(rb, len, &out, &ol) != 0) {
            ok = 0;
            continue;
        }
        int this_ok = ol <= len && strlen(out) == ol;
        this_ok &= ol == 0 || (out[0] != ' ' && out[ol - 1] != ' ') || memchr(rb, '"', len) ||
                   memchr(rb, '\'', len);
        if (!this_ok)
            fprintf(stderr, "  normalise(%.*s) -> [%s]\n", (int)len, rb, out);
        ok &= this_ok;
        free(out);
    }
    KV_CHECK(ok);
}

/* ---- suggest ------------------------------------------------------------- */

static void test_suggest(void)
{
    KV_CHECK(kv_edit_distance("", "") == 0);
    KV_CHECK(kv_edit_distance("abc", "") == 3);
    KV_CHECK(kv_edit_distance("", "abc") == 3);
    KV_CHECK(kv_edit_distance("kitten", "sitting") == 3);
    KV_CHECK(kv_edit_distance("sitting", "kitten") == 3);
    KV_CHECK(kv_edit_distance("flaw", "lawn") == 2);
    KV_CHECK(kv_edit_distance("Abc", "abc") == 1);
    KV_CHECK(kv_edit_distance("same", "same") == 0);

    /* Long strings take the heap path. */
    char la[300], lb[300];
    memset(la, 'x', sizeof la - 1);
    la[sizeof la - 1] = '\0';
    memcpy(lb, la, sizeof lb);
    lb[10] = 'y';
    lb[200] = 'z';
    KV_CHECK(kv_edit_distance(la, lb) == 2);
    KV_CHECK(kv_edit_distance(la, "xxx") == sizeof la - 1 - 3);

    static const char *const keys[] = {"population",    "generations", "seed",
                                       "mutation_rate", "elites",      "seeds"};
    size_t nk = sizeof keys / sizeof keys[0];
    const char *r;
    r = kv_suggest("popultion", keys, nk);
    KV_CHECK(r && strcmp(r, "population") == 0);
    r = kv_suggest("generatoins", keys, nk);
    KV_CHECK(r && strcmp(r, "generations") == 0);
    r = kv_suggest("sed", keys, nk); /* "seed" and "seeds": nearer wins */
    KV_CHECK(r && strcmp(r, "seed") == 0);
    r = kv_suggest("seedz", keys, nk); /* distance 1 to both: first in list */
    KV_CHECK(r && strcmp(r, "seed") == 0);
    r = kv_suggest("elite", keys, nk);
    KV_CHECK(r && strcmp(r, "elites") == 0);
    KV_CHECK(kv_suggest("zzzzzzz", keys, nk) == NULL);
    KV_CHECK(kv_suggest("xyz", keys, nk) == NULL);
    KV_CHECK(kv_suggest("seed", keys, 0) == NULL);
    /* Threshold: max(2, len/3). "mutaton_rat" (11 chars → 3) is 2 away. */
    r = kv_suggest("mutaton_rat", keys, nk);
    KV_CHECK(r && strcmp(r, "mutation_rate") == 0);
    /* 12 chars → limit 4: 4 edits accepted, 5 not. */
    static const char *const one[] = {"abcdefghijkl"};
    KV_CHECK(kv_suggest("abcdefghWXYZ", one, 1) != NULL);
    KV_CHECK(kv_suggest("abcdefgVWXYZ", one, 1) == NULL);
    /* Short words: limit is 2. */
    static const char *const run[] = {"run", "list"};
    KV_CHECK(kv_suggest("rnu", run, 2) == run[0]);
    KV_CHECK(kv_suggest("xyz", run, 2) == NULL);
}

/* ---- fsutil -------------------------------------------------------------- */

static char tmp_root[256];

static int make_tmp_root(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/kevo_test_common.XXXXXX");
    return mkdtemp(tmp_root) != NULL;
}

static void remove_tree(const char *dir)
{
    char cmd[600];
    if (strncmp(dir, "/tmp/kevo_test_common.", 22) != 0)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "  could not remove %s\n", dir);
}

/* The status of a child that exits with code, or kills itself with sig. */
static int child_status(int code, int sig)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (sig)
            raise(sig);
        _exit(code);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static void test_wait_status_text(void)
{
    char t[96];
    kv_wait_status_text(child_status(1, 0), t, sizeof t);
    KV_CHECKF(strcmp(t, "exited with status 1") == 0, "%s", t); /* raw: 256 */
    kv_wait_status_text(child_status(0, SIGKILL), t, sizeof t);
    KV_CHECKF(strncmp(t, "killed by signal 9 (", 20) == 0, "%s", t);
    kv_wait_status_text(child_status(0, 0), t, sizeof t);
    KV_CHECKF(strcmp(t, "exited with status 0") == 0, "%s", t);
}

static void test_fsutil(void)
{
    KV_REQUIRE(make_tmp_root());
    kv_err err = {{0}};
    char path[512], dir[512];

    /* path_join */
    KV_CHECK(kv_path_join(path, sizeof path, "/a/b", "c.json", &err) == 0 &&
             strcmp(path, "/a/b/c.json") == 0);
    KV_CHECK(kv_path_join(path, sizeof path, "/a/b/", "c", &err) == 0 &&
             strcmp(path, "/a/b/c") == 0);
    KV_CHECK(kv_path_join(path, sizeof path, "", "c", &err) == 0 && strcmp(path, "c") == 0);
    char small[8];
    KV_CHECK(kv_path_join(small, sizeof small, "/abc", "defg", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "/abc/defg");
    KV_CHECK(kv_path_join(small, sizeof small, "/ab", "def", &err) == 0 &&
             strcmp(small, "/ab/def") == 0);
    KV_CHECK(kv_path_join(small, sizeof small, "/a", "b", NULL) == 0);

    /* mkdir_p: nested, existing, trailing and repeated slashes */
    KV_REQUIRE(kv_path_join(dir, sizeof dir, tmp_root, "x/y//z/", &err) == 0);
    KV_CHECK(kv_mkdir_p(dir, 0755, &err) == 0);
    KV_CHECK(kv_mkdir_p(dir, 0755, &err) == 0);
    struct stat st;
    KV_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));

    /* write / read round trip, overwrite, empty file */
    KV_REQUIRE(kv_path_join(path, sizeof path, dir, "f.txt", &err) == 0);
    KV_CHECK(kv_write_file_atomic(path, "hello\n", 6, &err) == 0);
    char *data = NULL;
    size_t len = 0;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == 6 &&
             strcmp(data, "hello\n") == 0);
    free(data);
    KV_CHECK(kv_write_file_atomic(path, "bye", 3, &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == 3 && strcmp(data, "bye") == 0);
    free(data);
    KV_CHECK(kv_write_file_atomic(path, "", 0, &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == 0 && data && data[0] == '\0');
    free(data);

    /* No temporary file is left behind. */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    KV_CHECK(access(tmp, F_OK) != 0);

    /* A large file with binary content reads back intact. */
    size_t bn = 1 << 20;
    uint8_t *big = malloc(bn);
    KV_REQUIRE(big != NULL);
    for (size_t i = 0; i < bn; i++)
        big[i] = (uint8_t)rng();
    KV_CHECK(kv_write_file_atomic(path, big, bn, &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == bn && memcmp(data, big, bn) == 0);
    free(data);
    free(big);

    /* Errors name the path, the call and the reason. */
    char missing[512];
    KV_REQUIRE(kv_path_join(missing, sizeof missing, tmp_root, "no/such.json", &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file(missing, &data, &len, &err) == -1);
    KV_CHECK(data == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, missing);
    KV_CHECK_STR_CONTAINS(err.msg, "open");
    KV_CHECK_STR_CONTAINS(err.msg, strerror(ENOENT));
    KV_CHECK(kv_read_file(missing, &data, &len, NULL) == -1);

    KV_CHECK(kv_write_file_atomic(missing, "x", 1, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "no/such.json");

    /* mkdir_p through a regular file fails and names it. */
    char through[600];
    snprintf(through, sizeof through, "%s/sub", path);
    KV_CHECK(kv_mkdir_p(through, 0755, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "f.txt");
    KV_CHECK(kv_mkdir_p(path, 0755, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, strerror(ENOTDIR));
    KV_CHECK(kv_mkdir_p("", 0755, &err) == -1);

    /* Reading a directory is an error, not an empty file. */
    KV_CHECK(kv_read_file(dir, &data, &len, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "x/y");

    /* A relative path in the current directory (no slash) works. */
    char cwd[512];
    KV_REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
    KV_REQUIRE(chdir(dir) == 0);
    KV_CHECK(kv_write_file_atomic("rel.txt", "r", 1, &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file("rel.txt", &data, &len, &err) == 0 && len == 1);
    free(data);
    KV_CHECK(chdir(cwd) == 0);

    remove_tree(tmp_root);
}

/* Entries of dir other than "." and ".."; -1 when it cannot be read. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* The streaming atomic writer: kv_atomic_open, kv_atomic_commit, kv_atomic_abandon. */
static void test_fsutil_atomic_stream(void)
{
    KV_REQUIRE(make_tmp_root());
    kv_err err = {{0}};
    char dir[512], path[600];
    KV_REQUIRE(kv_path_join(dir, sizeof dir, tmp_root, "stream", &err) == 0);
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    KV_REQUIRE(kv_path_join(path, sizeof path, dir, "out.txt", &err) == 0);

    /* commit makes the file with what was written, in several pieces */
    kv_atomic_file af;
    KV_REQUIRE(kv_atomic_open(&af, path, &err) == 0 && af.f != NULL);
    KV_CHECK(fputs("hello, ", af.f) >= 0);
    KV_CHECK(fprintf(af.f, "%s %d\n", "world", 42) > 0);
    KV_CHECK(access(path, F_OK) != 0); /* nothing in place before the commit */
    KV_CHECK(kv_atomic_commit(&af, &err) == 0);
    KV_CHECK(af.f == NULL);
    char *data = NULL;
    size_t len = 0;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == 16 &&
             strcmp(data, "hello, world 42\n") == 0);
    free(data);
    KV_CHECK(count_entries(dir) == 1); /* no temporary file left */
    kv_atomic_abandon(&af);            /* after a commit: nothing to do */
    KV_CHECK(access(path, F_OK) == 0);

    /* replacing: readers see the old file until the commit */
    KV_REQUIRE(kv_atomic_open(&af, path, &err) == 0);
    KV_CHECK(fputs("second", af.f) >= 0);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && len == 16);
    free(data);
    KV_CHECK(kv_atomic_commit(&af, &err) == 0);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && strcmp(data, "second") == 0);
    free(data);

    /* abandon leaves neither the file nor a temporary file */
    char fresh[600];
    KV_REQUIRE(kv_path_join(fresh, sizeof fresh, dir, "abandoned.txt", &err) == 0);
    KV_REQUIRE(kv_atomic_open(&af, fresh, &err) == 0);
    KV_CHECK(fputs("never seen", af.f) >= 0);
    KV_CHECK(count_entries(dir) == 2); /* out.txt and the temporary file */
    kv_atomic_abandon(&af);
    KV_CHECK(af.f == NULL);
    KV_CHECK(access(fresh, F_OK) != 0);
    KV_CHECK(count_entries(dir) == 1);
    kv_atomic_abandon(&af); /* twice: nothing to do */

    /* abandoning a replacement keeps the old file as it was */
    KV_REQUIRE(kv_atomic_open(&af, path, &err) == 0);
    KV_CHECK(fputs("third", af.f) >= 0);
    kv_atomic_abandon(&af);
    data = NULL;
    KV_CHECK(kv_read_file(path, &data, &len, &err) == 0 && strcmp(data, "second") == 0);
    free(data);
    KV_CHECK(count_entries(dir) == 1);

    /* a directory that cannot be written: the error names the path, and
     * abandon after a failed open does nothing */
    char ro[512], inside[600];
    KV_REQUIRE(kv_path_join(ro, sizeof ro, tmp_root, "readonly", &err) == 0);
    KV_REQUIRE(kv_mkdir_p(ro, 0755, &err) == 0);
    KV_REQUIRE(chmod(ro, 0555) == 0);
    KV_REQUIRE(kv_path_join(inside, sizeof inside, ro, "out.txt", &err) == 0);
    if (access(ro, W_OK) != 0) { /* root writes anyway: nothing to test then */
        KV_CHECK(kv_atomic_open(&af, inside, &err) == -1);
        KV_CHECK(af.f == NULL);
        KV_CHECK_STR_CONTAINS(err.msg, inside);
        KV_CHECK_STR_CONTAINS(err.msg, strerror(EACCES));
        kv_atomic_abandon(&af);
        KV_CHECK(count_entries(ro) == 0);
    }
    KV_CHECK(chmod(ro, 0755) == 0);
    /* /proc takes no new files, not even root's (Linux) */
    if (access("/proc/self", F_OK) == 0) {
        KV_CHECK(kv_atomic_open(&af, "/proc/kevo_test_common.txt", &err) == -1);
        KV_CHECK(af.f == NULL);
        KV_CHECK_STR_CONTAINS(err.msg, "/proc/kevo_test_common.txt");
    }

    /* the same when the directory is missing, or is a regular file */
    char missing[600], through[700];
    KV_REQUIRE(kv_path_join(missing, sizeof missing, tmp_root, "no/such/out.txt", &err) == 0);
    KV_CHECK(kv_atomic_open(&af, missing, &err) == -1);
    KV_CHECK(af.f == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, missing);
    KV_CHECK_STR_CONTAINS(err.msg, strerror(ENOENT));
    kv_atomic_abandon(&af);
    snprintf(through, sizeof through, "%s/out.txt", path);
    KV_CHECK(kv_atomic_open(&af, through, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, through);
    KV_CHECK_STR_CONTAINS(err.msg, strerror(ENOTDIR));

    /* a path too long for the temporary name is an error, not a truncation */
    char *lng = malloc(PATH_MAX + 16);
    KV_REQUIRE(lng != NULL);
    memset(lng, 'a', PATH_MAX + 15);
    lng[PATH_MAX + 15] = '\0';
    KV_CHECK(kv_atomic_open(&af, lng, &err) == -1);
    KV_CHECK(af.f == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, strerror(ENAMETOOLONG));
    free(lng);

    /* kv_write_file_atomic goes through the same code: same errors */
    KV_CHECK(kv_write_file_atomic(through, "x", 1, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, through);

    remove_tree(tmp_root);
}

/* ---- clock --------------------------------------------------------------- */

static void test_clock(void)
{
    char buf[32];
    kv_format_utc(0, buf, sizeof buf);
    KV_CHECK(strcmp(buf, "1970-01-01T00:00:00Z") == 0);
    kv_format_utc(1795323600LL * 1000000000 + 999999999, buf, sizeof buf);
    KV_CHECK(strcmp(buf, "2026-11-22T05:00:00Z") == 0);
    kv_format_utc(951782400LL * 1000000000, buf, sizeof buf); /* leap day */
    KV_CHECK(strcmp(buf, "2000-02-29T00:00:00Z") == 0);
    kv_format_utc(-1, buf, sizeof buf); /* rounds down, not towards zero */
    KV_CHECK(strcmp(buf, "1969-12-31T23:59:59Z") == 0);
    kv_format_utc(0, buf, 21);
    KV_CHECK(strlen(buf) == 20);
    kv_format_utc(0, buf, 10); /* too small: empty, not truncated garbage */
    KV_CHECK(buf[0] == '\0');

    int64_t w = kv_wall_ns();
    KV_CHECK(w > 1600000000LL * 1000000000); /* after 2020 */
    kv_format_utc(w, buf, sizeof buf);
    KV_CHECK(strlen(buf) == 20 && buf[10] == 'T' && buf[19] == 'Z');

    int64_t a = kv_monotonic_ns();
    int64_t b = kv_monotonic_ns();
    KV_CHECK(a > 0 && b >= a);
}

int main(void)
{
    KV_RUN(test_sha256_vectors);
    KV_RUN(test_sha256_incremental);
    KV_RUN(test_source_normalise);
    KV_RUN(test_suggest);
    KV_RUN(test_wait_status_text);
    KV_RUN(test_fsutil);
    KV_RUN(test_fsutil_atomic_stream);
    KV_RUN(test_clock);
    return kv_test_summary();
}
