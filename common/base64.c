/* base64.c — RFC 4648 base64 encoding (base64.h). */
#include <stdlib.h>

#include "common/base64.h"

char *kv_base64(const void *data, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = data;
    if (len > ((size_t)-1 - 1) / 4 * 3 - 2)
        return NULL;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < len)
            v |= s[i + 2];
        out[n++] = abc[v >> 18 & 63];
        out[n++] = abc[v >> 12 & 63];
        out[n++] = i + 1 < len ? abc[v >> 6 & 63] : '=';
        out[n++] = i + 2 < len ? abc[v & 63] : '=';
    }
    out[n] = '\0';
    return out;
}
