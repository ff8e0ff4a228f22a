/* archive_lineage.c — kevo archive lineage: the ancestors and descendants of
 * a program, as indented trees. */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "archive_cmd.h"
#include "cli.h"

const char kv_view_lineage_usage[] =
    "usage: kevo archive lineage ID [--run DIR] [--depth N]\n"
    "\n"
    "The ancestors of program ID (its parents, recursively) and its descendants\n"
    "(children, recursively), N levels each way (default 10), as indented trees:\n"
    "id, operator, verdict, speedup, cell. A program reached twice is shown once.\n";

/* ---- lineage ----------------------------------------------------------------------- */

/* A set of program ids (open addressing; 0 is the empty slot). */
typedef struct {
    uint64_t *slot;
    size_t cap, n;
} id_set;

static size_t id_hash(uint64_t id, size_t cap)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* 1 when added, 0 when already there, -1 when out of memory. */
static int id_set_add(id_set *s, uint64_t id)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t j = id_hash(s->slot[i], cap);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t j = id_hash(id, s->cap);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (s->slot[j] == id)
            return 0;
    s->slot[j] = id;
    s->n++;
    return 1;
}

typedef struct {
    kv_txn *t;
    id_set seen;
    int max_depth;
    size_t shown;
} lineage_walk;

static void print_node(int level, const char *text, const char *note)
{
    char shown[2048];
    printf("%*s%s%s\n", 2 * level, "", KV_TERM(shown, text), note);
}

/* Prints program id at level; 1 when it should be expanded further. */
static int lineage_node(lineage_walk *w, uint64_t id, int level, kv_program *p, kv_err *err)
{
    char text[512];
    int rc = kv_get_program(w->t, id, p, err);
    if (rc < 0)
        return -1;
    if (rc == KV_NOTFOUND) {
        snprintf(text, sizeof text, "#%" PRIu64, id);
        print_node(level, text, "  (not in the archive)");
        return 0;
    }
    kv_program_summary(p, text, sizeof text);
    int added = id_set_add(&w->seen, id);
    if (added < 0) {
        kv_program_clear(p);
        return kv_err_set(err, "out of memory");
    }
    print_node(level, text, added ? "" : "  (shown above)");
    w->shown++;
    if (!added)
        kv_program_clear(p);
    return added;
}

static int walk_ancestors(lineage_walk *w, const kv_program *child, int level, kv_err *err)
{
    if (level > w->max_depth)
        return 0;
    for (uint32_t i = 0; i < child->n_parents && i < KV_MAX_PARENTS; i++) {
        kv_program p;
        int rc = lineage_node(w, child->parents[i], level, &p, err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        rc = walk_ancestors(w, &p, level + 1, err);
        kv_program_clear(&p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

typedef struct {
    uint64_t *v;
    size_t n, cap;
} id_list;

static int collect_id(uint64_t id, void *ctx, kv_err *err)
{
    id_list *l = ctx;
    uint64_t *v = kv_report_grow(l->v, &l->cap, l->n, sizeof *v, 16);
    if (!v)
        return kv_err_set(err, "out of memory");
    l->v = v;
    l->v[l->n++] = id;
    return 0;
}

static int walk_descendants(lineage_walk *w, uint64_t parent, int level, kv_err *err)
{
    if (level > w->max_depth)
        return 0;
    id_list kids = {0};
    if (kv_each_child(w->t, parent, collect_id, &kids, err) != 0) {
        free(kids.v);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < kids.n; i++) {
        kv_program p;
        int r = lineage_node(w, kids.v[i], level, &p, err);
        if (r < 0)
            rc = -1;
        if (r <= 0)
            continue;
        kv_program_clear(&p);
        rc = walk_descendants(w, kids.v[i], level + 1, err);
    }
    free(kids.v);
    return rc;
}

static int lineage_print(kv_txn *t, const char *path, uint64_t id, int depth, kv_err *err)
{
    kv_program root;
    int rc = kv_get_program(t, id, &root, err);
    if (rc == KV_NOTFOUND)
        return kv_err_set(err, "program #%" PRIu64 " not found in %s", id, path);
    if (rc != 0)
        return -1;
    char text[512];
    kv_program_summary(&root, text, sizeof text);
    char shown[2048], problem[4 * KV_NAME_MAX];
    printf("%s  (problem %s, island %d)\n", KV_TERM(shown, text), KV_TERM(problem, root.problem),
           (int)root.island);
    lineage_walk w = {.t = t, .max_depth = depth};
    rc = id_set_add(&w.seen, id) < 0 ? kv_err_set(err, "out of memory") : 0;
    if (rc == 0) {
        printf("\nancestors (up to %d generation%s):\n", depth, depth == 1 ? "" : "s");
        rc = walk_ancestors(&w, &root, 1, err);
        if (rc == 0 && w.shown == 0)
            print_node(1, "(none)", "");
    }
    if (rc == 0) {
        free(w.seen.slot);
        w.seen = (id_set){0};
        w.shown = 0;
        rc = id_set_add(&w.seen, id) < 0 ? kv_err_set(err, "out of memory") : 0;
    }
    if (rc == 0) {
        printf("\ndescendants (up to %d generation%s):\n", depth, depth == 1 ? "" : "s");
        rc = walk_descendants(&w, id, 1, err);
        if (rc == 0 && w.shown == 0)
            print_node(1, "(none)", "");
    }
    free(w.seen.slot);
    kv_program_clear(&root);
    return rc;
}

/* The program id ("142" or "#142") is checked before the archive is opened. */
int kv_view_lineage_check(const view *v, view_opts *o)
{
    const char *s = o->pos[0];
    long long n;
    if (s[0] == '#')
        s++;
    if (kv_cli_parse_int(s, 1, LLONG_MAX, &n) != 0)
        return kv_view_usage(v, "'%s' is not a program id", o->pos[0]);
    o->id = (uint64_t)n;
    return 0;
}

int kv_view_lineage(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    return lineage_print(s->t, kv_archive_path(s->a), o->id, o->depth, err);
}
