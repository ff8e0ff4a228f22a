/* hostcheck_cc.c — a problem's check.c to a shared object: the system C
 * compiler with kevo's flags, and a cache keyed by content (hostcheck.h).
 *
 * An entry is one file, <cache>/hostcheck/<key>.so. A compilation runs in
 * a private directory <cache>/hostcheck/.tmp-<pid>-XXXXXX holding check.c
 * (the source behind a #line directive that names the problem's file, so
 * that the compiler's messages name it and its lines) and tmp/ (the
 * compiler's TMPDIR); the object is fsync'ed and renamed into place, so an
 * entry is complete or absent. The copy also keeps the source one file: an
 * include of something beside check.c is not found (and could not be part
 * of the key). Failed compilations are not cached. */
#include "evaluator/checks/hostcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "common/fsutil.h"
#include "common/strbuf.h"
#include "evaluator/compile/compile_internal.h"

#define VERSION_TIMEOUT_S 30.0
#define ERROR_LINES 20 /* of the compiler's output, in an error (which kv_err cuts at 1 KiB) */

/* The flags of every compilation (part of the key): C11, optimised, no FP
 * contraction (a check's arithmetic is the one it wrote), a misspelt function
 * an error at its line rather than a missing symbol at load time, and every
 * symbol resolved when linking (libc and libm). */
static const char *const cc_flags[] = {
    "-std=c11",
    "-O2",
    "-fPIC",
    "-shared",
    "-ffp-contract=off",
    "-fdiagnostics-color=never",
    "-Werror=implicit-function-declaration",
    "-Wl,-z,defs",
};
#define N_FLAGS (sizeof cc_flags / sizeof cc_flags[0])

void kv_hostcheck_find_cc(char *out, size_t cap)
{
    const char *env = getenv("KEVO_CC");
    if (env && *env && kv_compile_copy_str(out, cap, env) == 0)
        return;
    if (kv_compile_find_on_path("cc", out, cap) == 0)
        return;
    (void)kv_compile_copy_str(out, cap, "/usr/bin/cc");
}

/* `cc --version`, run once per process and compiler path. */
static struct {
    char path[PATH_MAX];
    char *text;
} version_cache;

static int cc_version(const char *cc, const char **text, kv_err *err)
{
    if (version_cache.text && strcmp(version_cache.path, cc) == 0) {
        *text = version_cache.text;
        return 0;
    }
    if (!kv_compile_is_exec_file(cc))
        return kv_err_set(
            err,
            "cannot run the C compiler %s: %s (kevo compiles a problem's "
            "check.c with it; set KEVO_CC to another)",
            cc, access(cc, F_OK) == 0 ? "not an executable file" : "No such file or directory");
    char *argv[] = {(char *)cc, "--version", NULL};
    char *out = NULL;
    int status = 0, timed_out = 0;
    if (kv_compile_run_capture(argv, NULL, VERSION_TIMEOUT_S, &out, &status, &timed_out, err) != 0)
        return kv_err_prefix(err, "cannot run the C compiler %s", cc);
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[128];
        kv_wait_status_text(status, how, sizeof how);
        kv_err_set(err, "cannot run the C compiler %s: `--version` %s: %.200s", cc,
                   timed_out ? "did not finish in time" : how, out);
        free(out);
        return -1;
    }
    free(version_cache.text);
    version_cache.text = out;
    (void)kv_compile_copy_str(version_cache.path, sizeof version_cache.path, cc);
    *text = out;
    return 0;
}

static void hash_field(kv_sha256_ctx *h, const char *tag, const void *data, size_t len)
{
    uint64_t n = len;
    kv_sha256_update(h, tag, strlen(tag) + 1);
    kv_sha256_update(h, &n, sizeof n);
    kv_sha256_update(h, data, len);
}

