/* test_code_patch.c — the jump patch of the worker's NVLS trap
 * (worker/code_patch.c) on functions of this test: a function
 * patched to jump to a stub lands in the stub whichever way it is called
 * (directly, through a pointer taken before the patch), the stub's record
 * says so, and a patch that would run past the function is refused. The
 * driver's entry points themselves are patched on the GPU machines only
 * (tests/hostile/multicast_elf_walk.cu); here the trap must fail closed,
 * since this process has not loaded libcuda. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "worker/code_patch.h"
#include "worker/nvls_trap.h"
#include "test.h"

/* A victim with a body well over KV_JUMP_PATCH_BYTES, never inlined, so
 * that callers really call it. */
__attribute__((noinline)) int victim(int x);
__attribute__((noinline)) int victim(int x)
{
    volatile int acc = 0;
    for (int i = 0; i < x; i++)
        acc += i * 3 + (acc & 7);
    return acc + 1000;
}

/* A second victim right behind it, to show that the first patch leaves it alone. */
__attribute__((noinline)) int neighbour(int x);
__attribute__((noinline)) int neighbour(int x)
{
    volatile int acc = x;
    for (int i = 0; i < 5; i++)
        acc = acc * 2 + i;
    return acc;
}

static atomic_int stub_calls;
static atomic_int stub_arg;

/* The stub: the victim's signature, records the call, returns its own answer. */
static int stub(int x)
{
    atomic_fetch_add(&stub_calls, 1);
    atomic_store(&stub_arg, x);
    return -77;
}

static kv_code_ptr code(int (*f)(int))
{
    return (kv_code_ptr)f;
}

static void test_patch_and_call(void)
{
    int (*volatile before)(int) = victim; /* a pointer taken before the patch */
    int expect = before(10);
    KV_CHECK(expect >= 1000);
    int neighbour_before = neighbour(3);
    char why[256] = "";
    /* victim's body is longer than the patch: a loop, a volatile, a call-free return */
    int rc = kv_patch_jump(code(victim), KV_JUMP_PATCH_BYTES, code(stub), why, sizeof why);
#if defined(__x86_64__)
    KV_CHECKF(rc == 0, "kv_patch_jump: %s", why);
    KV_REQUIRE(rc == 0);
    KV_CHECK(before(10) == -77);
    KV_CHECK(victim(12) == -77);
    KV_CHECK(atomic_load(&stub_calls) == 2 && atomic_load(&stub_arg) == 12);
    KV_CHECK(neighbour(3) == neighbour_before);
    /* the code reads as the jump: movabs rax, stub; jmp rax */
    unsigned char head[KV_JUMP_PATCH_BYTES];
    int (*f)(int) = victim;
    memcpy(head, *(unsigned char(*)[KV_JUMP_PATCH_BYTES])(void *)(uintptr_t)f, sizeof head);
    KV_CHECK(head[0] == 0x48 && head[1] == 0xb8 && head[10] == 0xff && head[11] == 0xe0);
    uint64_t target = 0;
    for (int i = 0; i < 8; i++)
        target |= (uint64_t)head[2 + i] << (8 * i);
    int (*s)(int) = stub;
    uintptr_t stub_addr;
    memcpy(&stub_addr, &s, sizeof stub_addr);
    KV_CHECK(target == stub_addr);
#else
    KV_CHECK(rc == -1);
    KV_CHECK_STR_CONTAINS(why, "x86-64 only");
    (void)neighbour_before;
#endif
}

static void test_too_small(void)
{
    char why[256] = "";
    int before = neighbour(2);
    KV_CHECK(kv_patch_jump(code(neighbour), KV_JUMP_PATCH_BYTES - 1, code(stub), why, sizeof why) ==
             -1);
#if defined(__x86_64__)
    KV_CHECK_STR_CONTAINS(why, "fewer than the 12 a jump needs");
#endif
    KV_CHECK(neighbour(2) == before); /* untouched */
}

/* Without libcuda in the process there is nothing to patch: arming fails,
 * naming why, and nothing is recorded. */
static void test_trap_fails_closed(void)
{
    int n = -1;
    char why[512] = "";
    KV_CHECK(kv_nvls_trap_arm(&n, why, sizeof why) == -1);
    KV_CHECK_STR_CONTAINS(why, "libcuda.so.1 is not loaded");
    KV_CHECK(n == 0);
    KV_CHECK(kv_nvls_trap_called() == NULL);
}

int main(void)
{
    KV_RUN(test_trap_fails_closed);
    KV_RUN(test_too_small);
    KV_RUN(test_patch_and_call);
    return kv_test_summary();
}
