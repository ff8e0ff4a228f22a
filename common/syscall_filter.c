/* syscall_filter.c — the seccomp-BPF filter of syscall_filter.h, written
 * with the kernel's own headers (no libseccomp: the GPU machines cannot
 * install packages). The program is built on the stack, so that it can be
 * installed between fork and exec.
 *
 * Shape: a call of another architecture (i386 through int 0x80, x32) is
 * refused outright; then one comparison per refused number; then the calls
 * whose arguments decide (mprotect's prot, prctl's option, socket's family);
 * everything else is allowed. Arguments are read as their low 32 bits, which
 * is all the kernel reads of an int, and holds every PROT_* bit. */
#define _GNU_SOURCE
#include "common/syscall_filter.h"

#include <errno.h>
#include <endian.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#endif

#define MAX_INSNS 128
#define REFUSE (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

#if __BYTE_ORDER == __LITTLE_ENDIAN
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#else
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#endif

/* Each entry's why, for the reviewer: none of these is made by CUDA, NCCL,
 * cuBLAS or the worker after exec (the mount and unshare of the sandbox
 * happen before the filter goes in). */
static const long sandbox_calls[] = {
    /* another process's memory, or our own behind the NVLS trap's back */
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    /* the filesystem view: mounts, namespaces, roots */
    SYS_mount,
    SYS_umount2,
    SYS_unshare,
    SYS_setns,
    SYS_pivot_root,
    SYS_chroot,
#ifdef SYS_open_tree
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
#endif
#ifdef SYS_mount_setattr
    SYS_mount_setattr,
#endif
    /* the kernel itself: programs, tracing, new kernels and modules, keys */
    SYS_bpf,
    SYS_perf_event_open,
    SYS_kexec_load,
#ifdef SYS_kexec_file_load
    SYS_kexec_file_load,
#endif
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    /* the usual helpers of kernel exploits: page-fault races, io_uring's
     * calls that no filter sees, and personality (READ_IMPLIES_EXEC) */
    SYS_userfaultfd,
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
#endif
    SYS_personality,
};

/* execve only after the worker's own exec: ld.so and CUDA never exec (the
 * driver's nvidia-modprobe helper runs at cuInit, before the filter). */
static const long exec_calls[] = {SYS_execve,
#ifdef SYS_execveat
                                  SYS_execveat
#endif
};

typedef struct {
    struct sock_filter insn[MAX_INSNS];
    unsigned short n;
    int overflow;
} program;

static void emit(program *p, unsigned short code, unsigned jt, unsigned jf, unsigned k)
{
    if (p->n >= MAX_INSNS) {
        p->overflow = 1;
        return;
    }
    struct sock_filter f = {code, (unsigned char)jt, (unsigned char)jf, k};
    p->insn[p->n++] = f;
}

static void load_nr(program *p)
{
    emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
}

static void refuse_each(program *p, const long *nrs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (unsigned)nrs[i]);
        emit(p, BPF_RET | BPF_K, 0, 0, REFUSE);
    }
}

/* nr with `bits` set in argument `arg`: refused; nr otherwise: allowed.
 * The accumulator holds nr on entry and on the way out. */
static void refuse_arg_bits(program *p, long nr, int arg, unsigned bits)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, (unsigned)nr);
    emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (unsigned)ARG_LO(arg));
    emit(p, BPF_JMP | BPF_JSET | BPF_K, 0, 1, bits);
    emit(p, BPF_RET | BPF_K, 0, 0, REFUSE);
    emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
}

/* nr with argument `arg` equal to v (or, with `unless`, not equal): refused. */
static void refuse_arg_eq(program *p, long nr, int arg, unsigned v, int unless)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, (unsigned)nr);
    emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (unsigned)ARG_LO(arg));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, unless ? 1 : 0, unless ? 0 : 1, v);
    emit(p, BPF_RET | BPF_K, 0, 0, REFUSE);
    emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
}

int kv_syscall_filter_supported(void)
{
#ifdef FILTER_ARCH
    return 1;
#else
    return 0;
#endif
}

int kv_syscall_filter_install(unsigned rules)
{
#ifndef FILTER_ARCH
    (void)rules;
    return ENOSYS;
#else
    program p;
    p.n = 0;
    p.overflow = 0;
    emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
    emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, FILTER_ARCH);
    emit(&p, BPF_RET | BPF_K, 0, 0, REFUSE);
    load_nr(&p);
#ifdef __x86_64__
    emit(&p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 0x40000000u); /* __X32_SYSCALL_BIT */
    emit(&p, BPF_RET | BPF_K, 0, 0, REFUSE);
#endif
    if (rules & KV_FILTER_SANDBOX)
        refuse_each(&p, sandbox_calls, sizeof sandbox_calls / sizeof sandbox_calls[0]);
    if (rules & KV_FILTER_NO_EXEC) {
        refuse_each(&p, exec_calls, sizeof exec_calls / sizeof exec_calls[0]);
        /* ld.so maps code with mmap and makes RELRO read-only with
         * mprotect(PROT_READ): neither asks mprotect for PROT_EXEC. A library
         * that wants an executable stack is refused (dlopen fails). */
        refuse_arg_bits(&p, SYS_mprotect, 2, PROT_EXEC);
#ifdef SYS_pkey_mprotect
        refuse_arg_bits(&p, SYS_pkey_mprotect, 2, PROT_EXEC);
#endif
        refuse_arg_eq(&p, SYS_prctl, 0, PR_SET_DUMPABLE, 0);
    }
    if (rules & KV_FILTER_NO_NET)
        refuse_arg_eq(&p, SYS_socket, 0, AF_UNIX, 1);
    emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    if (p.overflow)
        return E2BIG;
    struct sock_fprog prog = {.len = p.n, .filter = p.insn};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        return errno;
    return 0;
#endif
}
