/* hostcheck.h — what the host check's files share (hostcheck.c loads and
 * runs a problem's check.c, hostcheck_cc.c compiles it, hostcheck_dump.c
 * reads a dump back); the host check's API is evaluator/evaluator.h's, "a
 * problem's host check". */
#ifndef KEVO_EVALUATOR_HOSTCHECK_H
#define KEVO_EVALUATOR_HOSTCHECK_H

#include <stddef.h>

#include "common/err.h"
#include "evaluator/evaluator.h"

/* ---- hostcheck_cc.c: compiling ------------------------------------------------ */

/* The C compiler kevo runs: $KEVO_CC, else cc on $PATH, else /usr/bin/cc. */
void kv_hostcheck_find_cc(char *out, size_t cap);

/* Compiles check_path (or takes it from the cache) into so (PATH_MAX
 * bytes); *cached says which. Errors as kv_hostcheck_open's. */
int kv_hostcheck_compile(const kv_compile_opts *o, const char *check_path, char *so, int *cached,
                         kv_err *err);

#endif
