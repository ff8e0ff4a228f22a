/* discover.c — finding problems: every problems/<name>/ under a root, and
 * the root itself (problem/problem.h). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "problem/problem.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kv_problems_load_all(const char *root, kv_problem **out,
                         void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err)
{
    *out = NULL;
    DIR *d = opendir(root);
    if (!d)
        return kv_err_errno(err, errno, "open problems folder %s", root);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = KV_FAIL;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                kv_err_set(err, "%s: out of memory", root);
                goto done;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name))) {
            kv_err_set(err, "%s: out of memory", root);
            goto done;
        }
        n++;
    }
    if (errno != 0) {
        kv_err_errno(err, errno, "read problems folder %s", root);
        goto done;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_names);

    kv_problem *v = NULL;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[PATH_MAX], file[PATH_MAX];
        struct stat st;
        kv_err e = {{0}};
        if (kv_path_join(dir, sizeof dir, root, names[i], &e) ||
            kv_path_join(file, sizeof file, dir, "problem.json", &e)) {
            if (on_error)
                on_error(e.msg, ctx);
            continue;
        }
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || lstat(file, &st) != 0)
            continue; /* not a problem folder */
        kv_problem *nv = realloc(v, (size_t)(count + 1) * sizeof *nv);
        if (!nv) {
            kv_problems_free(v, count);
            kv_err_set(err, "%s: out of memory", root);
            goto done;
        }
        v = nv;
        if (kv_problem_load(dir, &v[count], &e) == KV_OK)
            count++;
        else if (on_error)
            on_error(e.msg, ctx);
    }
    if (count == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    rc = count;
done:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

void kv_problems_free(kv_problem *v, int n)
{
    for (int i = 0; v && i < n; i++)
        kv_problem_free(&v[i]);
    free(v);
}

const char *kv_problems_default_root(char *out, size_t cap)
{
    const char *env = getenv("KEVO_PROBLEMS");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return out;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX + 16];
            struct stat st;
            snprintf(cand, sizeof cand, "%s/../problems", exe);
            if (stat(cand, &st) == 0 && S_ISDIR(st.st_mode) && strlen(cand) < cap) {
                snprintf(out, cap, "%s", cand);
                return out;
            }
        }
    }
#ifdef KEVO_SOURCE_DIR
    /* the source tree kevo was built from (a build directory is usually not
     * beside problems/) */
    const char *home = getenv("KEVO_HOME");
    snprintf(out, cap, "%s/problems", home && *home ? home : KEVO_SOURCE_DIR);
#else
    snprintf(out, cap, "./problems");
#endif
    return out;
}
