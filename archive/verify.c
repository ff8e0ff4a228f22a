/* verify.c — walking every database of an archive where a damaged page
 * cannot take the caller down. LMDB trusts its pages: a flipped byte in a
 * branch or leaf page header can make it read through a wild pointer
 * (SIGSEGV) or stop on an assertion (abort). So the walk runs in a child
 * process (fork): it opens the archive read-only, visits every record of
 * every database with a cursor (quick: that touches every branch, leaf and
 * overflow page header; full: each record is also decoded, its checksum
 * checked, each code record decompressed) and reports through a pipe, one
 * line per event:
 *
 *   D<database>                  the walk of a database begins
 *   B<database>\t<key>\t<what>   a damaged record (full walk; the walk goes on)
 *   O<message>                   the archive does not open (exit 4)
 *   N<records>                   the walk ended
 *
 * The parent reads the lines, waits for the child and names what it saw:
 * a signal or an unexpected exit status during the walk of a database
 * becomes "damaged (<database>: the walk crashed (signal 11))". */
#include "archive/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/codec.h"
#include "common/fsutil.h"

#define EXIT_SOUND 0
#define EXIT_BAD_RECORDS 3
#define EXIT_NO_OPEN 4
#define WALK_LIMIT_S 600 /* a walk that loops on a damaged page ends as a crash */

/* ---- the child ---------------------------------------------------------------------- */

