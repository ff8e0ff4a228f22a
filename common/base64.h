/* base64.h — RFC 4648 base64 (the standard alphabet, '=' padding), for
 * bytes that must travel through text unchanged and inert (a CSV field a
 * terminal may show). */
#ifndef KEVO_BASE64_H
#define KEVO_BASE64_H

#include <stddef.h>

/* The len bytes of data in base64: malloc'ed, NUL-terminated; NULL when out
 * of memory. */
char *kv_base64(const void *data, size_t len);

#endif
