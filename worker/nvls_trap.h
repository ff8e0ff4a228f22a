/* nvls_trap.h — the run-time guard against NVLink multicast where the
 * machine forbids it (NCCL_NVLS_ENABLE=0: there, creating a multicast
 * object can take a shared host's GPUs out of service for a day).
 *
 * The static checks (the NVLS scan, evaluator/checks/runtime_lookups.h) see names
 * and imports; a candidate can still reach the driver's multicast functions
 * without either, by reading libcuda's ELF symbol table from the file and
 * calling an address. So once CUDA and NCCL are initialised, the worker
 * overwrites the first bytes of every cuMulticast* function of the driver
 * with a jump to a refusal stub of its own: whatever route a caller took,
 * the call returns CUDA_ERROR_NOT_PERMITTED and is recorded, and the job is
 * refused. What it cannot stop: a candidate that restores the bytes itself
 * (mprotect, mmap over libcuda and /proc/self/mem are its means; the first
 * two are refused statically, file access is the confinement's layer), or
 * one that drives the kernel driver's ioctls directly. */
#ifndef KEVO_WORKER_NVLS_TRAP_H
#define KEVO_WORKER_NVLS_TRAP_H

#include <stddef.h>

/* Patches every multicast entry point the driver offers (libcuda's
 * exported cuMulticast* symbols and their _v2/_v3 variants, and what
 * cudaGetDriverEntryPointByVersion returns for them at 12.1, the runtime's
 * and the driver's versions). Fails closed: 0 only when every one is
 * patched; -1 with why filled otherwise (the worker then refuses to become
 * ready). n_patched: the distinct functions patched. */
int kv_nvls_trap_arm(int *n_patched, char *why, size_t cap);

/* The first trapped entry point called since the trap was armed (e.g.
 * "cuMulticastGetGranularity"), or NULL when none was. */
const char *kv_nvls_trap_called(void);

#endif
