/* compile_includes.c — the files a candidate names in its #include lines
 * (and #include_next, #import, #embed, __has_include), checked before nvcc
 * runs: the preprocessor reads a character device such as /dev/zero until
 * memory runs out, and blocks on a FIFO until the compile step's timeout.
 * Each name is looked up where a compiler would find it among kevo's
 * folders (absolute, or under include/ and patterns/); one that is there
 * and is not a regular file is refused, and so is a name that climbs with
 * "..", which could reach any file from the system's include folders. A
 * name the preprocessor computes (`#include MACRO`) is not seen here: the
 * compile step's memory bound (KV_COMPILE_MEM_MAX) and timeout still hold
 * it, and Landlock leaves it nothing but the toolchain's folders. */
#define _GNU_SOURCE /* memmem */
#include "evaluator/compile/compile_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *skip_blank(const char *s, const char *e)
{
    for (;;) {
        while (s < e && (*s == ' ' || *s == '\t' || *s == '\v' || *s == '\f' || *s == '\r'))
            s++;
        if (e - s < 2 || s[0] != '/' || s[1] != '*')
            return s;
        const char *end = s + 2;
        while (end + 1 < e && !(end[0] == '*' && end[1] == '/'))
            end++;
        s = end + 1 < e ? end + 2 : e; /* a comment that goes on ends the line */
    }
}

/* The header name at s ("name" or <name>): 1 and [*b, *n) or 0. */
static int header_name(const char *s, const char *e, const char **b, size_t *n)
{
    s = skip_blank(s, e);
    if (s >= e || (*s != '"' && *s != '<'))
        return 0;
    char close = *s == '"' ? '"' : '>';
    const char *end = memchr(s + 1, close, (size_t)(e - s - 1));
    if (!end)
        return 0;
    *b = s + 1;
    *n = (size_t)(end - s - 1);
    return 1;
}

static const char *kind_of(mode_t m)
{
    return S_ISCHR(m)    ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISDIR(m)  ? "a folder"
                         : "not a regular file";
}

/* 1 (msg set) when the name may not be included. */
static int refused_name(const char *name, size_t n, int line, const char *const dirs[], int n_dirs,
                        char *msg, size_t cap)
{
    char nm[PATH_MAX];
    if (n == 0 || n >= sizeof nm)
        return 0;
    memcpy(nm, name, n);
    nm[n] = '\0';
    for (const char *p = nm; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == nm || p[-1] == '/') && (p[2] == '/' || p[2] == '\0')) {
            snprintf(msg, cap,
                     "candidate.cu:%d: #include \"%s\": a name may not climb out of "
                     "the include folders with \"..\"",
                     line, nm);
            return 1;
        }
    for (int i = -1; i < n_dirs; i++) {
        char path[2 * PATH_MAX];
        if (i < 0 && nm[0] != '/')
            continue;
        if (i >= 0 && (nm[0] == '/' || !dirs[i] || !dirs[i][0]))
            break;
        snprintf(path, sizeof path, "%s%s%s", i < 0 ? "" : dirs[i], i < 0 ? "" : "/", nm);
        struct stat st;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(msg, cap,
                     "candidate.cu:%d: #include \"%s\": %s is %s, not a regular file "
                     "(a compiler would read it without end or wait on it)",
                     line, nm, path, kind_of(st.st_mode));
            return 1;
        }
    }
    return 0;
}

/* One logical line (splices removed): a directive that includes, or
 * __has_include anywhere. */
static int check_line(const char *s, const char *e, int line, const char *const dirs[], int n_dirs,
                      char *msg, size_t cap)
{
    static const char *const directives[] = {"include_next", "include", "import", "embed"};
    const char *b;
    size_t n;
    const char *p = skip_blank(s, e);
    int hash = p < e && *p == '#' ? 1 : e - p >= 2 && p[0] == '%' && p[1] == ':' ? 2 : 0;
    if (hash) {
        p = skip_blank(p + hash, e);
        for (size_t i = 0; i < sizeof directives / sizeof directives[0]; i++) {
            size_t k = strlen(directives[i]);
            if ((size_t)(e - p) > k && memcmp(p, directives[i], k) == 0 &&
                !(p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z')) && header_name(p + k, e, &b, &n))
                return refused_name(b, n, line, dirs, n_dirs, msg, cap);
        }
    }
    for (p = s; p < e && (p = memmem(p, (size_t)(e - p), "__has_include", 13)) != NULL; p += 13) {
        const char *q = p + 13;
        if (e - q >= 5 && memcmp(q, "_next", 5) == 0)
            q += 5;
        q = skip_blank(q, e);
        if (q < e && *q == '(' && header_name(q + 1, e, &b, &n) &&
            refused_name(b, n, line, dirs, n_dirs, msg, cap))
            return 1;
    }
    return 0;
}

int kv_compile_check_includes(const char *src, size_t len, const char *const dirs[], int n_dirs,
                              char *msg, size_t cap)
{
    char *buf = malloc(len + 1);
    if (!buf) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    int line = 1, first = 1, rc = 0;
    size_t n = 0;
    for (size_t i = 0; i <= len && rc == 0; i++) {
        if (i < len && src[i] == '\\' && i + 1 < len &&
            (src[i + 1] == '\n' || (src[i + 1] == '\r' && i + 2 < len && src[i + 2] == '\n'))) {
            i += src[i + 1] == '\n' ? 1 : 2; /* a splice joins the lines */
            line++;
            continue;
        }
        if (i < len && src[i] != '\n') {
            buf[n++] = src[i];
            continue;
        }
        rc = check_line(buf, buf + n, first, dirs, n_dirs, msg, cap);
        n = 0;
        first = ++line;
    }
    free(buf);
    return rc;
}
