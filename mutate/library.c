/* library.c — loading one problem's seeds (library.h). */
#include "mutate/library.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(((const kv_seed *)a)->name, ((const kv_seed *)b)->name);
}

/* A regular file <name>.cu (not hidden) in dir. */
static int is_seed_file(const char *dir, const char *name)
{
    size_t l = strlen(name);
    if (name[0] == '.' || l < 4 || strcmp(name + l - 3, ".cu") != 0)
        return 0;
    char path[PATH_MAX];
    struct stat st;
    return kv_path_join(path, sizeof path, dir, name, NULL) == 0 && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

int kv_library_load(const char *patterns_root, const char *problem, kv_library *out,
                    void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err)
{
    memset(out, 0, sizeof *out);
    char dir[PATH_MAX];
    if (kv_path_join(dir, sizeof dir, patterns_root, problem, err) != 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : kv_err_errno(err, errno, "open %s", dir);
    int cap = 0, rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!is_seed_file(dir, de->d_name))
            continue;
        if (out->n == cap) {
            int ncap = cap ? 2 * cap : 8;
            kv_seed *n = realloc(out->seeds, sizeof *n * (size_t)ncap);
            if (!n) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            out->seeds = n;
            cap = ncap;
        }
        kv_seed *s = &out->seeds[out->n];
        memset(s, 0, sizeof *s);
        char path[PATH_MAX];
        kv_err perr = {{0}};
        if (strlen(de->d_name) - 3 >= sizeof s->name) { /* the name is the program's model */
            if (kv_path_join(path, sizeof path, dir, de->d_name, NULL) == 0 && on_error) {
                kv_err_set(&perr, "%s: a seed name has at most %zu characters", path,
                           sizeof s->name - 1);
                on_error(perr.msg, ctx);
            }
            continue;
        }
        if (kv_path_join(path, sizeof path, dir, de->d_name, err) != 0 ||
            kv_read_file(path, &s->src, &s->len, err) != 0) {
            rc = -1;
            break;
        }
        if (kv_pattern_parse(s->src, s->len, path, &s->meta, &perr) != 0) {
            if (on_error)
                on_error(perr.msg, ctx);
            free(s->src);
            continue;
        }
        snprintf(s->name, sizeof s->name, "%.*s", (int)(strlen(de->d_name) - 3), de->d_name);
        out->n++;
    }
    closedir(d);
    if (rc != 0) {
        kv_library_free(out);
        return -1;
    }
    if (out->n > 1)
        qsort(out->seeds, (size_t)out->n, sizeof *out->seeds, by_name);
    return 0;
}

void kv_library_free(kv_library *lib)
{
    for (int i = 0; i < lib->n; i++)
        free(lib->seeds[i].src);
    free(lib->seeds);
    memset(lib, 0, sizeof *lib);
}

const kv_seed *kv_library_find(const kv_library *lib, const char *name)
{
    for (int i = 0; i < lib->n; i++)
        if (strcmp(lib->seeds[i].name, name) == 0)
            return &lib->seeds[i];
    return NULL;
}
