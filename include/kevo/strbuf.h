/* strbuf.h — a growable, NUL-terminated string for building text. An
 * allocation failure sets oom and makes every later append a no-op, so a
 * builder checks once at the end. */
#ifndef KEVO_STRBUF_H
#define KEVO_STRBUF_H

#include <stddef.h>

typedef struct {
    char *p;        /* NULL until the first append; owned (free it) */
    size_t len, cap;
    int oom;
} kv_strbuf;

void kv_sb_put(kv_strbuf *b, const char *s, size_t n);
void kv_sb_puts(kv_strbuf *b, const char *s);
void kv_sb_printf(kv_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
