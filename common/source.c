/* source.c — source normalisation and hashing.
 *
 * A single left-to-right scan with a pending separator: whitespace and
 * comments only set it, and one separator is written before the next visible
 * character (never at the start, never at the end). The separator is a
 * newline when the run held one, a space otherwise: line ends matter to the
 * preprocessor (`#define A 1\nint x;` is not `#define A 1 int x;`), while a
 * block comment, even over several lines, counts as one space as it does for
 * the compiler. String and character literals are copied byte for byte,
 * escapes included.
 *
 * Details that follow the C/C++ lexer rather than a naive scan:
 *  - a line comment continued by backslash-newline goes on to the next line
 *    (line splicing happens before comments are recognised);
 *  - an unterminated literal ends at the end of its line, so a stray quote
 *    (as in `#error don't`) cannot swallow the rest of the file;
 *  - a ' inside a number that began with a digit is a C++14 digit separator
 *    (1'000'000), not the start of a character literal.
 * Raw string literals (R"(...)") are not recognised: text inside them is
 * normalised like code. They are rare in kernels. */
#include "common/source.h"

#include <stdlib.h>

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_ident(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
}

int kv_source_normalise(const char *src, size_t n, char **out, size_t *out_len)
{
    /* Every output byte consumes at least one input byte (an emitted space
     * stands for one or more consumed whitespace/comment bytes). */
    char *buf = malloc(n + 1);
    if (!buf)
        return -1;

    enum { TOK_NONE, TOK_WORD, TOK_NUMBER } tok = TOK_NONE;
    size_t i = 0, o = 0;
    enum { SEP_NONE, SEP_SPACE, SEP_NEWLINE } pending = SEP_NONE;

    while (i < n) {
        char c = src[i];

        if (is_space(c)) {
            if (c == '\n')
                pending = SEP_NEWLINE;
            else if (pending == SEP_NONE)
                pending = SEP_SPACE;
            tok = TOK_NONE;
            i++;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            i += 2;
            while (i < n && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n')
                    i += 2;
                else if (src[i] == '\\' && i + 2 < n && src[i + 1] == '\r' && src[i + 2] == '\n')
                    i += 3;
                else
                    i++;
            }
            if (pending == SEP_NONE)
                pending = SEP_SPACE; /* the newline that ends it comes next */
            tok = TOK_NONE;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            i += 2;
            while (i < n && !(src[i] == '*' && i + 1 < n && src[i + 1] == '/'))
                i++;
            i = i < n ? i + 2 : n; /* an unterminated comment runs to the end */
            if (pending == SEP_NONE)
                pending = SEP_SPACE;
            tok = TOK_NONE;
            continue;
        }

        if (pending != SEP_NONE && o > 0)
            buf[o++] = pending == SEP_NEWLINE ? '\n' : ' ';
        pending = SEP_NONE;

        if (c == '"' || (c == '\'' && tok != TOK_NUMBER)) {
            buf[o++] = src[i++];
            while (i < n) {
                char d = src[i];
                if (d == '\n')
                    break; /* unterminated: the newline is whitespace again */
                buf[o++] = d;
                i++;
                if (d == c)
                    break;
                if (d == '\\' && i < n)
                    buf[o++] = src[i++]; /* escape, or a spliced line */
            }
            tok = TOK_NONE;
            continue;
        }

        if (is_ident(c)) {
            if (tok == TOK_NONE)
                tok = is_digit(c) || (c == '.' && i + 1 < n && is_digit(src[i + 1])) ? TOK_NUMBER
                                                                                     : TOK_WORD;
        } else if (c != '\'') { /* a ' here is a digit separator */
            tok = TOK_NONE;
        }
        buf[o++] = c;
        i++;
    }

    buf[o] = '\0';
    *out = buf;
    if (out_len)
        *out_len = o;
    return 0;
}

int kv_source_hash(const char *src, size_t n, uint8_t out[KV_SHA256_LEN])
{
    char *norm;
    size_t len;
    if (kv_source_normalise(src, n, &norm, &len) != 0)
        return -1;
    int rc = kv_sha256(norm, len, out);
    free(norm);
    return rc;
}
