/* runtime_lookups.h — the static guard against candidates that reach code
 * the other checks cannot see: driver entry points looked up by name at run
 * time, symbols found through the dynamic linker, code loaded or compiled at
 * run time, raw system calls, new processes, and changes to the mappings or
 * protection of code (which would undo the worker's run-time trap,
 * worker/nvls_trap.h). A name assembled at run time ("cuMulti" "cast...")
 * defeats the source scan for NVLink multicast and leaves nothing in the
 * imports or the SASS; the call that turns the name into a function does
 * not. docs/evaluator.md, "Runtime lookups", says what each layer catches.
 *
 * Internal to evaluator/. */
#ifndef KEVO_EVALUATOR_RUNTIME_LOOKUPS_H
#define KEVO_EVALUATOR_RUNTIME_LOOKUPS_H

#include <stddef.h>

typedef struct {
    char name[64];    /* the identifier or the imported symbol, e.g. "dlsym" */
    const char *what; /* what it does, e.g. "finds symbols through the dynamic linker" */
    int line;         /* 1-based line of the source; 0: found in the imports */
    char text[120];   /* that source line, trimmed and cut */
} kv_lookup_hit;

/* The first refused name in the candidate's source (identifiers outside
 * comments and literals; a name matches whole identifiers only, or as a
 * prefix where the list says so: cuGetProcAddress_v2), else in its imports
 * (one undefined symbol per line: "name", "name@VERSION" or nm's "U name").
 * Either may be NULL. Returns 1 with *hit filled, or 0. */
int kv_find_runtime_lookup(const char *source, const char *imports, kv_lookup_hit *hit);

/* "calls dlsym (finds symbols through the dynamic linker) at candidate.cu
 * line 12: `void *f = dlsym(h, name);`; ..." — the verdict's message. */
void kv_lookup_hit_message(const kv_lookup_hit *hit, char *out, size_t cap);

#endif
