/* pattern.h — the annotations of a seed kernel (patterns/<problem>/<name>.cu):
 * which problem and cell it is written for, and its tunable integer
 * parameters, each bound to one "#define NAME V" line (V an allowed value;
 * in a seed as shipped, the default). docs/patterns.md documents the format;
 * the template mutator rewrites the #define lines. */
#ifndef KEVO_PATTERN_H
#define KEVO_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#include "common/cell.h"
#include "common/err.h"

#define KV_PATTERN_MAX_PARAMS 16
#define KV_PATTERN_MAX_VALUES 16
#define KV_PATTERN_NAME_MAX 32

typedef struct {
    char name[KV_PATTERN_NAME_MAX];
    int64_t def;   /* the annotation's default= */
    int64_t value; /* what the #define line says now (a seed: the default) */
    int has_range; /* range=LO..HI (inclusive) */
    int64_t lo, hi;
    int n_values; /* values=A,B,... (when not a range) */
    int64_t values[KV_PATTERN_MAX_VALUES];
    size_t define_off, define_len; /* the "#define NAME V" line in the source (no newline) */
    int line;                      /* of the kevo:param annotation, 1-based */
} kv_pattern_param;

typedef struct {
    char problem[64];
    kv_transport transport;
    kv_fusion fusion;
    int cell; /* kv_cell_index(transport, fusion) */
    int n_params;
    kv_pattern_param params[KV_PATTERN_MAX_PARAMS];
} kv_pattern_meta;

/* Parses the annotations of src (len bytes); `path` names it in errors,
 * which read "<path>:<line>: <what>". Returns 0 or -1. */
int kv_pattern_parse(const char *src, size_t len, const char *path, kv_pattern_meta *m,
                     kv_err *err);

/* 1 when v is an allowed value of p. */
int kv_pattern_param_allows(const kv_pattern_param *p, int64_t v);

/* The points of m's parameter space: the product of every parameter's
 * number of allowed values (1 with no parameters). */
int64_t kv_pattern_points(const kv_pattern_meta *m);

/* A copy of src with parameter i set to v (its #define line rewritten);
 * *out is malloc'ed. Fails when v is not allowed. */
int kv_pattern_with_param(const char *src, size_t len, const kv_pattern_meta *m, int i, int64_t v,
                          char **out, size_t *out_len, kv_err *err);

#endif