static int cache_key(const kv_compile_opts *o, const char *cc, const char *path, const char *src,
                     size_t len, char key[KV_SHA256_HEX_LEN], kv_err *err)
{
    const char *version = NULL;
    if (cc_version(cc, &version, err) != 0)
        return -1;
    char hpath[PATH_MAX];
    char *header = NULL;
    size_t hlen = 0;
    if (kv_path_join(hpath, sizeof hpath, o->include_dir, "kevo/check.h", err) != 0)
        return -1;
    if (kv_read_file_max(hpath, KV_MAX_SOURCE_BYTES, &header, &hlen, err) != 0)
        return kv_err_prefix(err, "the host check API");
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    hash_field(&h, "kevo-hostcheck-key", "1", 1);
    hash_field(&h, "source", src, len);
    hash_field(&h, "path", path, strlen(path)); /* __FILE__ and the messages */
    for (size_t i = 0; i < N_FLAGS; i++)
        hash_field(&h, "flag", cc_flags[i], strlen(cc_flags[i]));
    hash_field(&h, "cc", cc, strlen(cc));
    hash_field(&h, "cc-version", version, strlen(version));
    hash_field(&h, "check.h", header, hlen);
    free(header);
    uint8_t d[KV_SHA256_LEN];
    if (kv_sha256_final(&h, d) != 0)
        return kv_err_set(err, "host check cache key: SHA-256 (libcrypto) failed");
    kv_sha256_hex(d, key);
    return 0;
}

/* The source behind `#line 1 "<path>"` (the path's quotes, backslashes and
 * control characters escaped). */
static int write_source(const char *file, const char *path, const char *src, size_t len,
                        kv_err *err)
{
    kv_strbuf b = {0};
    kv_sb_puts(&b, "#line 1 \"");
    for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
        if (*s == '"' || *s == '\\')
            kv_sb_printf(&b, "\\%c", *s);
        else if (*s < 0x20 || *s == 0x7f)
            kv_sb_printf(&b, "\\%03o", *s);
        else
            kv_sb_put(&b, (const char *)s, 1);
    }
    kv_sb_puts(&b, "\"\n");
    kv_sb_put(&b, src, len);
    if (b.oom) {
        kv_sb_free(&b);
        return kv_err_set(err, "out of memory");
    }
    int rc = kv_write_file_atomic(file, b.p, b.len, err);
    kv_sb_free(&b);
    return rc;
}

/* The first ERROR_LINES lines of the compiler's output (the first error comes first). */
static void compiler_error(kv_err *err, const char *path, const char *cc, const char *out)
{
    const char *s = out;
    int lines = 0;
    while (*s && lines < ERROR_LINES) {
        const char *e = strchr(s, '\n');
        s = e ? e + 1 : s + strlen(s);
        lines++;
    }
    const char *end = s;
    while (end > out && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\r'))
        end--;
    kv_err_set(err, "%s does not compile (%s):\n%.*s%s", path, cc, (int)(end - out), out,
               *s ? "\n(more lines cut)" : "");
}

static int fsync_path(const char *path, int dir, kv_err *err)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fsync %s", path);
    }
    if (close(fd) != 0)
        return kv_err_errno(err, errno, "close %s", path);
    return 0;
}

