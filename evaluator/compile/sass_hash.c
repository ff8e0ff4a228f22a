/* sass_hash.c — the dedup key of a compiled candidate: a hash of cuobjdump
 * -sass's function headers and instructions without their addresses,
 * encoding comments and runs of blanks, and of the host side's machine code
 * (elf_imports.c). Two candidates whose kernels compile to the same SASS but
 * whose host code differs (a grid size, a launch choice made on the host)
 * are different programs. */
#include "evaluator/compile/compile_internal.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

/* Appends the line [s, e) without its address comment, its encoding
 * comment and runs of blanks, when it is an instruction or a function header. */
static void sass_hash_line(kv_sha256_ctx *h, const char *s, const char *e)
{
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e)
        return;
    int keep = 0;
    if (((size_t)(e - s) > 10 && strncmp(s, "Function :", 10) == 0) ||
        ((size_t)(e - s) > 9 && strncmp(s, "code for ", 9) == 0)) {
        keep = 1;
    } else if (e - s >= 4 && s[0] == '/' && s[1] == '*') {
        /* an address comment, the instruction, an encoding comment; or a
         * lone encoding comment (the second word), which is dropped below */
        const char *q = s + 2;
        while (q < e && isxdigit((unsigned char)*q))
            q++;
        if (q + 1 < e && q > s + 2 && q[0] == '*' && q[1] == '/') {
            s = q + 2;
            keep = 1;
        }
    }
    if (!keep)
        return;
    /* drop a trailing encoding comment */
    for (const char *c = e - 2; c >= s; c--) {
        if (c[0] == '/' && c[1] == '*') {
            const char *q = c + 2;
            while (q < e && *q == ' ')
                q++;
            if (e - q > 2 && q[0] == '0' && q[1] == 'x')
                e = c;
            break;
        }
    }
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e)
        return;
    /* collapse blanks */
    char out[512];
    size_t n = 0;
    int blank = 0;
    for (; s < e; s++) {
        if (isspace((unsigned char)*s)) {
            blank = 1;
            continue;
        }
        if (blank && n > 0) {
            if (n == sizeof out) {
                kv_sha256_update(h, out, n);
                n = 0;
            }
            out[n++] = ' ';
        }
        blank = 0;
        if (n == sizeof out) {
            kv_sha256_update(h, out, n);
            n = 0;
        }
        out[n++] = *s;
    }
    kv_sha256_update(h, out, n);
    kv_sha256_update(h, "\n", 1);
}

int kv_compile_sass_hash(const char *sass, const char *so_path, char out[KV_SHA256_HEX_LEN],
                         kv_err *err)
{
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    const char *s = sass ? sass : "";
    while (*s) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        sass_hash_line(&h, s, e);
        s = *e ? e + 1 : e;
    }
    kv_sha256_update(&h, "host code\n", 10); /* the SASS ends here */
    out[0] = '\0';
    if (kv_compile_hash_host_code(so_path, &h, err) != 0) {
        kv_sha256_discard(&h);
        return -1;
    }
    uint8_t d[KV_SHA256_LEN];
    if (kv_sha256_final(&h, d) != 0)
        return kv_err_set(err, "hashing the SASS: libcrypto's SHA-256 failed");
    kv_sha256_hex(d, out);
    return 0;
}
