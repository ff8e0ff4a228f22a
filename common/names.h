/* names.h — the bound on the short names every part stores and passes: a
 * problem's, a size's, an island's, an operator's, a model's (with their NUL). */
#ifndef KEVO_NAMES_H
#define KEVO_NAMES_H

#define KV_NAME_MAX 64

#endif
