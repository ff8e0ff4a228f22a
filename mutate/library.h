/* library.h — the pattern library of one problem: the seeds under
 * patterns/<problem>/ (every .cu file) with their parsed annotations (docs/patterns.md).
 * `kevo seed` evaluates them; the template mutator derives children from
 * them. */
#ifndef KEVO_MUTATE_LIBRARY_H
#define KEVO_MUTATE_LIBRARY_H

#include <stddef.h>

#include "common/err.h"
#include "mutate/pattern.h"

typedef struct {
    char name[KV_PATTERN_NAME_MAX * 2]; /* file name without .cu */
    char *src;                          /* owned, NUL-terminated */
    size_t len;
    kv_pattern_meta meta;
} kv_seed;

typedef struct {
    int n;
    kv_seed *seeds;                     /* sorted by name */
} kv_library;

/* Loads every .cu file of <patterns_root>/<problem>/. A seed whose annotations do not
 * parse is skipped, its error ("path:line: what") passed to on_error (may be
 * NULL), so one bad file costs only itself. A missing folder is an empty
 * library; an unreadable one, or a file that cannot be read, an error. */
int kv_library_load(const char *patterns_root, const char *problem, kv_library *out,
                    void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err);
void kv_library_free(kv_library *lib);
const kv_seed *kv_library_find(const kv_library *lib, const char *name);

#endif
