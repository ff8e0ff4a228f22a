/* compile.c — candidate sources to shared objects: kv_compile and the
 * content-addressed cache the pool (compile_pool.c) compiles into.
 *
 * A compilation runs in a private temporary directory under the cache,
 * <cache>/.tmp-<pid>-XXXXXX, holding candidate.cu and tmp/ (nvcc's TMPDIR).
 * Once nvcc and cuobjdump have produced cand.so, cand.sass and cand.ptx,
 * the undefined dynamic symbols are read from cand.so's .dynsym
 * (imports.txt), nvcc's output becomes report.txt, every file is fsync'ed
 * and the directory is renamed to <cache>/<key>: an entry is either
 * complete or absent. */
#include "evaluator/compile/compile_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/fsutil.h"

/* ---- small file-system helpers ------------------------------------------- */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
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

/* Writes a whole file (not atomically: it lives in a private temporary
 * directory that is renamed into place as a whole). */
static int write_file(const char *path, const void *data, size_t len, kv_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return kv_err_errno(err, e, "write %s", path);
        }
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0)
        return kv_err_errno(err, errno, "close %s", path);
    return 0;
}

/* ---- defaults --------------------------------------------------------------- */

void kv_compile_defaults(kv_compile_opts *o, const char *source_root)
{
    memset(o, 0, sizeof *o);
    kv_compile_find_nvcc(o->nvcc, sizeof o->nvcc);

    const char *arch = getenv("KEVO_CUDA_ARCH");
    if (!arch || !*arch || kv_compile_copy_str(o->arch, sizeof o->arch, arch) != 0)
        (void)kv_compile_copy_str(o->arch, sizeof o->arch, "sm_90a");

    const char *root = source_root && *source_root ? source_root : ".";
    char abs_root[PATH_MAX];
    if (realpath(root, abs_root))
        root = abs_root;
    (void)kv_path_join(o->include_dir, sizeof o->include_dir, root, "include", NULL);
    (void)kv_path_join(o->patterns_dir, sizeof o->patterns_dir, root, "patterns", NULL);

    const char *env = getenv("KEVO_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (env && *env)
        (void)kv_compile_copy_str(o->cache_dir, sizeof o->cache_dir, env);
    else if (xdg && *xdg)
        (void)kv_path_join(o->cache_dir, sizeof o->cache_dir, xdg, "kevo", NULL);
    else if (home && *home)
        (void)snprintf(o->cache_dir, sizeof o->cache_dir, "%s/.cache/kevo", home);
    else
        (void)kv_compile_copy_str(o->cache_dir, sizeof o->cache_dir, "/tmp/kevo-cache");
    o->timeout_s = 120.0;
    o->jobs = 0;
}

/* ---- results ------------------------------------------------------------------ */

void kv_compile_result_free(kv_compile_result *r)
{
    if (!r)
        return;
    free(r->errors);
    free(r->report);
    free(r->sass);
    free(r->ptx);
    free(r->imports);
    memset(r, 0, sizeof *r);
}

/* ---- the cache key --------------------------------------------------------- */

static void hash_field(kv_sha256_ctx *h, const char *tag, const void *data, size_t len)
{
    uint64_t n = len;
    kv_sha256_update(h, tag, strlen(tag) + 1);
    kv_sha256_update(h, &n, sizeof n);
    kv_sha256_update(h, data, len);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Collects the relative paths of every *.h / *.cuh under dir/rel. */
static int list_headers(const char *dir, const char *rel, char ***names, size_t *n, size_t *cap,
                        int depth, kv_err *err)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel) >= sizeof path)
        return kv_err_errno(err, ENAMETOOLONG, "patterns %s/%s", dir, rel);
    DIR *d = opendir(path);
    if (!d)
        return kv_err_errno(err, errno, "opendir %s", path);
    struct dirent *de;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[PATH_MAX], full[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
                sizeof sub ||
            (size_t)snprintf(full, sizeof full, "%s/%s", dir, sub) >= sizeof full) {
            rc = kv_err_errno(err, ENAMETOOLONG, "patterns %s", de->d_name);
            break;
        }
        struct stat st;
        if (stat(full, &st) != 0) {
            rc = kv_err_errno(err, errno, "stat %s", full);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth < 8)
                rc = list_headers(dir, sub, names, n, cap, depth + 1, err);
        } else if (S_ISREG(st.st_mode) && (has_suffix(sub, ".h") || has_suffix(sub, ".cuh"))) {
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 32;
                char **nn = realloc(*names, nc * sizeof *nn);
                if (!nn) {
                    rc = kv_err_set(err, "out of memory");
                    break;
                }
                *names = nn;
                *cap = nc;
            }
            if (!((*names)[*n] = strdup(sub))) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            (*n)++;
        }
        errno = 0;
    }
    if (rc == 0 && errno != 0)
        rc = kv_err_errno(err, errno, "readdir %s", path);
    if (closedir(d) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "closedir %s", path);
    return rc;
}