/* Runs the compiler in tmpdir and moves its object to final. */
static int compile_into(const kv_compile_opts *o, const char *cc, const char *path, const char *src,
                        size_t len, const char *tmpdir, const char *final, kv_err *err)
{
    char file[PATH_MAX], so[PATH_MAX], tmp[PATH_MAX], inc[PATH_MAX + 2];
    if (kv_path_join(file, sizeof file, tmpdir, "check.c", err) != 0 ||
        kv_path_join(so, sizeof so, tmpdir, "check.so", err) != 0 ||
        kv_path_join(tmp, sizeof tmp, tmpdir, "tmp", err) != 0)
        return -1;
    if ((size_t)snprintf(inc, sizeof inc, "-I%s", o->include_dir) >= sizeof inc)
        return kv_err_set(err, "include directory %s: path too long", o->include_dir);
    if (mkdir(tmp, 0700) != 0)
        return kv_err_errno(err, errno, "mkdir %s", tmp);
    if (write_source(file, path, src, len, err) != 0)
        return -1;
    char *argv[N_FLAGS + 8];
    size_t n = 0;
    argv[n++] = (char *)cc;
    for (size_t i = 0; i < N_FLAGS; i++)
        argv[n++] = (char *)cc_flags[i];
    argv[n++] = inc;
    argv[n++] = "-o";
    argv[n++] = so;
    argv[n++] = file;
    argv[n++] = "-lm";
    argv[n] = NULL;
    char **env = kv_compile_env_with_tmpdir(tmp);
    if (!env)
        return kv_err_set(err, "out of memory");
    char *out = NULL;
    int status = 0, timed_out = 0;
    int rc = kv_compile_run_capture(argv, env, o->timeout_s > 0 ? o->timeout_s : 120, &out, &status,
                                    &timed_out, err);
    kv_env_free(env);
    if (rc != 0)
        return kv_err_prefix(err, "%s: running the C compiler %s", path, cc);
    if (timed_out)
        rc = kv_err_set(err, "%s: the C compiler %s did not finish in %.3g s", path, cc,
                        o->timeout_s);
    else if (strncmp(out, KVC_EXEC_FAILED, strlen(KVC_EXEC_FAILED)) == 0)
        rc = kv_err_set(err, "%s: cannot run the C compiler %s: %s", path, cc,
                        strerror(atoi(out + strlen(KVC_EXEC_FAILED))));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (*out) {
            compiler_error(err, path, cc, out);
        } else {
            char how[128];
            kv_wait_status_text(status, how, sizeof how);
            kv_err_set(err, "%s does not compile: %s %s, saying nothing", path, cc, how);
        }
        rc = -1;
    }
    free(out);
    if (rc != 0)
        return -1;
    if (fsync_path(so, 0, err) != 0)
        return -1;
    if (rename(so, final) != 0)
        return kv_err_errno(err, errno, "rename %s to %s", so, final);
    return 0;
}

int kv_hostcheck_compile(const kv_compile_opts *o, const char *check_path, char *so, int *cached,
                         kv_err *err)
{
    char cc[PATH_MAX], key[KV_SHA256_HEX_LEN], dir[PATH_MAX];
    *cached = 0;
    so[0] = '\0';
    kv_hostcheck_find_cc(cc, sizeof cc);
    char *src = NULL;
    size_t len = 0;
    if (kv_read_file_max(check_path, KV_MAX_SOURCE_BYTES, &src, &len, err) != 0)
        return -1;
    if (cache_key(o, cc, check_path, src, len, key, err) != 0) {
        free(src);
        return -1;
    }
    char name[KV_SHA256_HEX_LEN + 4];
    snprintf(name, sizeof name, "%s.so", key);
    if (kv_path_join(dir, sizeof dir, o->cache_dir, "hostcheck", err) != 0 ||
        kv_path_join(so, PATH_MAX, dir, name, err) != 0 || kv_mkdir_p(dir, 0755, err) != 0) {
        free(src);
        return -1;
    }
    struct stat st;
    if (stat(so, &st) == 0 && S_ISREG(st.st_mode)) {
        free(src);
        *cached = 1;
        return 0;
    }
    kv_compile_cache_clean_stale(dir);
    char tmpdir[PATH_MAX];
    if ((size_t)snprintf(tmpdir, sizeof tmpdir, "%s/.tmp-%ld-XXXXXX", dir, (long)getpid()) >=
        sizeof tmpdir) {
        free(src);
        return kv_err_set(err, "host check cache %s: path too long", dir);
    }
    if (!mkdtemp(tmpdir)) {
        free(src);
        return kv_err_errno(err, errno, "mkdtemp %s", tmpdir);
    }
    int rc = compile_into(o, cc, check_path, src, len, tmpdir, so, err);
    free(src);
    if (kv_rm_rf(tmpdir) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "remove %s", tmpdir);
    if (rc == 0)
        rc = fsync_path(dir, 1, err);
    if (rc != 0)
        so[0] = '\0';
    return rc;
}
