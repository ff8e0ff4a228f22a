/* elf_imports.c — the undefined symbols of a shared object's ELF .dynsym
 * (imports.txt of a cache entry), read from the file with bounds checks. */
#include "evaluator/compile_internal.h"

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"

int kvc_read_imports(const char *so_path, char **out, kv_err *err)
{
    char *img = NULL;
    size_t len = 0;
    if (kv_read_file_max(so_path, KV_MAX_OBJECT_BYTES, &img, &len, err) != 0)
        return -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)img;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff > len || eh->e_shoff % 8 != 0 || (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff) {
        free(img);
        return kv_err_set(err, "%s: not a 64-bit ELF shared object", so_path);
    }
    /* the buffer is malloc'ed, so aligned for every ELF structure */
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(img + eh->e_shoff);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *sy = &sh[i], *st = &sh[sy->sh_link];
        if (sy->sh_offset > len || sy->sh_size > len - sy->sh_offset || st->sh_offset > len ||
            st->sh_size > len - st->sh_offset || sy->sh_offset % 8 != 0) {
            rc = kv_err_set(err, "%s: bad .dynsym section", so_path);
            break;
        }
        const Elf64_Sym *syms = (const Elf64_Sym *)(const void *)(img + sy->sh_offset);
        size_t count = sy->sh_size / sizeof(Elf64_Sym);
        const char *strs = img + st->sh_offset;
        for (size_t k = 1; k < count; k++) {
            if (syms[k].st_shndx != SHN_UNDEF || syms[k].st_name == 0 ||
                syms[k].st_name >= st->sh_size)
                continue;
            const char *nm = strs + syms[k].st_name;
            size_t max = st->sh_size - syms[k].st_name;
            size_t nl = strnlen(nm, max);
            if (nl == max || nl == 0)
                continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                char **nn = realloc(names, nc * sizeof *nn);
                if (!nn) {
                    rc = kv_err_set(err, "out of memory");
                    break;
                }
                names = nn;
                cap = nc;
            }
            if (!(names[n] = strndup(nm, nl))) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            n++;
        }
    }
    free(img);
    kv_strbuf b = {0};
    if (rc == 0) {
        if (n > 1)
            qsort(names, n, sizeof *names, kvc_cmp_str);
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
                continue;
            kv_sb_puts(&b, names[i]);
            kv_sb_put(&b, "\n", 1);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0 && !(*out = kv_sb_take(&b))) /* NULL: out of memory */
        rc = kv_err_set(err, "out of memory");
    kv_sb_free(&b);
    return rc;
}