static int hash_patterns(kv_sha256_ctx *h, const char *dir, kv_err *err)
{
    if (!*dir || !is_dir(dir))
        return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = list_headers(dir, "", &names, &n, &cap, 0, err);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, kv_compile_cmp_str);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char full[PATH_MAX];
        char *text = NULL;
        size_t len = 0;
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, names[i]) >= sizeof full) {
            rc = kv_err_errno(err, ENAMETOOLONG, "pattern %s/%s", dir, names[i]);
            break;
        }
        if (kv_read_file_max(full, KV_MAX_SOURCE_BYTES, &text, &len, err) != 0) {
            rc = -1;
            break;
        }
        hash_field(h, "pattern-name", names[i], strlen(names[i]));
        hash_field(h, "pattern", text, len);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* The ABI version as kernel.h defines it; -1 when it does not. */
static long abi_version_of(const char *text)
{
    const char *p = strstr(text, "#define KEVO_ABI_VERSION");
    if (!p)
        return -1;
    p += sizeof "#define KEVO_ABI_VERSION" - 1;
    char *end;
    long v = strtol(p, &end, 10);
    return end == p ? -1 : v;
}

int kv_compile_cache_key(const kv_compile_opts *o, char *const flags[], int n_flags,
                         const char *src, size_t len, char key[KV_SHA256_HEX_LEN], kv_err *err)
{
    const char *version = NULL;
    if (kv_compile_nvcc_version(o->nvcc, &version, err) != 0)
        return -1;
    char kpath[PATH_MAX];
    char *kernel_h = NULL;
    size_t klen = 0;
    if (snprintf(kpath, sizeof kpath, "%s/kevo/kernel.h", o->include_dir) >= (int)sizeof kpath)
        return kv_err_errno(err, ENAMETOOLONG, "kernel.h under %s", o->include_dir);
    if (kv_read_file_max(kpath, KV_MAX_SOURCE_BYTES, &kernel_h, &klen, err) != 0)
        return kv_err_prefix(err, "the candidate ABI");
    long abi = abi_version_of(kernel_h);
    if (abi < 0) {
        free(kernel_h);
        return kv_err_set(err, "%s does not define KEVO_ABI_VERSION", kpath);
    }
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    hash_field(&h, "kevo-compile-key", "1", 1);
    hash_field(&h, "source", src, len);
    for (int i = 0; i < n_flags; i++)
        hash_field(&h, "flag", flags[i], strlen(flags[i]));
    hash_field(&h, "nvcc-version", version, strlen(version));
    char abi_s[32];
    snprintf(abi_s, sizeof abi_s, "%ld", abi);
    hash_field(&h, "abi", abi_s, strlen(abi_s));
    hash_field(&h, "kernel.h", kernel_h, klen);
    free(kernel_h);
    if (hash_patterns(&h, o->patterns_dir, err) != 0) {
        kv_sha256_discard(&h);
        return -1;
    }
    uint8_t d[KV_SHA256_LEN];
    if (kv_sha256_final(&h, d) != 0)
        return kv_err_set(err, "compile cache key: SHA-256 (libcrypto) failed");
    kv_sha256_hex(d, key);
    return 0;
}

