// expect: refused
// multicast_elf_walk.cu — reaches the driver's NVLink group granularity query without a single
// refused import or name: it finds libcuda in /proc/self/maps, reads the library's dynamic
// symbol table from the file with open/pread, looks up a name it assembles at run time, and
// calls the function in kevo_init. The arguments make the call harmless even where nothing
// stops it: a query (it creates nothing) with no properties, which the driver rejects. The
// source scan, the imports and the SASS show nothing; only the worker's run-time trap
// (worker/nvls_trap.c, armed where NCCL_NVLS_ENABLE=0) sees the call and the job is
// refused. kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*granularity_query)(size_t *granularity, const void *properties, int option);

static int read_at(int fd, void *buf, size_t n, off_t at)
{
    return pread(fd, buf, n, at) == (ssize_t)n ? 0 : -1;
}

// The address of a function of libcuda named name, or NULL.
static void *find_in_libcuda(const char *name)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512], path[512] = "";
    unsigned long start = 0, offset = 1;
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "libcuda.so") &&
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
    // load bias: where the segment at file offset 0 was mapped, less its address in the file
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
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", "cuMulti", "cast", "GetGranularity");
    void *fn = find_in_libcuda(name);
    if (!fn) {
        fprintf(stderr, "multicast_elf_walk: %s not found in libcuda\n", name);
        return 0; // nothing reached: the job then passes, and the GPU test says so
    }
    granularity_query query;
    memcpy(&query, &fn, sizeof fn);
    size_t granularity = 0;
    int rc = query(&granularity, NULL, 0);
    fprintf(stderr, "multicast_elf_walk: %s returned %d\n", name, rc);
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "multicast_elf_walk: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