/* One line to the parent; control characters (from keys) become '?'. */
static void say(int fd, const char *fmt, ...) KV_PRINTF(2, 3);
static void say(int fd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 1; i < n; i++)
        if (((unsigned char)line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f)
            line[i] = '?';
    line[n++] = '\n';
    for (const char *p = line; n > 0;) {
        ssize_t w = write(fd, p, (size_t)n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(EXIT_NO_OPEN); /* the parent is gone: nobody to tell */
        p += w;
        n -= (int)w;
    }
}

static uint64_t be64(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

/* The key of a record of database db, as a person would name it. */
static void key_name(int db, const MDB_val *k, char *out, size_t cap)
{
    const char *s = k->mv_data;
    size_t n = k->mv_size;
    if ((db == DB_PROGRAMS || db == DB_CODE || db == DB_LINEAGE) && n == 8)
        snprintf(out, cap, "%s %llu", db == DB_LINEAGE ? "parent" : "program",
                 (unsigned long long)be64(s));
    else if (db == DB_ATTEMPTS && n == 8)
        snprintf(out, cap, "attempt %llu", (unsigned long long)be64(s));
    else if (db == DB_META || db == DB_ELITES || db == DB_RANKING || db == DB_SIZES)
        snprintf(out, cap, "%.*s", (int)strnlen(s, n < 200 ? n : 200), s);
    else
        snprintf(out, cap, "a key of %zu bytes", n);
}

/* What LMDB does not check of the pages the cursor stands on (lmdb 0.9,
 * 64-bit: a 16-byte header of pgno u64, pad u16, flags u16, lower u16 and
 * upper u16, or for an overflow page the page count u32 at 12). A leaf
 * page is found from a key, which always lies in it: the map is aligned to
 * pages, so the page begins at the key's address rounded down. Data that
 * begins 16 bytes into a page lies in an overflow page (a leaf's nodes
 * begin past its header and node pointers). */
enum { P_BRANCH = 0x01, P_LEAF = 0x02, P_OVERFLOW = 0x04, P_META = 0x08 };

typedef struct {
    size_t psize;
    uintptr_t base;     /* the map's first page, from the first page number seen */
    uintptr_t checked;  /* the leaf page checked last */
    uint64_t last_pgno; /* the last page in use */
} page_walk;

static unsigned rd16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* The page's number must match its place in the map. */
static int check_place(page_walk *pw, uintptr_t pg, uint64_t pgno, kv_err *err)
{
    uintptr_t base = pg - (uintptr_t)(pgno * pw->psize);
    if (!pw->base)
        pw->base = base;
    if (base != pw->base)
        return kv_err_set(err, "page %llu: its page number does not match its place",
                          (unsigned long long)pgno);
    return 0;
}

/* The header and node pointers of a leaf or branch page p (kind P_LEAF or
 * P_BRANCH): lower and upper in order, every node between upper and the
 * page's end, the first node at upper (LMDB keeps the nodes packed). */
static int check_nodes(const page_walk *pw, const uint8_t *p, unsigned kind, kv_err *err)
{
    const char *what = kind == P_LEAF ? "leaf" : "branch";
    unsigned long long pgno = (unsigned long long)rd_le(p, 8);
    unsigned flags = rd16(p + 10), lower = rd16(p + 12), upper = rd16(p + 14);
    if ((flags & (P_LEAF | P_BRANCH | P_OVERFLOW | P_META)) != kind)
        return kv_err_set(err, "%s page %llu: flags %#x", what, pgno, flags);
    if (lower < 16 || lower > upper || upper > pw->psize || (lower - 16) % 2)
        return kv_err_set(err, "%s page %llu: lower %u, upper %u", what, pgno, lower, upper);
    unsigned first = (unsigned)pw->psize;
    for (unsigned i = 16; i < lower; i += 2) {
        unsigned ptr = rd16(p + i);
        if (ptr < upper || ptr + 8 > pw->psize)
            return kv_err_set(err, "%s page %llu: node %u at %u, outside %u..%zu", what, pgno,
                              (i - 16) / 2, ptr, upper, pw->psize);
        if (ptr < first)
            first = ptr;
    }
    if (lower > 16 && first != upper)
        return kv_err_set(err, "%s page %llu: upper %u, its first node at %u", what, pgno, upper,
                          first);
    return 0;
}

static int check_leaf(page_walk *pw, const void *key, kv_err *err)
{
    uintptr_t pg = (uintptr_t)key & ~(uintptr_t)(pw->psize - 1);
    if (pg == pw->checked)
        return 0;
    pw->checked = pg;
    const uint8_t *p = (const uint8_t *)pg;
    if (check_nodes(pw, p, P_LEAF, err) != 0)
        return -1;
    return check_place(pw, pg, rd_le(p, 8), err);
}

/* The branch pages of a tree, from its root down (the leaves are the cursor
 * walk's): each page within the map, where its number says, no deeper than
 * the tree, with sound nodes. Needs pw->base (a leaf seen before). */
static int check_branches(const page_walk *pw, uint64_t pgno, unsigned depth, kv_err *err)
{
    if (pgno < 2 || pgno > pw->last_pgno)
        return kv_err_set(err, "a branch points to page %llu, outside pages 2..%llu",
                          (unsigned long long)pgno, (unsigned long long)pw->last_pgno);
    const uint8_t *p = (const uint8_t *)(pw->base + (uintptr_t)(pgno * pw->psize));
    unsigned flags = rd16(p + 10);
    if ((flags & (P_LEAF | P_BRANCH | P_OVERFLOW | P_META)) == P_LEAF && depth == 1)
        return 0;
    if (depth <= 1)
        return kv_err_set(err, "page %llu: flags %#x at the tree's leaf level",
                          (unsigned long long)pgno, flags);
    if (rd_le(p, 8) != pgno)
        return kv_err_set(err, "page %llu: its page number says %llu", (unsigned long long)pgno,
                          (unsigned long long)rd_le(p, 8));
    if (check_nodes(pw, p, P_BRANCH, err) != 0)
        return -1;
    for (unsigned i = 16; i < rd16(p + 12); i += 2) {
        const uint8_t *node = p + rd16(p + i);
        uint64_t child =
            (uint64_t)rd16(node) | (uint64_t)rd16(node + 2) << 16 | (uint64_t)rd16(node + 4) << 32;
        if (check_branches(pw, child, depth - 1, err) != 0)
            return -1;
    }
    return 0;
}

/* Every named database's branch pages: their roots and depths are the
 * values (LMDB's MDB_db: depth u16 at 6, root u64 at 40) of the main tree. */
static void walk_branches(kv_txn *t, const page_walk *pw, int fd, uint64_t *bad)
{
    MDB_dbi main_dbi;
    MDB_cursor *c;
    int rc = mdb_dbi_open(t->txn, NULL, 0, &main_dbi);
    if (rc == 0)
        rc = mdb_cursor_open(t->txn, main_dbi, &c);
    if (rc != 0) {
        say(fd, "B(main)	(the database)	opening: %s", mdb_strerror(rc));
        (*bad)++;
        return;
    }
    MDB_val k, v;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 63 ? k.mv_size : 63),
                 (const char *)k.mv_data);
        kv_err err = {{0}};
        if (v.mv_size != 48) {
            say(fd, "B%s	(its tree)	a description of %zu bytes, not 48", name,
                v.mv_size);
            (*bad)++;
            continue;
        }
        const uint8_t *d = v.mv_data;
        uint64_t root = rd_le(d + 40, 8);
        unsigned depth = rd16(d + 6);
        if (root != UINT64_MAX &&
            check_branches(pw, root, depth, &err) != 0) { /* P_INVALID: empty */
            say(fd, "B%s	(its tree)	%s", name, err.msg);
            (*bad)++;
        }
    }
    mdb_cursor_close(c);
    if (rc != MDB_NOTFOUND) {
        say(fd, "B(main)	(the database)	mdb_cursor_get: %s", mdb_strerror(rc));
        (*bad)++;
    }
}

