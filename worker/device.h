/* device.h — the worker's device-side helpers (device.cu), callable from C:
 * input generation, poisoning, comparison, checksums, guard bands, peer
 * pointers of the symmetric window and the NCCL device communicator.
 * Launchers enqueue on the given stream and return the launch's error. */
#ifndef KEVO_WORKER_DEVICE_H
#define KEVO_WORKER_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "kevo/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KV_FILL_NORMAL,    /* a = mean, b = std */
    KV_FILL_UNIFORM,   /* [a, b) */
    KV_FILL_INT_RANGE, /* integers in [a, b) */
    KV_FILL_ZEROS,
} kv_fill_kind;

/* Fills n elements with values drawn from (seed, element index): the same
 * seed gives the same tensor whatever the launch shape. */
cudaError_t kv_dev_fill(void *ptr, kevo_dtype dtype, int64_t n, kv_fill_kind kind, double a,
                        double b, uint64_t seed, cudaStream_t s);

/* The same in `slots` copies of the tensor, `stride` bytes apart, in one
 * launch; copy k draws from its own seed (copy 0 from `seed`, as above). */
cudaError_t kv_dev_fill_slots(void *ptr, size_t stride, int slots, kevo_dtype dtype, int64_t n,
                              kv_fill_kind kind, double a, double b, uint64_t seed, cudaStream_t s);

/* Writes the poison pattern (a NaN for floats, a sentinel for integers). */
cudaError_t kv_dev_poison(void *ptr, kevo_dtype dtype, int64_t n, cudaStream_t s);

/* Guard bands: a pattern derived from the seed; check counts bytes that differ. */
cudaError_t kv_dev_guard_fill(void *ptr, size_t bytes, uint64_t seed, cudaStream_t s);

/* Result of a comparison, in device memory (kv_dev_compare writes it). */
typedef struct {
    unsigned long long bad;       /* elements out of tolerance, NaN or unwritten */
    unsigned long long unwritten; /* elements still holding the poison */
    unsigned long long first_bad; /* lowest bad index (ULLONG_MAX if none) */
    float max_abs, max_rel;       /* over the valid elements */
    unsigned long long guard_bad; /* (kv_dev_guard_check) bytes that changed */
    unsigned long long checksum;  /* (kv_dev_checksum) */
} kv_dev_report;

/* Zeroes a report (first_bad = ULLONG_MAX). */
cudaError_t kv_dev_report_reset(kv_dev_report *r, cudaStream_t s);

/* Compares got with want over n elements: |got - want| <= atol + rtol * |want|,
 * NaN never passes (unless want is NaN too and the check is bit-exact),
 * atol == rtol == 0 means bit-exact. */
cudaError_t kv_dev_compare(const void *got, const void *want, kevo_dtype dtype, int64_t n,
                           double atol, double rtol, kv_dev_report *r, cudaStream_t s);

/* Where an output's valid rows are counted (valid_rows_from): the counts
 * tensor of the same slot, and the elements of one row. */
typedef struct {
    const void *counts;
    kevo_dtype counts_dtype;
    int64_t n_counts;
    int64_t row_elems;
} kv_dev_rows;

/* kv_dev_compare over `slots` copies of got and want (and of rows->counts),
 * `stride` bytes apart, into one report; rows NULL: every element counts. */
cudaError_t kv_dev_compare_slots(const void *got, const void *want, size_t stride, int slots,
                                 kevo_dtype dtype, int64_t n, const kv_dev_rows *rows, double atol,
                                 double rtol, kv_dev_report *r, cudaStream_t s);

cudaError_t kv_dev_guard_check(const void *ptr, size_t bytes, uint64_t seed, kv_dev_report *r,
                               cudaStream_t s);

/* An order-independent 64-bit checksum of bytes (multiple of 8) into r->checksum. */
cudaError_t kv_dev_checksum(const void *ptr, size_t bytes, kv_dev_report *r, cudaStream_t s);

/* The checksums of `slots` copies, `stride` bytes apart, added into r->checksum. */
cudaError_t kv_dev_checksum_slots(const void *ptr, size_t stride, int slots, size_t bytes,
                                  kv_dev_report *r, cudaStream_t s);

/* Reads one element as a double (host-side, synchronous copy). */
cudaError_t kv_dev_read_element(const void *ptr, kevo_dtype dtype, int64_t index, double *out);

/* Enqueues a one-thread kernel that returns once *flag (mapped host memory)
 * equals epoch, or after timeout_ns: the work queued behind it then runs
 * back to back, whatever the host's launch rate. */
cudaError_t kv_dev_gate(const volatile unsigned *flag, unsigned epoch, uint64_t timeout_ns,
                        cudaStream_t s);

/* The base address of every rank's copy of the window, as seen from this GPU
 * (ncclGetLsaPointer(window, 0, peer)). Synchronous. */
cudaError_t kv_dev_window_peers(ncclWindow_t window, int world, void *peers[KEVO_MAX_RANKS]);

/* The NCCL device communicator (C++ object) behind an opaque pointer. */
ncclResult_t kv_dev_comm_create(ncclComm_t comm, int lsa_barrier_count, void **out);
void kv_dev_comm_destroy(ncclComm_t comm, void *devcomm);

#ifdef __cplusplus
}
#endif

#endif
