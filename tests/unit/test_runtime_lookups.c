/* test_runtime_lookups.c — the static guard against runtime lookups
 * (evaluator/checks/runtime_lookups.c) and its place in kv_eval_after_compile:
 *  - no seed, candidate, reference, inputs hook or compiled fixture's
 *    imports is refused, nor a hostile candidate that expects another
 *    verdict (tests/hostile/driver_entry_point.cu and fork_bomb.cu are refused, and
 *    multicast_elf_walk.cu is not: only the worker's run-time trap sees it);
 *  - crafted sources and import lists are each refused, naming the call
 *    and its line;
 *  - names inside comments, literals and other identifiers are not;
 *  - the verdict is refused unless the options allow runtime lookups. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "evaluator/pipeline.h"
#include "evaluator/checks/runtime_lookups.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

static const char *root(void)
{
    const char *r = getenv("KEVO_SOURCE_DIR");
    return r && *r ? r : ".";
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* ---- the tree: nothing that exists today is refused ------------------------------------------- */

static int checked_files;

/* The expected verdict of a hostile candidate's first line, or "". */
static void expected_verdict(const char *src, char *out, size_t cap)
{
    out[0] = '\0';
    const char *e = strncmp(src, "// expect:", 10) == 0 ? src + 10 : NULL;
    if (!e)
        return;
    while (*e == ' ')
        e++;
    size_t n = strcspn(e, " \n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), e);
}

static void check_file(const char *path, int is_imports)
{
    char *text = NULL;
    kv_err err = {{0}};
    if (kv_read_file(path, &text, NULL, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        return;
    }
    kv_lookup_hit hit;
    int found = is_imports ? kv_find_runtime_lookup(NULL, text, &hit)
                           : kv_find_runtime_lookup(text, NULL, &hit);
    char want[32] = "";
    if (!is_imports)
        expected_verdict(text, want, sizeof want);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strcmp(base, "driver_entry_point.cu") == 0) {
        KV_CHECKF(found && strcmp(hit.name, "cudaGetDriverEntryPoint") == 0,
                  "%s: not refused, or for %s", path, found ? hit.name : "nothing");
    } else if (strcmp(base, "fork_bomb.cu") == 0) {
        KV_CHECKF(found && strcmp(hit.name, "fork") == 0, "%s: not refused, or for %s", path,
                  found ? hit.name : "nothing");
    } else {
        char msg[1024] = "";
        if (found)
            kv_lookup_hit_message(&hit, msg, sizeof msg);
        KV_CHECKF(!found, "%s (expects %s) refused: %s", path, want[0] ? want : "ok", msg);
    }
    checked_files++;
    free(text);
}

/* Every file under dir (recursively when deep) whose name ends with tail. */
static void check_dir(const char *dir, const char *tail, int deep, int is_imports)
{
    DIR *d = opendir(dir);
    KV_REQUIRE(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && deep)
            check_dir(path, tail, deep, is_imports);
        else if (S_ISREG(st.st_mode) && ends_with(e->d_name, tail))
            check_file(path, is_imports);
    }
    closedir(d);
}

static void test_tree_passes(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/patterns", root());
    check_dir(dir, ".cu", 1, 0);
    snprintf(dir, sizeof dir, "%s/tests/candidates", root());
    check_dir(dir, ".cu", 0, 0);
    snprintf(dir, sizeof dir, "%s/tests/hostile", root());
    check_dir(dir, ".cu", 0, 0);
    snprintf(dir, sizeof dir, "%s/problems", root());
    check_dir(dir, "reference.cu", 1, 0);
    check_dir(dir, "inputs.cu", 1, 0);
    snprintf(dir, sizeof dir, "%s/tests/fixtures/classify", root());
    check_dir(dir, ".imports", 0, 1);
    /* 48 seeds, the candidates, 14 problems with references and hooks, fixtures */
    KV_CHECKF(checked_files > 80, "only %d files checked", checked_files);
}

/* ---- crafted sources and imports ----------------------------------------------------------- */