static int check_overflow(page_walk *pw, const MDB_val *v, kv_err *err)
{
    uintptr_t at = (uintptr_t)v->mv_data;
    if ((at & (pw->psize - 1)) != 16)
        return 0;
    const uint8_t *p = (const uint8_t *)(at - 16);
    unsigned long long pgno = (unsigned long long)rd_le(p, 8);
    unsigned flags = rd16(p + 10);
    uint64_t pages = rd_le(p + 12, 4), want = (16 - 1 + v->mv_size) / pw->psize + 1;
    if ((flags & (P_LEAF | P_BRANCH | P_OVERFLOW | P_META)) != P_OVERFLOW)
        return kv_err_set(err, "overflow page %llu: flags %#x", pgno, flags);
    if (pages != want)
        return kv_err_set(err, "overflow page %llu: %llu pages for %zu bytes (%llu)", pgno,
                          (unsigned long long)pages, v->mv_size, (unsigned long long)want);
    return check_place(pw, at - 16, pgno, err);
}

/* Decodes one record of database db: 0, or -1 with err saying what is wrong. */
static int check_record(kv_txn *t, int db, const MDB_val *k, const MDB_val *v, kv_err *err)
{
    int rc = 0;
    switch (db) {
    case DB_PROGRAMS: {
        kv_program p;
        rc = kv_decode_program(v->mv_data, v->mv_size, &p, err);
        if (rc == 0)
            kv_program_clear(&p);
        break;
    }
    case DB_CODE: {
        char *src = NULL;
        size_t len;
        rc = k->mv_size == 8 ? kv_get_source(t, be64(k->mv_data), &src, &len, err)
                             : kv_err_set(err, "a key of %zu bytes, not 8", k->mv_size);
        free(src);
        kv_program p;
        if (rc == 0 && (rc = kv_get_program(t, be64(k->mv_data), &p, err)) == 0)
            kv_program_clear(&p);
        else if (rc == KV_NOTFOUND)
            rc = kv_err_set(err, "no program has this id");
        break;
    }
    case DB_ATTEMPTS: {
        kv_attempt a;
        rc = kv_decode_attempt(v->mv_data, v->mv_size, &a, err);
        if (rc == 0)
            kv_attempt_clear(&a);
        break;
    }
    case DB_ELITES: {
        kv_elite e;
        rc = kv_decode_elite(v->mv_data, v->mv_size, &e, err);
        break;
    }
    case DB_RANKING:
        if (v->mv_size != 0 || k->mv_size < 17 || memchr(k->mv_data, 0, k->mv_size - 16) == NULL)
            rc = kv_err_set(err, "not a ranking entry (key %zu bytes, value %zu bytes)", k->mv_size,
                            v->mv_size);
        break;
    case DB_SIZES: rc = kv_sizes_entry_check(k, v, err); break;
    case DB_LINEAGE:
        if (k->mv_size != 8 || v->mv_size != 8)
            rc = kv_err_set(err, "not a lineage edge (key %zu bytes, value %zu bytes)", k->mv_size,
                            v->mv_size);
        break;
    case DB_META: {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(k->mv_size < 63 ? k->mv_size : 63),
                 (const char *)k->mv_data);
        if (strcmp(name, "counters") == 0) {
            kv_counters c;
            rc = kv_decode_counters(v->mv_data, v->mv_size, &c, err);
        } else if (strcmp(name, "state") == 0) {
            kv_run_state s;
            rc = kv_decode_state(v->mv_data, v->mv_size, &s, err);
        } else if (strncmp(name, "problem/", 8) == 0) {
            kv_problem_stats s;
            rc = kv_decode_problem(v->mv_data, v->mv_size, &s, err);
        } else if (strncmp(name, KV_ZDICT_KEY_PREFIX, strlen(KV_ZDICT_KEY_PREFIX)) == 0) {
            char *end;
            unsigned long id = strtoul(name + strlen(KV_ZDICT_KEY_PREFIX), &end, 16);
            if (*end || id == 0 || id > UINT32_MAX)
                rc = kv_err_set(err, "a dictionary key that names no id");
            else
                rc = kv_zdict_check(v->mv_data, v->mv_size, (uint32_t)id, err);
        } else if (strcmp(name, "schema") == 0 && v->mv_size != 4) {
            rc = kv_err_set(err, "a schema version of %zu bytes, not 4", v->mv_size);
        }
        break;
    }
    }
    return rc;
}

