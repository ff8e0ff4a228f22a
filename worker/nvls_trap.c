/* nvls_trap.c — the driver's multicast entry points, disarmed (see
 * nvls_trap.h for why, and for what this cannot stop).
 *
 * Every distinct function found is patched with a jump (code_patch.h) to
 * the stub of its entry point. A stub has the driver function's parameters,
 * ignores them and returns CUDA_ERROR_NOT_PERMITTED; it records the first
 * entry point called in an atomic and writes one line to stderr (the
 * worker's log), nothing else: it may run on any thread, inside a host
 * callback too, so it only does what is async-signal-safe. The worker looks
 * at the record after every call into candidate code (worker/job.c). */
#define _GNU_SOURCE /* dladdr1 */
#include "worker/nvls_trap.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "worker/code_patch.h"

enum { E_CREATE, E_ADD_DEVICE, E_BIND_MEM, E_BIND_ADDR, E_UNBIND, E_GRANULARITY, E_COUNT };

#define REFUSAL_LINE(name)                 \
    "kevo-worker: refused a call to " name \
    ": NVLink multicast is forbidden on this machine (NCCL_NVLS_ENABLE=0)\n"

static const struct {
    const char *name;
    const char *line; /* what the stub writes to stderr */
    size_t line_len;
} entries[E_COUNT] = {
#define ENTRY(name)                                             \
    {                                                           \
        name, REFUSAL_LINE(name), sizeof REFUSAL_LINE(name) - 1 \
    }
    [E_CREATE] = ENTRY("cuMulticastCreate"),
    [E_ADD_DEVICE] = ENTRY("cuMulticastAddDevice"),
    [E_BIND_MEM] = ENTRY("cuMulticastBindMem"),
    [E_BIND_ADDR] = ENTRY("cuMulticastBindAddr"),
    [E_UNBIND] = ENTRY("cuMulticastUnbind"),
    [E_GRANULARITY] = ENTRY("cuMulticastGetGranularity"),
#undef ENTRY
};

/* ---- the record and the stubs ------------------------------------------------------------- */

static atomic_int first_called = -1; /* an entry, E_*, or -1 */

static CUresult refuse(int entry)
{
    int none = -1;
    atomic_compare_exchange_strong(&first_called, &none, entry);
    ssize_t rc = write(2, entries[entry].line, entries[entry].line_len);
    (void)rc; /* a log that cannot be written changes nothing: the record is kept */
    return CUDA_ERROR_NOT_PERMITTED;
}

static CUresult refuse_create(CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop)
{
    (void)mc;
    (void)prop;
    return refuse(E_CREATE);
}

static CUresult refuse_add_device(CUmemGenericAllocationHandle mc, CUdevice dev)
{
    (void)mc;
    (void)dev;
    return refuse(E_ADD_DEVICE);
}

static CUresult refuse_bind_mem(CUmemGenericAllocationHandle mc, size_t mc_offset,
                                CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size,
                                unsigned long long flags)
{
    (void)mc;
    (void)mc_offset;
    (void)mem;
    (void)mem_offset;
    (void)size;
    (void)flags;
    return refuse(E_BIND_MEM);
}

static CUresult refuse_bind_addr(CUmemGenericAllocationHandle mc, size_t mc_offset, CUdeviceptr ptr,
                                 size_t size, unsigned long long flags)
{
    (void)mc;
    (void)mc_offset;
    (void)ptr;
    (void)size;
    (void)flags;
    return refuse(E_BIND_ADDR);
}

static CUresult refuse_unbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset,
                              size_t size)
{
    (void)mc;
    (void)dev;
    (void)mc_offset;
    (void)size;
    return refuse(E_UNBIND);
}

static CUresult refuse_granularity(size_t *granularity, const CUmulticastObjectProp *prop,
                                   CUmulticastGranularity_flags option)
{
    (void)granularity;
    (void)prop;
    (void)option;
    return refuse(E_GRANULARITY);
}

/* The stub of each entry, as an address to jump to. */
static kv_code_ptr stub_of(int entry)
{
    switch (entry) {
    case E_CREATE: return (kv_code_ptr)refuse_create;
    case E_ADD_DEVICE: return (kv_code_ptr)refuse_add_device;
    case E_BIND_MEM: return (kv_code_ptr)refuse_bind_mem;
    case E_BIND_ADDR: return (kv_code_ptr)refuse_bind_addr;
    case E_UNBIND: return (kv_code_ptr)refuse_unbind;
    default: return (kv_code_ptr)refuse_granularity;
    }
}

const char *kv_nvls_trap_called(void)
{
    int e = atomic_load(&first_called);
    return e >= 0 && e < E_COUNT ? entries[e].name : NULL;
}

/* ---- finding the functions ---------------------------------------------------------------- */

#define MAX_TARGETS 64

typedef struct {
    void *addr;
    int entry;
    char found_as[96]; /* "dlsym cuMulticastCreate_v2", "entry point cuMulticastCreate @12010" */
} target;

typedef struct {
    target t[MAX_TARGETS];
    int n;
    int found[E_COUNT]; /* functions found per entry */
} target_set;

