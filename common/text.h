/* text.h — text from outside (an LLM endpoint's replies and errors, archive
 * records, problem and folder names) made safe for where it goes: a
 * terminal, which must not act on control characters, and JSON, which must
 * be valid UTF-8. */
#ifndef KEVO_TEXT_H
#define KEVO_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The length (1..4) of the valid UTF-8 sequence at s (n bytes available), or
 * 0 when it is not one: a stray continuation byte, an overlong form, a
 * surrogate, a code point over U+10FFFF, or a sequence cut short. *cp gets
 * the code point (may be NULL). */
size_t kv_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);

/* A copy of s (len bytes, NUL-free or not) that is valid UTF-8: each byte
 * that does not start a valid sequence is replaced by U+FFFD (EF BF BD).
 * Malloc'ed, NUL-terminated (*out_len: its length, may be NULL); NULL when
 * out of memory. *replaced (may be NULL) gets the number of bytes replaced. */
char *kv_utf8_repair(const char *s, size_t len, size_t *out_len, size_t *replaced);

/* s as a terminal may show it, into out (cap bytes, always NUL-terminated,
 * cut at a character boundary when it does not fit): the control
 * characters, which a terminal would act on, become visible escapes: ESC
 * \e, BEL \a, BS \b, CR \r, VT \v, FF \f, LF \n (kept as a line break when
 * multi_line), TAB kept, the other C0 bytes and DEL \xNN, the C1 controls
 * (U+0080..U+009F) \u00NN, and a byte that is not valid UTF-8 \xNN (a
 * terminal may read 0x9B as CSI). Returns out. */
#define KV_TEXT_ONE_LINE 0
#define KV_TEXT_MULTI_LINE 1
char *kv_text_for_terminal(const char *s, char *out, size_t cap, int multi_line);
/* kv_text_for_terminal on one line into an array buf. */
#define KV_TERM(buf, s) kv_text_for_terminal((s), (buf), sizeof(buf), KV_TEXT_ONE_LINE)

/* kv_text_for_terminal written to out whole, however long s is (a
 * compiler's message, a source). 0, or -1 when a write failed. */
int kv_text_fput(FILE *out, const char *s, int multi_line);

/* 1 when the len bytes of s are valid UTF-8 with no control character but
 * TAB and LF: text a terminal shows as it is, with nothing to escape. */
int kv_text_is_inert(const char *s, size_t len);

#endif