/* Walks database db; damaged records are told to fd. -1 when the walk
 * itself failed (LMDB said so; told to fd as a damaged record too). */
static int walk_db(kv_txn *t, int db, int full, int fd, uint64_t *records, uint64_t *bad,
                   page_walk *pw)
{
    const char *name = kv_db_names[db];
    say(fd, "D%s", name);
    MDB_cursor *c;
    int rc = mdb_cursor_open(t->txn, t->a->dbi[db], &c);
    if (rc != 0) {
        say(fd, "B%s\t(the database)\tmdb_cursor_open: %s", name, mdb_strerror(rc));
        (*bad)++;
        return -1;
    }
    MDB_val k, v, prev = {0, NULL};
    char key[256];
    /* keys rise strictly (lineage's repeat: its children are duplicates);
     * prev points into the map, which a read transaction keeps as it is */
    int dups = db == DB_LINEAGE;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        (*records)++;
        kv_err err = {{0}};
        int order = prev.mv_data ? mdb_cmp(t->txn, t->a->dbi[db], &prev, &k) : -1;
        if (order > 0 || (order == 0 && !dups))
            kv_err_set(&err, "out of order (after the key before it)");
        prev = k;
        if (err.msg[0] || check_leaf(pw, k.mv_data, &err) != 0 ||
            check_overflow(pw, &v, &err) != 0 || (full && check_record(t, db, &k, &v, &err) != 0)) {
            key_name(db, &k, key, sizeof key);
            say(fd, "B%s\t%s\t%s", name, key, err.msg);
            (*bad)++;
        }
    }
    mdb_cursor_close(c);
    if (rc != MDB_NOTFOUND) {
        say(fd, "B%s\t(after %llu records)\tmdb_cursor_get: %s", name, (unsigned long long)*records,
            mdb_strerror(rc));
        (*bad)++;
        return -1;
    }
    return 0;
}

