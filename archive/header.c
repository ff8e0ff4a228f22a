/* header.c — LMDB's two header (meta) pages, read with pread before LMDB
 * maps the file (env.c) and before every commit of the writer (guard.c).
 * LMDB trusts them: a junk map size makes it ask for a map it cannot get
 * (ENOMEM), a junk last page makes it read past the file's end. */
#include "archive/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The layout (lmdb 0.9, 64-bit): a 16-byte page header (pgno u64, pad u16,
 * flags u16, lower/upper u16), then magic u32, version u32, address ptr,
 * mapsize, two 48-byte db records (the first's md_pad holds the page size),
 * last_pg, txnid. */
#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define LMDB_P_META 0x08
#define META_FLAGS_OFF 10
#define META_MAGIC_OFF 16
#define META_VERSION_OFF 20
#define META_MAPSIZE_OFF 32
#define META_PSIZE_OFF 40
#define META_LAST_PG_OFF 136
#define META_TXNID_OFF 144
#define META_BYTES 152
/* kevo never maps more (txn.c doubles the map up to 1 TiB) */
#define MAX_MAP_BYTES ((uint64_t)1 << 40)

static uint64_t rd(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i]; /* little-endian, as LMDB writes it on x86-64 and arm64 */
    return v;
}

static void parse(const uint8_t *b, kv_lmdb_meta *m)
{
    m->flags = (uint16_t)rd(b + META_FLAGS_OFF, 2);
    m->magic = (uint32_t)rd(b + META_MAGIC_OFF, 4);
    m->version = (uint32_t)rd(b + META_VERSION_OFF, 4);
    m->mapsize = rd(b + META_MAPSIZE_OFF, 8);
    m->psize = (uint32_t)rd(b + META_PSIZE_OFF, 4);
    m->last_pg = rd(b + META_LAST_PG_OFF, 8);
    m->txnid = rd(b + META_TXNID_OFF, 8);
}

/* 0, or 1 when the file ends before n bytes at off; -1 on a read error. */
static int read_at(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 1;
        done += (size_t)r;
    }
    return 0;
}

/* The checks of one page that do not depend on the other. */
static int check_page(const kv_lmdb_meta *m, int page, char *why, size_t cap)
{
    if (m->magic != LMDB_MAGIC)
        snprintf(why, cap, "%sbad magic number in header page %d",
                 page == 0 ? "not an LMDB archive: " : "", page);
    else if (m->version != LMDB_DATA_VERSION)
        snprintf(why, cap, "header page %d: LMDB data format %u, this build reads %u", page,
                 m->version, LMDB_DATA_VERSION);
    else if (!(m->flags & LMDB_P_META))
        snprintf(why, cap, "header page %d is not marked as a header page (flags 0x%x)", page,
                 m->flags);
    else
        return 0;
    return KV_DAMAGED;
}

/* Reads header page `page` (at off, in a file of size bytes that must be at
 * least need long) into m and checks it on its own: 0 or KV_DAMAGED. */
static int read_page(int fd, off_t size, off_t need, int page, off_t off, kv_lmdb_meta *m,
                     char *why, size_t cap)
{
    uint8_t buf[META_BYTES];
    int r = size < need ? 1 : read_at(fd, buf, sizeof buf, off);
    if (r < 0)
        snprintf(why, cap, "reading header page %d: %s", page, strerror(errno));
    else if (r > 0 && page == 0)
        snprintf(why, cap, "not an LMDB archive, or truncated: only %lld bytes", (long long)size);
    else if (r > 0)
        snprintf(why, cap, "truncated archive (%lld bytes, less than its two header pages)",
                 (long long)size);
    if (r != 0)
        return KV_DAMAGED;
    parse(buf, m);
    return check_page(m, page, why, cap);
}

int kv_lmdb_read_header(int fd, off_t size, kv_lmdb_meta *newest, char *why, size_t cap)
{
    kv_lmdb_meta m[2];
    if (read_page(fd, size, META_BYTES, 0, 0, &m[0], why, cap) != 0)
        return KV_DAMAGED;
    uint32_t ps = m[0].psize;
    if (ps < 512 || ps > 65536 || (ps & (ps - 1)) != 0) {
        snprintf(why, cap, "corrupt LMDB header (page size %u)", ps);
        return KV_DAMAGED;
    }
    if (read_page(fd, size, 2 * (off_t)ps, 1, ps, &m[1], why, cap) != 0)
        return KV_DAMAGED;
    if (m[1].psize != ps) {
        snprintf(why, cap, "the header pages disagree on the page size (%u and %u)", ps,
                 m[1].psize);
        return KV_DAMAGED;
    }
    /* LMDB uses the page with the larger transaction id */
    const kv_lmdb_meta *live = m[1].txnid > m[0].txnid ? &m[1] : &m[0];
    int lp = live == &m[1];
    uint64_t need = (live->last_pg + 1) * (uint64_t)ps;
    if (live->mapsize > MAX_MAP_BYTES || live->last_pg >= MAX_MAP_BYTES / ps) {
        snprintf(why, cap, "header page %d asks for a map of %llu bytes holding %llu pages", lp,
                 (unsigned long long)live->mapsize, (unsigned long long)(live->last_pg + 1));
        return KV_DAMAGED;
    }
    if (live->mapsize < need) {
        snprintf(why, cap, "header page %d: its map of %llu bytes cannot hold its %llu pages", lp,
                 (unsigned long long)live->mapsize, (unsigned long long)(live->last_pg + 1));
        return KV_DAMAGED;
    }
    if ((uint64_t)size < need) {
        snprintf(why, cap, "truncated archive (%lld bytes; its header says %llu pages of %u bytes)",
                 (long long)size, (unsigned long long)(live->last_pg + 1), ps);
        return KV_DAMAGED;
    }
    if (newest)
        *newest = *live;
    return 0;
}

int kv_lmdb_damage(int rc)
{
    return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
           rc == MDB_VERSION_MISMATCH || rc == ENOMEM;
}
