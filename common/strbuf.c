/* strbuf.c — the growable text buffer (strbuf.h). */
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 1024

/* How many of n more bytes the limit lets in. */
static size_t room(const kv_strbuf *b, size_t n)
{
    if (b->limit == 0)
        return n;
    size_t left = b->limit > b->len ? b->limit - b->len : 0;
    return n < left ? n : left;
}

/* Room for n more bytes and the NUL; -1 (oom set) when out of memory. */
static int reserve(kv_strbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > SIZE_MAX - 1 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : FIRST_CAP;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    /* never more than the limit can use (room() keeps need within it) */
    if (b->limit && b->limit < SIZE_MAX && cap > b->limit + 1 && need <= b->limit + 1)
        cap = b->limit + 1;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void kv_sb_put(kv_strbuf *b, const char *s, size_t n)
{
    n = room(b, n);
    if (reserve(b, n) != 0)
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void kv_sb_puts(kv_strbuf *b, const char *s)
{
    kv_sb_put(b, s, strlen(s));
}

void kv_sb_printf(kv_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = 1;
        return;
    }
    size_t n = room(b, (size_t)need);
    if (reserve(b, n) != 0)
        return;
    /* with n < need (the limit), vsnprintf writes the first n bytes */
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, n + 1, fmt, ap);
    va_end(ap);
    b->len += n;
}

char *kv_sb_take(kv_strbuf *b)
{
    char *p = NULL;
    if (b->oom)
        free(b->p);
    else
        p = b->p ? b->p : calloc(1, 1);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
    return p;
}

int kv_sb_copy(const kv_strbuf *b, char *out, size_t cap)
{
    if (b->oom)
        return -1;
    if (cap == 0)
        return 0;
    size_t n = b->len < cap - 1 ? b->len : cap - 1;
    if (n)
        memcpy(out, b->p, n);
    out[n] = '\0';
    return 0;
}

void kv_sb_free(kv_strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