typedef struct {
    int fd;
    uint64_t *bad;
} sizes_report;

static void sizes_bad(void *ctx, const char *key, const char *what)
{
    sizes_report *r = ctx;
    say(r->fd, "B%s\t%s\t%s", kv_db_names[DB_SIZES], key, what);
    (*r->bad)++;
}

/* The per-size ranking against the programs: every entry they call for is
 * there, and nothing else (an incomplete ranking, which the counters say an
 * older kevo left, is rebuilt by the next writer and not checked). */
static void check_sizes(kv_txn *t, int fd, uint64_t *bad)
{
    say(fd, "D%s (against the programs)", kv_db_names[DB_SIZES]);
    sizes_report r = {fd, bad};
    uint64_t checked = 0;
    int skipped = 0;
    kv_err err = {{0}};
    if (kv_sizes_check(t, sizes_bad, &r, &checked, &skipped, &err) != 0)
        sizes_bad(&r, "(the check)", err.msg);
}

void kv_archive_crash_default(void)
{
    int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
}

/* In the walk's child: every descriptor but keep closed. A writer walks its
 * archive before it reads it, holding the run's lock (a flock, which every
 * descriptor of its open file keeps): a walk that held it through an
 * inherited descriptor would keep the run locked after its writer died. */
static void close_others(int keep)
{
#ifdef SYS_close_range
    if ((keep <= 3 || syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u) == 0) &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) == 0)
        return;
#endif
    long most = sysconf(_SC_OPEN_MAX);
    for (int i = 3; i < (most > 0 && most < 65536 ? most : 65536); i++)
        if (i != keep)
            close(i);
}

static void child(const char *run_dir, const char *file, int full, int fd)
{
    close_others(fd);
    /* and it ends with its parent (a writer killed during its walk) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* LMDB's and the sanitizers' messages are the parent's to give, not ours */
    kv_archive_crash_default();
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0)
        dup2(null, STDERR_FILENO);
    alarm(WALK_LIMIT_S);

    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_archive_opts ro = {.readonly = 1};
    kv_err err = {{0}};
    if ((file ? kv_archive_open_file(file, &a, &err) : kv_archive_open(run_dir, &ro, &a, &err)) !=
            0 ||
        kv_read_begin(a, &t, &err) != 0) {
        say(fd, "O%s", err.msg);
        _exit(EXIT_NO_OPEN);
    }
    uint64_t records = 0, bad = 0;
    MDB_stat st;
    int rc = mdb_env_stat(a->env, &st);
    if (rc != 0) {
        say(fd, "O%s: mdb_env_stat: %s", a->path, mdb_strerror(rc));
        _exit(EXIT_NO_OPEN);
    }
    MDB_envinfo ei;
    if ((rc = mdb_env_info(a->env, &ei)) != 0) {
        say(fd, "O%s: mdb_env_info: %s", a->path, mdb_strerror(rc));
        _exit(EXIT_NO_OPEN);
    }
    page_walk pw = {.psize = st.ms_psize, .last_pgno = (uint64_t)ei.me_last_pgno};
    for (int db = 0; db < KV_DB_COUNT; db++)
        if (db != DB_SIZES || a->has_sizes)
            walk_db(t, db, full, fd, &records, &bad, &pw);
    if (full)
        check_sizes(t, fd, &bad);
    if (pw.base) {
        say(fd, "D(branch pages)");
        walk_branches(t, &pw, fd, &bad);
    }
    say(fd, "N%llu", (unsigned long long)records);
    /* closed, so that LMDB's reader table keeps no slot of ours (a slot of a
     * dead reader holds old pages from reuse until a writer clears it) */
    kv_txn_abort(t);
    kv_archive_close(a);
    /* _exit: no atexit handlers (the parent's, copied by fork) and no leak
     * check of a process that ends here */
    _exit(bad ? EXIT_BAD_RECORDS : EXIT_SOUND);
}