static int add_target(target_set *s, void *addr, int entry, const char *how, const char *name,
                      unsigned version, char *why, size_t cap)
{
    s->found[entry]++;
    for (int i = 0; i < s->n; i++) {
        if (s->t[i].addr != addr)
            continue;
        if (s->t[i].entry != entry) { /* one function behind two entry points: which stub? */
            snprintf(why, cap, "%s and %s are the same function (%p)", entries[s->t[i].entry].name,
                     entries[entry].name, addr);
            return -1;
        }
        return 0;
    }
    if (s->n == MAX_TARGETS) {
        snprintf(why, cap, "more than %d multicast functions", MAX_TARGETS);
        return -1;
    }
    target *t = &s->t[s->n++];
    t->addr = addr;
    t->entry = entry;
    if (version)
        snprintf(t->found_as, sizeof t->found_as, "%s %s @%u", how, name, version);
    else
        snprintf(t->found_as, sizeof t->found_as, "%s %s", how, name);
    return 0;
}

/* The exported symbols (libcuda's .dynsym: what an ELF walk finds), with
 * the versioned names a newer driver may add. */
static int find_exported(void *libcuda, target_set *s, char *why, size_t cap)
{
    static const char *const suffixes[] = {"", "_v2", "_v3"};
    for (int e = 0; e < E_COUNT; e++) {
        for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s%s", entries[e].name, suffixes[k]);
            dlerror();
            void *addr = dlsym(libcuda, name);
            if (addr && add_target(s, addr, e, "exported", name, 0, why, cap) != 0)
                return -1;
        }
    }
    return 0;
}

/* What the driver hands out by name (cuGetProcAddress, through the runtime),
 * at each API version that may select another variant. */
static int find_entry_points(target_set *s, char *why, size_t cap)
{
    int driver = 0;
    cudaError_t ce = cudaDriverGetVersion(&driver);
    if (ce != cudaSuccess) {
        snprintf(why, cap, "cudaDriverGetVersion: %s", cudaGetErrorString(ce));
        return -1;
    }
    const unsigned versions[] = {12010, CUDART_VERSION, (unsigned)driver};
    for (int e = 0; e < E_COUNT; e++) {
        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
            void *fn = NULL;
            enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
            ce = cudaGetDriverEntryPointByVersion(entries[e].name, &fn, versions[v],
                                                  cudaEnableDefault, &status);
            if (ce != cudaSuccess) {
                snprintf(why, cap, "cudaGetDriverEntryPointByVersion(%s, %u): %s", entries[e].name,
                         versions[v], cudaGetErrorString(ce));
                return -1;
            }
            if (status == cudaDriverEntryPointSuccess && fn &&
                add_target(s, fn, e, "entry point", entries[e].name, versions[v], why, cap) != 0)
                return -1;
        }
    }
    return 0;
}

/* The size of the function at t->addr, from the dynamic symbol that starts
 * there; 0 when no symbol starts exactly there (then the patch could run
 * into the next function, and the trap fails closed). */
static size_t function_size(const target *t, char *object, size_t cap)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    object[0] = '\0';
    if (!dladdr1(t->addr, &info, (void **)&sym, RTLD_DL_SYMENT))
        return 0;
    snprintf(object, cap, "%s", info.dli_fname ? info.dli_fname : "?");
    if (!sym || info.dli_saddr != t->addr)
        return 0;
    return (size_t)sym->st_size;
}

/* ---- arming ------------------------------------------------------------------------------- */

static int by_address(const target *a, const target *b)
{
    uintptr_t x = (uintptr_t)a->addr, y = (uintptr_t)b->addr;
    return x < y ? -1 : x > y;
}

int kv_nvls_trap_arm(int *n_patched, char *why, size_t cap)
{
    static target_set s; /* large; armed once per process */
    memset(&s, 0, sizeof s);
    *n_patched = 0;
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!libcuda) {
        const char *e = dlerror();
        snprintf(why, cap, "libcuda.so.1 is not loaded (%s)", e ? e : "dlopen failed");
        return -1;
    }
    int rc = find_exported(libcuda, &s, why, cap);
    dlclose(libcuda); /* RTLD_NOLOAD took a reference; the library stays */
    if (rc != 0 || find_entry_points(&s, why, cap) != 0)
        return -1;
    for (int e = 0; e < E_COUNT; e++) {
        if (s.found[e] == 0) {
            snprintf(why, cap, "the driver offers no %s, exported or as an entry point",
                     entries[e].name);
            return -1;
        }
    }
    /* sorted, so that two functions closer than a patch show up as neighbours */
    for (int i = 1; i < s.n; i++)
        for (int j = i; j > 0 && by_address(&s.t[j - 1], &s.t[j]) > 0; j--) {
            target tmp = s.t[j];
            s.t[j] = s.t[j - 1];
            s.t[j - 1] = tmp;
        }
    for (int i = 0; i < s.n; i++) {
        const target *t = &s.t[i];
        char object[256];
        size_t size = function_size(t, object, sizeof object);
        if (size == 0) {
            snprintf(why, cap, "%s (%p) is not the start of a symbol of %s: its size is unknown",
                     t->found_as, t->addr, object[0] ? object : "any loaded object");
            return -1;
        }
        if (i + 1 < s.n && (uintptr_t)s.t[i + 1].addr - (uintptr_t)t->addr < size)
            size = (uintptr_t)s.t[i + 1].addr - (uintptr_t)t->addr;
        kv_code_ptr at;
        memcpy(&at, &t->addr, sizeof at);
        char patch_why[256];
        if (kv_patch_jump(at, size, stub_of(t->entry), patch_why, sizeof patch_why) != 0) {
            snprintf(why, cap, "%s in %s: %s", t->found_as, object, patch_why);
            return -1;
        }
        (*n_patched)++;
    }
    return 0;
}
