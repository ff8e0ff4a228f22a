/* elf_imports.c — what kevo reads of a candidate's shared object, from the
 * file with bounds checks: the undefined symbols of its .dynsym (imports.txt
 * of a cache entry), and the machine code of its host side (the dedup key). */
#include "evaluator/compile/compile_internal.h"

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"

/* so_path read whole into *img (the caller's, free it), its headers checked:
 * 0, or -1. The buffer is malloc'ed, so aligned for every ELF structure. */
static int load_elf(const char *so_path, char **img, size_t *len, const Elf64_Ehdr **eh,
                    const Elf64_Shdr **sh, kv_err *err)
{
    if (kv_read_file_max(so_path, KV_MAX_OBJECT_BYTES, img, len, err) != 0)
        return -1;
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)(const void *)*img;
    if (*len < sizeof *e || memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 ||
        e->e_ident[EI_CLASS] != ELFCLASS64 || e->e_shentsize != sizeof(Elf64_Shdr) ||
        e->e_shoff > *len || e->e_shoff % 8 != 0 ||
        (uint64_t)e->e_shnum * sizeof(Elf64_Shdr) > *len - e->e_shoff) {
        free(*img);
        *img = NULL;
        return kv_err_set(err, "%s: not a 64-bit ELF shared object", so_path);
    }
    *eh = e;
    *sh = (const Elf64_Shdr *)(const void *)(*img + e->e_shoff);
    return 0;
}

int kv_compile_hash_host_code(const char *so_path, kv_sha256_ctx *h, kv_err *err)
{
    char *img = NULL;
    size_t len = 0;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    if (load_elf(so_path, &img, &len, &eh, &sh, err) != 0)
        return -1;
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_PROGBITS || !(sh[i].sh_flags & SHF_EXECINSTR))
            continue;
        if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset)
            rc = kv_err_set(err, "%s: section %u lies outside the file", so_path, i);
        else
            kv_sha256_update(h, img + sh[i].sh_offset, sh[i].sh_size);
    }
    free(img);
    return rc;
}

int kv_compile_read_imports(const char *so_path, char **out, kv_err *err)
{
    char *img = NULL;
    size_t len = 0;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    if (load_elf(so_path, &img, &len, &eh, &sh, err) != 0)
        return -1;
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
            qsort(names, n, sizeof *names, kv_compile_cmp_str);
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
