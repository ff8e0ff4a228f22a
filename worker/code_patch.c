/* code_patch.c — an absolute jump written over the start of a function
 * (see code_patch.h). */
#include "worker/code_patch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uintptr_t address_of(kv_code_ptr f)
{
    uintptr_t a;
    memcpy(&a, &f, sizeof a); /* C11 has no cast from a function pointer to an integer */
    return a;
}

#if defined(__x86_64__)

/* mprotect over the pages that hold [a, a + n). */
static int protect(uintptr_t a, size_t n, int prot, long page)
{
    uintptr_t first = a & ~(uintptr_t)(page - 1);
    uintptr_t end = (a + n + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    return mprotect((void *)first, end - first, prot);
}

int kv_patch_jump(kv_code_ptr at, size_t room, kv_code_ptr to, char *why, size_t cap)
{
    uintptr_t a = address_of(at), t = address_of(to);
    if (room < KV_JUMP_PATCH_BYTES) {
        snprintf(why, cap, "the function at %#lx has %zu bytes, fewer than the %d a jump needs",
                 (unsigned long)a, room, KV_JUMP_PATCH_BYTES);
        return -1;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || (page & (page - 1)) != 0) {
        snprintf(why, cap, "sysconf(_SC_PAGESIZE) gave %ld", page);
        return -1;
    }
    /* movabs rax, imm64 (48 b8 <8 bytes little-endian>); jmp rax (ff e0). rax holds
     * nothing a call passes in the System V ABI outside varargs (the count of vector
     * registers), and these functions take no varargs. */
    unsigned char code[KV_JUMP_PATCH_BYTES] = {0x48, 0xb8};
    for (int i = 0; i < 8; i++)
        code[2 + i] = (unsigned char)(t >> (8 * i));
    code[10] = 0xff;
    code[11] = 0xe0;
    if (protect(a, sizeof code, PROT_READ | PROT_WRITE | PROT_EXEC, page) != 0 &&
        protect(a, sizeof code, PROT_READ | PROT_WRITE, page) != 0) {
        snprintf(why, cap, "mprotect (writable) of the page at %#lx: %s", (unsigned long)a,
                 strerror(errno));
        return -1;
    }
    memcpy((void *)a, code, sizeof code);
    __builtin___clear_cache((char *)a, (char *)a + sizeof code);
    if (protect(a, sizeof code, PROT_READ | PROT_EXEC, page) != 0) {
        snprintf(why, cap, "mprotect (read-execute) of the page at %#lx: %s", (unsigned long)a,
                 strerror(errno));
        return -1;
    }
    if (memcmp((const void *)a, code, sizeof code) != 0) {
        snprintf(why, cap, "the jump at %#lx did not stick", (unsigned long)a);
        return -1;
    }
    return 0;
}

#else

int kv_patch_jump(kv_code_ptr at, size_t room, kv_code_ptr to, char *why, size_t cap)
{
    (void)room;
    (void)to;
    snprintf(why, cap, "patching the function at %#lx: implemented for x86-64 only",
             (unsigned long)address_of(at));
    return -1;
}

#endif
