// expect: ok
// raw_syscall.cu — gets past the source and import scan: finds the C library's raw system-call
// entry in /proc/self/maps and the library's dynamic symbol table (open/pread), under a name
// assembled at run time, and calls it through that pointer in kevo_init: ptrace(PEEKDATA) of
// its parent and process_vm_writev of its own memory. The system-call filter the supervisor
// installs in every worker refuses both with EPERM. A call that works makes kevo_init say
// ESCAPED and fail: runtime_error instead of ok. kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TAG "raw_syscall"

typedef long (*raw_call)(long nr, ...);

static int read_at(int fd, void *buf, size_t n, off_t at)
{
    return pread(fd, buf, n, at) == (ssize_t)n ? 0 : -1;
}

// The address of a function of libc named name, or NULL.
static void *find_in_libc(const char *name)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512], path[512] = "";
    unsigned long start = 0, offset = 1;
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "/libc.so") &&
            sscanf(line, "%lx-%*x %*s %lx %*s %*s %511s", &start, &offset, path) == 3 && offset == 0)
            break;
    if (maps)
        fclose(maps);
    int fd = offset == 0 ? open(path, O_RDONLY) : -1;
    void *found = NULL;
    Elf64_Ehdr eh;
    if (fd < 0 || read_at(fd, &eh, sizeof eh, 0) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    unsigned long bias = start;
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (read_at(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) == 0 &&
            ph.p_type == PT_LOAD && ph.p_offset == 0) {
            bias = start - (ph.p_vaddr & ~4095UL);
            break;
        }
    }
    for (int i = 0; i < eh.e_shnum && !found; i++) {
        Elf64_Shdr sy, st;
        if (read_at(fd, &sy, sizeof sy, (off_t)(eh.e_shoff + i * sizeof sy)) != 0 ||
            sy.sh_type != SHT_DYNSYM ||
            read_at(fd, &st, sizeof st, (off_t)(eh.e_shoff + sy.sh_link * sizeof st)) != 0)
            continue;
        Elf64_Sym *syms = (Elf64_Sym *)malloc(sy.sh_size);
        char *strs = (char *)malloc(st.sh_size + 1);
        if (syms && strs && read_at(fd, syms, sy.sh_size, (off_t)sy.sh_offset) == 0 &&
            read_at(fd, strs, st.sh_size, (off_t)st.sh_offset) == 0) {
            strs[st.sh_size] = '\0';
            for (size_t k = 0; k < sy.sh_size / sizeof *syms; k++)
                if (syms[k].st_shndx != SHN_UNDEF && syms[k].st_name < st.sh_size &&
                    strcmp(strs + syms[k].st_name, name) == 0) {
                    found = (void *)(bias + syms[k].st_value);
                    break;
                }
        }
        free(syms);
        free(strs);
    }
    close(fd);
    return found;
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    char name[16];
    snprintf(name, sizeof name, "%s%s", "sys", "call");
    void *fn = find_in_libc(name);
    if (!fn) {
        fprintf(stderr, TAG ": %s not found in libc\n", name);
        return 0; // nothing reached: the job then passes, and the GPU test says so
    }
    raw_call call;
    memcpy(&call, &fn, sizeof fn);
    int escaped = 0;
    // x86-64 and aarch64 numbers: ptrace 101 / 117, process_vm_writev 311 / 271
#if defined(__aarch64__)
    const long nr_ptrace = 117, nr_vm_writev = 271;
#else
    const long nr_ptrace = 101, nr_vm_writev = 311;
#endif
    const long peekdata = 2;
    errno = 0;
    long r = call(nr_ptrace, peekdata, (long)getppid(), 0L, 0L);
    if (r != -1 || errno != EPERM) {
        fprintf(stderr, TAG ": ESCAPED: ptrace through a raw call returned %ld (%s)\n", r,
                strerror(errno));
        escaped = 1;
    }
    static unsigned char target = 1;
    unsigned char v = 1;
    struct iovec local = {&v, 1}, remote = {&target, 1};
    errno = 0;
    r = call(nr_vm_writev, (long)getpid(), (long)&local, 1L, (long)&remote, 1L, 0L);
    if (r != -1 || errno != EPERM) {
        fprintf(stderr, TAG ": ESCAPED: process_vm_writev through a raw call returned %ld (%s)\n",
                r, strerror(errno));
        escaped = 1;
    }
    fprintf(stderr, TAG ": ptrace and process_vm_writev through a raw call: %s\n",
            escaped ? "reached" : "refused (EPERM), as they should be");
    return escaped;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s: ncclAllReduce: %s\n", TAG, ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
