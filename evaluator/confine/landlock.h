/* landlock.h — Landlock through raw system calls, shared by the workers'
 * confinement (sandbox.c) and the compile step's (compile_confine.c).
 *
 * kevo keeps its own copies of the kernel's structs: the C library has no
 * wrappers, and the kernel headers of the machines we build on predate
 * ABI 6 (signal scoping). The layouts are the kernel's stable ABI.
 *
 * Internal to evaluator/. */
#ifndef KEVO_EVALUATOR_LANDLOCK_H
#define KEVO_EVALUATOR_LANDLOCK_H

#include <stdint.h>

#include "common/err.h"

#define LL_EXECUTE (1ull << 0)
#define LL_WRITE_FILE (1ull << 1)
#define LL_READ_FILE (1ull << 2)
#define LL_READ_DIR (1ull << 3)
#define LL_REMOVE_DIR (1ull << 4)
#define LL_REMOVE_FILE (1ull << 5)
#define LL_MAKE_CHAR (1ull << 6)
#define LL_MAKE_DIR (1ull << 7)
#define LL_MAKE_REG (1ull << 8)
#define LL_MAKE_SOCK (1ull << 9)
#define LL_MAKE_FIFO (1ull << 10)
#define LL_MAKE_BLOCK (1ull << 11)
#define LL_MAKE_SYM (1ull << 12)
#define LL_REFER (1ull << 13)     /* ABI 2 */
#define LL_TRUNCATE (1ull << 14)  /* ABI 3 */
#define LL_IOCTL_DEV (1ull << 15) /* ABI 5 */

/* the rights that apply to a file that is not a directory */
#define LL_FILE_RIGHTS (LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV)
#define LL_READ (LL_EXECUTE | LL_READ_FILE | LL_READ_DIR)
#define LL_DEVICE (LL_READ_FILE | LL_WRITE_FILE | LL_IOCTL_DEV)
#define LL_READ_WRITE                                                                       \
    (LL_READ | LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_DIR | LL_MAKE_REG | \
     LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_SYM | LL_REFER | LL_TRUNCATE)

/* The kernel's Landlock ABI version; 0 when it has none (or it is disabled). */
int kv_ll_abi(void);
/* The filesystem rights ABI abi knows: a ruleset handles them all. */
uint64_t kv_ll_handled_fs(int abi);
/* A new ruleset handling every filesystem right of abi (and, from ABI 6,
 * scoping signals when scope_signals), its fd close-on-exec and above 10
 * (clear of the fds a child sets up). -1 on failure. */
int kv_ll_ruleset(int abi, int scope_signals, kv_err *err);
/* Allows `access` (less what is not handled, and the directory rights on a
 * file) beneath path. A path absent here is no error: nothing to allow. */
int kv_ll_allow(int ruleset, const char *path, uint64_t access, uint64_t handled, kv_err *err);
/* The same for an open directory (O_PATH is enough), async-signal-safe:
 * 0 or an errno. */
int kv_ll_allow_fd(int ruleset, int fd, uint64_t access);
/* In the child: confines the calling thread (after fork, the process) to the
 * ruleset. no_new_privs must be set. 0 or an errno; async-signal-safe. */
int kv_ll_restrict(int ruleset);

#endif
