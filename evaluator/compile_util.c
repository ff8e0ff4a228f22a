/* compile_util.c — small helpers the compile pipeline's files share: a
 * growable byte buffer, string copies, executables, removing a tree. */
#include "evaluator/compile_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- growable byte buffer ------------------------------------------------ */

int kvc_buf_add(kvc_buf *b, const void *data, size_t n)
{
    if (n > SIZE_MAX / 4)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int kvc_buf_str(kvc_buf *b, const char *s)
{
    return kvc_buf_add(b, s, strlen(s));
}

char *kvc_buf_take(kvc_buf *b)
{
    if (!b->p && kvc_buf_add(b, "", 0) != 0)
        return NULL;
    char *p = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void kvc_buf_free(kvc_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- small file-system and string helpers ---------------------------------- */

int kvc_is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int kvc_copy_str(char *out, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap)
        return -1;
    memcpy(out, s, n + 1);
    return 0;
}

int kvc_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

