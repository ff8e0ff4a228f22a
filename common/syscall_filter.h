/* syscall_filter.h — a seccomp-BPF filter that refuses, with EPERM, the
 * system calls candidate code has no business making: the layer behind the
 * source and import scan (evaluator/checks/runtime_lookups.c), which a pointer
 * built at run time walks past. A refused call fails; nothing is killed.
 *
 * Filters stack and survive exec: the supervisor installs KV_FILTER_SANDBOX
 * in each worker before exec (evaluator/confine/sandbox.c), the worker adds
 * KV_FILTER_NO_EXEC on itself once CUDA and NCCL are up, before it loads any
 * candidate (worker/main.c), and the compile step gets KV_FILTER_SANDBOX |
 * KV_FILTER_NO_NET (evaluator/compile/toolchain.c). docs/evaluator.md,
 * "Confinement", lists every call and why. */
#ifndef KEVO_SYSCALL_FILTER_H
#define KEVO_SYSCALL_FILTER_H

/* ptrace, process_vm_readv/writev, mount and the new mount API, unshare,
 * setns, pivot_root, chroot, bpf, perf_event_open, kexec_*, *_module,
 * keyctl/add_key/request_key, userfaultfd, io_uring_*, personality */
#define KV_FILTER_SANDBOX (1u << 0)
/* execve, execveat, mprotect/pkey_mprotect asking for PROT_EXEC, and
 * prctl(PR_SET_DUMPABLE) (the worker makes itself non-dumpable, which keeps
 * its /proc/self/mem out of its own reach) */
#define KV_FILTER_NO_EXEC (1u << 1)
/* socket() of any family but AF_UNIX: no network at all (the compile step) */
#define KV_FILTER_NO_NET (1u << 2)

/* Whether kevo has the system-call numbers of this architecture. */
int kv_syscall_filter_supported(void);

/* Installs a filter refusing the calls of `rules` on the calling thread
 * (after fork, the whole process). no_new_privs must be set, or the caller
 * hold CAP_SYS_ADMIN. Async-signal-safe: it may run between fork and exec.
 * Returns 0 or an errno (ENOSYS on an architecture kevo has no numbers for). */
int kv_syscall_filter_install(unsigned rules);

#endif
