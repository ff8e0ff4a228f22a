/* text.c — UTF-8 repair for JSON and escaping for the terminal (text.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

size_t kv_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        len = 1, v = c, min = 0;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte, C0/C1 (always overlong), F5..FF */
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

char *kv_utf8_repair(const char *s, size_t len, size_t *out_len, size_t *replaced)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        size_t l = kv_utf8_seq(u + i, len - i, NULL);
        bad += l == 0;
        i += l ? l : 1;
    }
    if (len > ((size_t)-1 - 1) / 3)
        return NULL;
    char *out = malloc(len + 2 * bad + 1); /* each bad byte: 1 -> 3 */
    if (!out)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t l = kv_utf8_seq(u + i, len - i, NULL);
        if (l) {
            memcpy(out + n, s + i, l);
            n += l;
            i += l;
        } else {
            memcpy(out + n, "\xEF\xBF\xBD", 3);
            n += 3;
            i++;
        }
    }
    out[n] = '\0';
    if (out_len)
        *out_len = n;
    if (replaced)
        *replaced = bad;
    return out;
}

/* The escape of the character at u (left bytes, left > 0): *piece and *plen
 * what to show (esc holds it when it is an escape); returns the bytes used. */
static size_t escape_one(const unsigned char *u, size_t left, int multi_line, char esc[8],
                         const char **piece, size_t *plen)
{
    uint32_t cp = 0;
    size_t l = kv_utf8_seq(u, left, &cp), used = 1;
    *piece = esc;
    if (l == 0) {
        snprintf(esc, 8, "\\x%02X", u[0]);
    } else if (cp == 0x1B) {
        *piece = "\\e";
    } else if (cp == '\t' || (cp == '\n' && multi_line)) {
        esc[0] = (char)cp;
        esc[1] = '\0';
    } else if (cp < 0x20) {
        static const char names[] = "abtnvfr"; /* 0x07..0x0D */
        if (cp >= 0x07 && cp <= 0x0D)
            snprintf(esc, 8, "\\%c", names[cp - 0x07]);
        else
            snprintf(esc, 8, "\\x%02X", (unsigned)cp);
    } else if (cp == 0x7F) {
        *piece = "\\x7F";
    } else if (cp >= 0x80 && cp <= 0x9F) {
        snprintf(esc, 8, "\\u%04X", (unsigned)cp);
        used = l;
    } else {
        *piece = (const char *)u; /* a printable character, as it is */
        used = l;
    }
    *plen = *piece == (const char *)u ? l : strlen(*piece);
    return used;
}

char *kv_text_for_terminal(const char *s, char *out, size_t cap, int multi_line)
{
    if (cap == 0)
        return out;
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = 0, left = strlen((const char *)u);
    while (left > 0) {
        char esc[8];
        const char *piece;
        size_t plen, used = escape_one(u, left, multi_line, esc, &piece, &plen);
        if (n + plen >= cap)
            break;
        memcpy(out + n, piece, plen);
        n += plen;
        u += used;
        left -= used;
    }
    out[n] = '\0';
    return out;
}

int kv_text_fput(FILE *out, const char *s, int multi_line)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t left = strlen((const char *)u);
    while (left > 0) {
        char esc[8];
        const char *piece;
        size_t plen, used = escape_one(u, left, multi_line, esc, &piece, &plen);
        if (fwrite(piece, 1, plen, out) != plen)
            return -1;
        u += used;
        left -= used;
    }
    return 0;
}

int kv_text_is_inert(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t l = kv_utf8_seq(u + i, len - i, &cp);
        if (l == 0 || (cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp <= 0x9F))
            return 0;
        i += l;
    }
    return 1;
}