typedef struct {
    const char *source;  /* or NULL */
    const char *imports; /* or NULL */
    const char *name;    /* the refused name, or NULL: not refused */
    int line;            /* its line (0: the imports) */
} crafted;

static void test_crafted(void)
{
    static const crafted cases[] = {
        /* the issue's case and its relatives */
        {"int f() {\n  void *p;\n  cudaGetDriverEntryPoint(n, &p, 0, 0);\n}\n", NULL,
         "cudaGetDriverEntryPoint", 3},
        {"x = cudaGetDriverEntryPointByVersion(n, &p, 12010, 0, 0);", NULL,
         "cudaGetDriverEntryPointByVersion", 1},
        {"CUresult r = cuGetProcAddress_v2(\"cuMemAlloc\", &p, 12000, 0, 0);", NULL,
         "cuGetProcAddress_v2", 1},
        {"cuGetExportTable(&t, &id);", NULL, "cuGetExportTable", 1},
        {"#include <dlfcn.h>\nvoid *h = dlopen(\"libcuda.so.1\", RTLD_NOW);\n", NULL, "dlopen", 2},
        {"auto f = (fn)dlsym(RTLD_DEFAULT, name);", NULL, "dlsym", 1},
        {"dlvsym(h, n, v);", NULL, "dlvsym", 1},
        {"dlmopen(LM_ID_NEWLM, p, 0);", NULL, "dlmopen", 1},
        {"dl_iterate_phdr(cb, 0);", NULL, "dl_iterate_phdr", 1},
        {"extern struct r_debug _r_debug;", NULL, "_r_debug", 1},
        {"__libc_dlopen_mode(p, 2);", NULL, "__libc_dlopen_mode", 1},
        {"dladdr1(p, &i, &m, RTLD_DL_LINKMAP);", NULL, "dladdr1", 1},
        {"long b = getauxval(AT_BASE);", NULL, "getauxval", 1},
        {"syscall(SYS_mprotect, a, n, 7);", NULL, "syscall", 1},
        {"long (*s)(long, ...) = &syscall;", NULL, "syscall", 1},
        {"cuModuleLoadData(&m, image);", NULL, "cuModuleLoadData", 1},
        {"cuLibraryLoadFromFile(&l, p, 0, 0, 0, 0, 0, 0);", NULL, "cuLibraryLoadFromFile", 1},
        {"cudaLibraryLoadData(&l, image, 0, 0, 0, 0, 0, 0);", NULL, "cudaLibraryLoadData", 1},
        {"cuLinkCreate_v2(0, 0, 0, &s);", NULL, "cuLinkCreate_v2", 1},
        {"nvrtcCreateProgram(&p, src, 0, 0, 0, 0);", NULL, "nvrtcCreateProgram", 1},
        {"nvJitLinkCreate(&h, 1, opts);", NULL, "nvJitLinkCreate", 1},
        {"pid_t p = fork();", NULL, "fork", 1},
        {"forkpty(&m, 0, 0, 0);", NULL, "forkpty", 1},
        {"vfork();", NULL, "vfork", 1},
        {"clone(fn, stack, 0, 0);", NULL, "clone", 1},
        {"execve(p, argv, envp);", NULL, "execve", 1},
        {"execlp(\"sh\", \"sh\", 0);", NULL, "execlp", 1},
        {"posix_spawnp(&pid, \"sh\", 0, 0, argv, envp);", NULL, "posix_spawnp", 1},
        {"std::system(\"nvidia-smi\");", NULL, "system", 1},
        {"FILE *f = popen(\"ls\", \"r\");", NULL, "popen", 1},
        {"mprotect(page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);", NULL, "mprotect", 1},
        {"void *m = mmap(at, n, PROT_READ | PROT_EXEC, MAP_FIXED | MAP_PRIVATE, fd, 0);", NULL,
         "mmap", 1},
        /* a line splice inside the name does not hide it; nor do literals before it */
        {"char q = '\"';\nvoid *f = dl\\\nsym(h, n);\n", NULL, "dlsym", 2},
        {"const char *s = \"a \\\" b\"; /* x */ dlopen(p, 0);", NULL, "dlopen", 1},
        {"auto s = R\"x(fork)\" )x\"; system(s);", NULL, "system", 1},
        {"// a comment \\\n still the comment: fork\nfork();", NULL, "fork", 3},
        /* the imports of a compiled candidate */
        {NULL, "__cxa_atexit@GLIBC_2.2.5\ncudaGetDriverEntryPoint@libcudart.so.13\n",
         "cudaGetDriverEntryPoint", 0},
        {NULL,
         "                 U cudaMalloc@libcudart.so.13\n                 U dlsym@GLIBC_2.34\n",
         "dlsym", 0},
        {NULL, "ncclAllReduce\ncuGetProcAddress_v2\n", "cuGetProcAddress_v2", 0},
        {NULL, "fork@GLIBC_2.2.5", "fork", 0},
        {NULL, "syscall@GLIBC_2.2.5\n", "syscall", 0},
        {NULL, "nvrtcCompileProgram\n", "nvrtcCompileProgram", 0},
        /* the source first, then the imports */
        {"int ok;\nfork();\n", "dlsym\n", "fork", 2},
        {"int ok;\n", "dlsym\n", "dlsym", 0},
        /* not refused: comments, literals, other identifiers, numbers */
        {"// fork a side stream, then system-scope fences; dlopen is the worker's\n"
         "/* syscall, exec, popen, mmap */ int x;\n",
         NULL, NULL, 0},
        {"fprintf(stderr, \"fork failed: dlsym system\\n\"); char c = 'f';", NULL, NULL, 0},
        {"auto s = R\"delim(dlopen(\"x\") system)delim\";", NULL, NULL, 0},
        {"cuda::atomic_ref<int, cuda::thread_scope_system> a(v); __threadfence_system();", NULL,
         NULL, 0},
        {"int my_dlsym, dlsym_count, forked, clone_of, executes, systems, mmapped;", NULL, NULL, 0},
        {"double e = 1e5, f = 0x1p-3; long g = 1'000'000; int fork_ = 0;", NULL, NULL, 0},
        {"#include <dlfcn.h>\n", NULL, NULL, 0},
        {NULL, "cudaMalloc@libcudart.so.13\nncclAllReduce\n__cxa_finalize\nmy_dlsym\nforking\n",
         NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const crafted *c = &cases[i];
        kv_lookup_hit hit;
        int found = kv_find_runtime_lookup(c->source, c->imports, &hit);
        const char *what = c->source ? c->source : c->imports;
        if (!c->name) {
            KV_CHECKF(!found, "case %zu (%s): refused for %s", i, what, hit.name);
            continue;
        }
        KV_CHECKF(found, "case %zu (%s): not refused", i, what);
        if (!found)
            continue;
        KV_CHECKF(strcmp(hit.name, c->name) == 0 && hit.line == c->line,
                  "case %zu (%s): refused for %s at line %d, expected %s at line %d", i, what,
                  hit.name, hit.line, c->name, c->line);
        char msg[1024];
        kv_lookup_hit_message(&hit, msg, sizeof msg);
        KV_CHECK_STR_CONTAINS(msg, c->name);
        KV_CHECK_STR_CONTAINS(msg, c->line ? "at candidate.cu line" : "imports ");
        KV_CHECK_STR_CONTAINS(msg, "allow_runtime_lookups");
    }
    /* the message quotes the line */
    kv_lookup_hit hit;
    KV_REQUIRE(kv_find_runtime_lookup("int a;\n    void *f = dlsym(h, n);   \n", NULL, &hit));
    char msg[1024];
    kv_lookup_hit_message(&hit, msg, sizeof msg);
    KV_CHECK_STR_CONTAINS(msg, "uses dlsym (finds symbols through the dynamic linker) at "
                               "candidate.cu line 2: `void *f = dlsym(h, n);`");
}

/* ---- a corpus of tricky sources ------------------------------------------------------------ */

/* Each case says whether the compiler reads _DYNAMIC as a name (then the
 * scan must find it) or as the inside of a comment or literal (then it
 * must not), as g++ -std=c++17 (nvcc's flags) tokenizes it. */
typedef struct {
    const char *source;
    int found; /* 1: _DYNAMIC must be found, at line */
    int line;
    const char *why;
} tricky;

static void test_tricky_corpus(void)
{
    static const tricky cases[] = {
        {"#define xR\nauto s = xR\"(abc\"; void *p = &_DYNAMIC; auto t = \")\";\n", 1, 2,
         "xR is no raw-string prefix: an identifier, then ordinary strings"},
        {"#define bR\nauto s = bR\"(\"; void *p = &_DYNAMIC; auto t = \")\";\n", 1, 2,
         "nor is any other identifier ending in R"},
        {"auto s = u8\"(\"; void *p = &_DYNAMIC; auto t = \")\";\n", 1, 1,
         "u8 without R: an ordinary string"},
        {"auto s = R\"(\" _DYNAMIC \")\";\n", 0, 0, "R: a raw string up to )\""},
        {"auto s = LR\"(\" _DYNAMIC \")\";\n", 0, 0, "LR: a raw string"},
        {"auto s = uR\"(\" _DYNAMIC \")\";\n", 0, 0, "uR: a raw string"},
        {"auto s = UR\"(\" _DYNAMIC \")\";\n", 0, 0, "UR: a raw string"},
        {"auto s = u8R\"(\" _DYNAMIC \")\";\n", 0, 0, "u8R: a raw string"},
        {"#define uR\nauto s = uR\"(\" _DYNAMIC \")\";\n", 0, 0,
         "a macro named like a prefix still lexes as one: the raw string comes first"},
        {"auto s = R\"xy()\" _DYNAMIC )\"x )xy\";\n", 0, 0,
         "only )delim\" ends a raw string: )\" and )\"x do not"},
        {"auto s = R\"xy(a)xy\"; void *p = &_DYNAMIC;\n", 1, 1, "after )delim\" the code goes on"},
        {"auto s = R\"(a \" // /* )\"; void *p = &_DYNAMIC;\n", 1, 1,
         "a quote and comment openers inside a raw string"},
        {"auto s = R\"abcdefghijklmnop(x)abcdefghijklmnop\"; void *p = &_DYNAMIC;\n", 1, 1,
         "a delimiter of 16 characters"},
        {"auto s = R\")x(\"; void *p = &_DYNAMIC; auto t = \")x\";\n", 1, 1,
         "a ) in the delimiter makes no raw string (the compiler refuses it)"},
        {"auto s = R\"x(a)\\\nx\" _DYNAMIC )x\";\n", 0, 0,
         "a splice inside a raw string is text: )\\ newline x\" does not end it"},
        {"auto s = R\\\n\"(\" _DYNAMIC \")\";\n", 0, 0,
         "a splice between the prefix and the quote is removed first"},
        {"auto s = \"/*\"; void *p = &_DYNAMIC; auto t = \"*/\";\n", 1, 1,
         "comment openers inside strings"},
        {"/* \" */ void *p = &_DYNAMIC; /* \" */\n", 1, 1, "quotes inside comments"},
        {"// ' \nvoid *p = &_DYNAMIC; // '\n", 1, 2, "an apostrophe in a line comment"},
        {"// a comment \\\n_DYNAMIC\n", 0, 0, "a splice continues a line comment"},
        {"// a trigraph ?\?/\nvoid *p = &_DYNAMIC;\n", 1, 2,
         "no trigraphs in C++17: ?\?/ is no splice"},
        {"/\\\n* _DYNAMIC *\\\n/ int x;\n", 0, 0, "splices inside the comment's delimiters"},
        {"void *p = &_DYN\\\nAMIC;\n", 1, 1, "a splice inside the name"},
        {"void *p = &_DYN\\\r\nAMIC;\n", 1, 1, "a CRLF splice inside the name"},
        {"auto s = \"a\\\\\"; void *p = &_DYNAMIC;\n", 1, 1, "an escaped backslash ends a string"},
        {"auto s = \"a\\\\\n\" _DYNAMIC \";\n", 0, 0,
         "\\\\ then newline: the second backslash splices, \\\" is an escaped quote"},
        {"char q = '\"'; void *p = &_DYNAMIC; char r = '\"';\n", 1, 1, "quotes in characters"},
        {"char q = '\\''; void *p = &_DYNAMIC;\n", 1, 1, "an escaped apostrophe"},
        {"auto c = u8'x', d = L'\"'; void *p = &_DYNAMIC;\n", 1, 1, "prefixed characters"},
        {"long n = 1'000'000; void *p = &_DYNAMIC;\n", 1, 1, "digit separators"},
        {"auto s = \"x\"_DYNAMIC;\n", 1, 1,
         "a user-defined literal's suffix is an identifier the scan sees (conservative)"},
        {"auto n = 12_DYNAMIC;\n", 0, 0,
         "inside a number it is the suffix of one (operator\"\"_DYNAMIC), not the symbol"},
        {"%:define D &_DYNAMIC\nvoid *p = D;\n", 1, 1, "a digraph directive"},
        {"#define P(x) x\nvoid *p = P(&_DYNAMIC);\n", 1, 2, "a macro's argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tricky *c = &cases[i];
        kv_lookup_hit hit;
        int found = kv_find_runtime_lookup(c->source, NULL, &hit);
        if (!c->found) {
            KV_CHECKF(!found, "case %zu (%s): %s found, at line %d", i, c->why, hit.name, hit.line);
            continue;
        }
        KV_CHECKF(found && strcmp(hit.name, "_DYNAMIC") == 0 && hit.line == c->line,
                  "case %zu (%s): %s at line %d, expected _DYNAMIC at line %d", i, c->why,
                  found ? hit.name : "nothing", found ? hit.line : 0, c->line);
    }
}

/* ---- the verdict --------------------------------------------------------------------------- */

static void test_after_compile(void)
{
    char dir[4096], path[4200];
    kv_test_fresh_dir(dir, sizeof dir, "lookups");
    snprintf(path, sizeof path, "%s/imports.txt", dir);
    FILE *f = fopen(path, "w");
    KV_REQUIRE(f != NULL);
    fputs("__cxa_atexit@GLIBC_2.2.5\ndlsym@GLIBC_2.34\nncclAllReduce\n", f);
    KV_REQUIRE(fclose(f) == 0);
    static const char src[] = "extern \"C\" int kevo_run(kevo_ctx *ctx) { return 0; }\n";

    kv_eval_opts o;
    kv_eval_defaults(&o, root());
    kv_eval_report *r = calloc(1, sizeof *r);
    KV_REQUIRE(r != NULL);
    kv_eval_static st;
    kv_err err = {{0}};
    for (int allow = 0; allow < 2; allow++) {
        o.allow_runtime_lookups = allow;
        memset(r, 0, sizeof *r);
        r->compile.status = KV_COMPILE_OK;
        snprintf(r->compile.dir, sizeof r->compile.dir, "%s", dir);
        int rc = kv_eval_after_compile(&o, src, r, &st, &err);
        if (allow) {
            KV_CHECKF(rc == 0, "allowed: rc %d, %s: %s", rc, kv_verdict_name(r->verdict),
                      r->message);
        } else {
            KV_CHECKF(rc == 1 && r->verdict == KV_VERDICT_REFUSED, "rc %d, verdict %s", rc,
                      kv_verdict_name(r->verdict));
            KV_CHECK_STR_CONTAINS(r->message, "imports dlsym");
            KV_CHECK(r->classified);
        }
        kv_eval_static_free(&st);
        kv_eval_report_free(r);
    }
    free(r);
}

int main(void)
{
    KV_RUN(test_tree_passes);
    KV_RUN(test_crafted);
    KV_RUN(test_tricky_corpus);
    KV_RUN(test_after_compile);
    return kv_test_summary();
}
