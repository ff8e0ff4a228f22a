/* refcheck.h — what the tests of the problems' host checks share.
 *
 * The checks themselves are problems/<name>/check.c (include/kevo/check.h),
 * compiled, loaded and compared through evaluator/checks/hostcheck.h like any
 * problem's. tests/unit/test_refcheck.c runs them on host-generated inputs on the
 * CPU, to show that each passes its own expectation and fails where it must;
 * tests/gpu/test_gpu_references.c runs each NCCL reference once on the GPUs with
 * its inputs and outputs dumped (kevo baseline --dump), read back with
 * kv_host_call_load_dump, and compares them. */
#ifndef KEVO_TESTS_REFCHECK_H
#define KEVO_TESTS_REFCHECK_H

#include <stdint.h>

#include "common/err.h"
#include "evaluator/evaluator.h"

/* Stores v into element i of a buffer of dtype t, rounding to nearest even
 * (integers: truncated toward zero; NaN as the dtype's quiet NaN). */
void rc_store(void *buf, kevo_dtype t, int64_t i, double v);
/* Loads element i of a buffer of dtype t as a double (check.h's reader). */
double rc_load(const void *buf, kevo_dtype t, int64_t i);

#endif
