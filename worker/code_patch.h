/* code_patch.h — overwriting the start of a function with a jump to
 * another, so that every caller, however it found the function (its
 * symbol, a driver entry point table, a walk of the ELF file), lands in
 * the replacement. Used by the NVLS trap (nvls_trap.h); small and
 * separate so that a CPU test can patch a function of its own. */
#ifndef KEVO_WORKER_CODE_PATCH_H
#define KEVO_WORKER_CODE_PATCH_H

#include <stddef.h>

/* The bytes a jump patch overwrites: movabs rax, imm64; jmp rax. */
#define KV_JUMP_PATCH_BYTES 12

typedef void (*kv_code_ptr)(void);

/* Overwrites the first KV_JUMP_PATCH_BYTES bytes of the function at `at`
 * with an absolute jump to `to`. room: how many bytes from `at` on are
 * known to belong to that function (its symbol's size); a smaller room is
 * refused, since the patch would run into the next function. The pages
 * are made writable for the write (read-write-execute where the system
 * allows it, so that other threads running code on the same pages do not
 * fault; else read-write) and read-execute again after it. x86-64 only:
 * elsewhere it fails. Returns 0, or -1 with why filled. Not thread-safe
 * against a thread calling `at` during the write. */
int kv_patch_jump(kv_code_ptr at, size_t room, kv_code_ptr to, char *why, size_t cap);

#endif
