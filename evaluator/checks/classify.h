/* classify.h — a candidate's behaviour cell, read from evidence: the SASS
 * and PTX of its shared object, its dynamic imports, and the launch graph of
 * one captured kevo_run. Never from what a mutator claims.
 *
 * Internal to evaluator/: the class a report holds (kv_class) is in
 * evaluator/evaluator.h. */
#ifndef KEVO_EVALUATOR_CLASSIFY_H
#define KEVO_EVALUATOR_CLASSIFY_H

#include <stddef.h>

#include "common/cell.h"
#include "evaluator/evaluator.h" /* kv_class, kv_class_free */
#include "common/machine.h"      /* kv_machine_allows_nvls */
#include "common/err.h"

typedef struct {
    const char *sass;    /* cuobjdump -sass text; may be NULL */
    const char *ptx;     /* cuobjdump -ptx text; may be NULL */
    const char *imports; /* undefined dynamic symbols, one per line; may be NULL */
    const char *source;  /* the candidate's source (for the NVLS guard); may be NULL */
    /* the captured launch graph of one kevo_run (worker report) */
    int graph_captured; /* 0: capture failed or was not tried */
    int kernel_nodes;   /* kernel launches, the candidate's own and libraries' */
    int memcpy_nodes;   /* copies (device to device, peer) */
    int memset_nodes;
    int other_nodes;        /* host, event, ... nodes */
    double peer_copy_bytes; /* bytes the memcpy nodes move to or from another GPU */
} kv_evidence;

/* Classifies into *out (freed by kv_class_free); returns 0 or -1 (out of memory). */
int kv_classify(const kv_evidence *ev, kv_class *out, kv_err *err);

/* The NVLS guard: 1 when the evidence shows NVLink multicast (multimem
 * instructions in SASS/PTX, cuMulticast* imports or names in the source). */
int kv_uses_nvls(const kv_evidence *ev);

/* The symbol on one line [s, e) of an import list ("name", "name@VERSION" or
 * nm's "    U name@VERSION"): its start, its length in *len (0: none). */
const char *kv_import_symbol(const char *s, const char *e, size_t *len);

#endif