/* ---- the parent --------------------------------------------------------------------- */

typedef struct {
    char db[32];        /* the database being walked */
    char open_msg[512]; /* O: why the archive did not open */
    char first[512];    /* the first damaged record */
    int ended;          /* N seen */
    FILE *report;
    kv_walk_info *info;
} walk_state;

static void on_line(walk_state *w, char *line)
{
    switch (line[0]) {
    case 'D': snprintf(w->db, sizeof w->db, "%s", line + 1); break;
    case 'O': snprintf(w->open_msg, sizeof w->open_msg, "%s", line + 1); break;
    case 'N':
        w->info->records = strtoull(line + 1, NULL, 10);
        w->ended = 1;
        break;
    case 'B': {
        char *key = strchr(line + 1, '\t');
        char *what = key ? strchr(key + 1, '\t') : NULL;
        if (!what)
            break;
        *key++ = 0;
        *what++ = 0;
        w->info->damaged++;
        if (!w->first[0])
            snprintf(w->first, sizeof w->first, "%s %s: %s", line + 1, key, what);
        if (w->report)
            fprintf(w->report, "damaged: %s %s: %s\n", line + 1, key, what);
        break;
    }
    }
}

/* Reads the child's lines until it closes the pipe. */
static int read_lines(int fd, walk_state *w, kv_err *err)
{
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return kv_err_errno(err, errno, "reading the archive walk's report");
        if (r == 0)
            return 0;
        have += (size_t)r;
        buf[have] = 0;
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', have - (size_t)(start - buf))) != NULL) {
            *nl = 0;
            on_line(w, start);
            start = nl + 1;
        }
        have -= (size_t)(start - buf);
        memmove(buf, start, have);
        if (have == sizeof buf - 1) /* a line longer than any the child writes */
            have = 0;
    }
}

int kv_archive_walk(const char *run_dir, const char *file, int full, FILE *report,
                    kv_walk_info *info, kv_err *err)
{
    memset(info, 0, sizeof *info);
    const char *what = file ? file : run_dir;
    char path[PATH_MAX];
    if (file)
        snprintf(path, sizeof path, "%s", file);
    else if (kv_path_join(path, sizeof path, run_dir, KV_ARCHIVE_FILE, err) != 0)
        return -1;
    int p[2];
    if (pipe(p) != 0)
        return kv_err_errno(err, errno, "%s: pipe for the archive walk", what);
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return kv_err_errno(err, e, "%s: fork for the archive walk", what);
    }
    if (pid == 0) {
        close(p[0]);
        child(run_dir, file, full, p[1]);
    }
    close(p[1]);
    walk_state w = {.report = report, .info = info};
    int rc = read_lines(p[0], &w, err);
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) != pid)
        if (errno != EINTR)
            return kv_err_errno(err, errno, "%s: waitpid for the archive walk", what);
    if (rc != 0)
        return -1;

    char detail[700];
    if (WIFSIGNALED(status)) {
        snprintf(detail, sizeof detail, "%s: the walk crashed (signal %d)",
                 w.db[0] ? w.db : "opening", WTERMSIG(status));
    } else if (WEXITSTATUS(status) == EXIT_NO_OPEN && w.open_msg[0]) {
        return kv_err_set(err, "%s", w.open_msg); /* the open's own message */
    } else if (WEXITSTATUS(status) == EXIT_BAD_RECORDS && w.ended) {
        snprintf(detail, sizeof detail, "%llu damaged record%s, the first: %s",
                 (unsigned long long)info->damaged, info->damaged == 1 ? "" : "s", w.first);
    } else if (WEXITSTATUS(status) == EXIT_SOUND && w.ended) {
        return 0;
    } else {
        snprintf(detail, sizeof detail, "%s: the walk stopped (exit status %d)",
                 w.db[0] ? w.db : "opening", WEXITSTATUS(status));
    }
    return kv_damaged(err, path, file ? NULL : run_dir, detail);
}