/* ---- cache entries -------------------------------------------------------------- */

static const char *const entry_files[] = {"cand.so", "cand.sass", "cand.ptx", "imports.txt",
                                          "report.txt"};

static int entry_complete(const char *dir)
{
    for (size_t i = 0; i < sizeof entry_files / sizeof entry_files[0]; i++) {
        char path[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, entry_files[i]) >= sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
    }
    return 1;
}

static int load_entry_file(const char *dir, const char *name, char **out, kv_err *err)
{
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, dir, name, err) != 0)
        return -1;
    return kv_read_file_max(path, KV_MAX_ARTEFACT_BYTES, out, NULL, err);
}

/* Fills an OK result from the entry <cache_dir>/<key>. */
static int load_entry(const char *cache_dir, const char *key, kv_compile_result *r, kv_err *err)
{
    memcpy(r->key, key, KV_SHA256_HEX_LEN);
    if (kv_path_join(r->dir, sizeof r->dir, cache_dir, key, err) != 0 ||
        kv_path_join(r->so_path, sizeof r->so_path, r->dir, "cand.so", err) != 0)
        return -1;
    char *report = NULL;
    if (load_entry_file(r->dir, "cand.sass", &r->sass, err) != 0 ||
        load_entry_file(r->dir, "cand.ptx", &r->ptx, err) != 0 ||
        load_entry_file(r->dir, "imports.txt", &r->imports, err) != 0 ||
        load_entry_file(r->dir, "report.txt", &report, err) != 0)
        return -1;
    r->report = report;
    char *warn = kv_compile_warning_summary(report);
    if (!warn)
        return kv_err_set(err, "out of memory");
    if (*warn)
        r->errors = warn;
    else
        free(warn);
    if (kv_compile_sass_hash(r->sass, r->so_path, r->sass_hash, err) != 0)
        return -1;
    r->status = KV_COMPILE_OK;
    return 0;
}

/* ---- lookup, staging, publishing ------------------------------------------------ */

int kv_compile_cache_lookup(const char *cache_dir, const char *key, kv_compile_result *r,
                            kv_err *err)
{
    char dir[PATH_MAX];
    memset(r, 0, sizeof *r);
    if (kv_path_join(dir, sizeof dir, cache_dir, key, err) != 0)
        return -1;
    if (!entry_complete(dir))
        return 0;
    kv_err ignored;
    if (load_entry(cache_dir, key, r, &ignored) == 0) {
        r->cached = 1;
        return 1;
    }
    kv_compile_result_free(r);
    /* unreadable: remove it and compile again */
    (void)kv_rm_rf(dir);
    return 0;
}

int kv_compile_cache_stage(const char *cache_dir, const char *src, size_t len, char *tmpdir,
                           kv_err *err)
{
    if ((size_t)snprintf(tmpdir, PATH_MAX, "%s/.tmp-%ld-XXXXXX", cache_dir, (long)getpid()) >=
        PATH_MAX) {
        tmpdir[0] = '\0';
        return kv_err_set(err, "compile: cache path too long");
    }
    if (!mkdtemp(tmpdir)) {
        kv_err_errno(err, errno, "mkdtemp %s", tmpdir);
        tmpdir[0] = '\0';
        return -1;
    }
    char path[PATH_MAX], tmp[PATH_MAX];
    if (kv_path_join(tmp, sizeof tmp, tmpdir, "tmp", err) != 0 ||
        (mkdir(tmp, 0700) != 0 && kv_err_errno(err, errno, "mkdir %s", tmp)) ||
        kv_path_join(path, sizeof path, tmpdir, "candidate.cu", err) != 0 ||
        write_file(path, src, len, err) != 0)
        return -1;
    return 0;
}

