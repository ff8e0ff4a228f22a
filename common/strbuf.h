/* strbuf.h — kevo's growable text buffer: a NUL-terminated string built by
 * appending bytes, strings and formatted text.
 *
 * Ownership: a kv_strbuf owns its text (p) until kv_sb_take hands it over;
 * kv_sb_free releases it. Start one empty with `kv_strbuf b = {0};`, or with
 * a limit: `kv_strbuf b = {.limit = N};`.
 *
 * Errors: an allocation failure sets oom and makes every later append a
 * no-op, so a builder appends without checking and checks oom once at the
 * end (kv_sb_take and kv_sb_copy report it too). The text built before the
 * failure stays in p until kv_sb_free.
 *
 * Limit: with limit > 0 the buffer keeps at most limit bytes of text: an
 * append that would pass it is cut at the limit (in the middle of a word or
 * a formatted number, like snprintf into a char[limit + 1]) and every later
 * append adds nothing. Cutting is not an error. limit 0 means none.
 *
 * The text may hold NUL bytes put there by kv_sb_put (len counts them); it
 * is NUL-terminated once p is non-NULL. */
#ifndef KEVO_STRBUF_H
#define KEVO_STRBUF_H

#include <stddef.h>

typedef struct {
    char *p;      /* NULL until the first append; owned */
    size_t len;   /* bytes of text, without the terminating NUL */
    size_t cap;   /* bytes allocated at p */
    int oom;      /* an allocation failed: appends are no-ops until kv_sb_free */
    size_t limit; /* most bytes of text kept; 0 for no limit */
} kv_strbuf;

/* Appends n bytes of s (s may be NULL when n is 0). Sets oom when out of
 * memory (also when len + n would overflow size_t). */
void kv_sb_put(kv_strbuf *b, const char *s, size_t n);
/* Appends the string s. As kv_sb_put. */
void kv_sb_puts(kv_strbuf *b, const char *s);
/* Appends printf-formatted text. As kv_sb_put; an encoding error of
 * vsnprintf also sets oom. */
void kv_sb_printf(kv_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Hands over the text: a NUL-terminated string the caller frees, "" when
 * nothing was appended. NULL when b ran out of memory (at any time) or ""
 * could not be allocated. b is empty afterwards either way (oom cleared,
 * limit kept), as after kv_sb_free. */
char *kv_sb_take(kv_strbuf *b);

/* Copies the text into out (cap > 0 bytes), cut to cap - 1 bytes and
 * NUL-terminated; "" when nothing was appended. -1, with out untouched,
 * when b ran out of memory; 0 otherwise. b stays as it is. */
int kv_sb_copy(const kv_strbuf *b, char *out, size_t cap);

/* Frees the text and empties b: p NULL, len, cap and oom 0; the limit stays,
 * so b can be used again. Safe on an empty buffer and twice. */
void kv_sb_free(kv_strbuf *b);

#endif