int kv_compile_cache_publish(const char *cache_dir, const char *key, char *tmpdir,
                             const char *report, kv_compile_result *r, kv_err *err)
{
    char path[PATH_MAX], final[PATH_MAX];
    char *imports = NULL;
    memset(r, 0, sizeof *r);
    if (!report)
        report = "";
    if (kv_path_join(path, sizeof path, tmpdir, "cand.so", err) != 0 ||
        kv_compile_read_imports(path, &imports, err) != 0)
        goto fail;
    if (kv_path_join(path, sizeof path, tmpdir, "imports.txt", err) != 0 ||
        write_file(path, imports, strlen(imports), err) != 0)
        goto fail;
    free(imports);
    imports = NULL;
    if (kv_path_join(path, sizeof path, tmpdir, "report.txt", err) != 0 ||
        write_file(path, report, strlen(report), err) != 0)
        goto fail;
    /* nvcc's own temporary files (TMPDIR) do not go into the entry */
    if (kv_path_join(path, sizeof path, tmpdir, "tmp", err) != 0)
        goto fail;
    if (kv_rm_rf(path) != 0) {
        kv_err_errno(err, errno, "remove %s", path);
        goto fail;
    }
    /* durable before visible: a crash never leaves a complete-looking entry
     * with missing bytes */
    for (size_t i = 0; i < sizeof entry_files / sizeof entry_files[0]; i++) {
        if (kv_path_join(path, sizeof path, tmpdir, entry_files[i], err) != 0 ||
            fsync_path(path, 0, err) != 0)
            goto fail;
    }
    if (fsync_path(tmpdir, 1, err) != 0 ||
        kv_path_join(final, sizeof final, cache_dir, key, err) != 0)
        goto fail;
    for (int tries = 0;; tries++) {
        if (rename(tmpdir, final) == 0) {
            tmpdir[0] = '\0';
            break;
        }
        if ((errno == ENOTEMPTY || errno == EEXIST) && tries == 0) {
            if (entry_complete(final))
                break; /* another process put the same entry in place */
            if (kv_rm_rf(final) != 0) {
                kv_err_errno(err, errno, "remove incomplete cache entry %s", final);
                goto fail;
            }
            continue;
        }
        kv_err_errno(err, errno, "rename %s to %s", tmpdir, final);
        goto fail;
    }
    if (fsync_path(cache_dir, 1, err) != 0)
        goto fail;
    if (load_entry(cache_dir, key, r, err) != 0) {
        kv_compile_result_free(r);
        goto fail;
    }
    return 0;
fail:
    free(imports);
    return -1;
}

void kv_compile_cache_clean_stale(const char *cache_dir)
{
    DIR *d = opendir(cache_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, ".tmp-", 5) != 0)
            continue;
        char *end;
        long pid = strtol(de->d_name + 5, &end, 10);
        if (end == de->d_name + 5 || *end != '-' || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", cache_dir, de->d_name) < sizeof path)
            (void)kv_rm_rf(path);
    }
    (void)closedir(d);
}

/* ---- one compilation ------------------------------------------------------------- */

int kv_compile(const kv_compile_opts *o, const char *src, size_t len, kv_compile_result *r,
               kv_err *err)
{
    kv_compile_pool *p;
    memset(r, 0, sizeof *r);
    if (kv_compile_pool_open(o, 1, 0, &p, err) != 0)
        return -1;
    uint64_t ticket, got;
    if (kv_compile_submit(p, src, len, &ticket, err) != 0 || kv_compile_wait_all(p, err) != 0) {
        kv_compile_pool_free(p);
        return -1;
    }
    int rc = kv_compile_take(p, &got, r);
    kv_compile_pool_free(p);
    if (rc != 0)
        return kv_err_set(err, "compile: no result");
    return 0;
}
