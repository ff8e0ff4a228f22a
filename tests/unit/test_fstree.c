/* test_fstree.c — common/fstree.c: trees removed and copied through
 * directory descriptors.
 *  - rm_rf_race: a helper thread swaps a subfolder of the tree for a symbolic
 *    link to an outside folder full of files (renameat2 RENAME_EXCHANGE),
 *    over and over, while kv_rm_rf removes the tree (at most 20,000 rounds or
 *    3 s): nothing outside goes (the walk by path lost files within 0.3 s);
 *  - rm_contents_race: the same against kv_rm_contents, whose folder stays;
 *  - rm_rf_link: a link given to kv_rm_rf, or found in the tree, is removed
 *    itself, its target untouched; kv_rm_contents refuses a link;
 *  - copy_tree: folders and files copied, owned by the caller; a symbolic
 *    link, a FIFO or a second hard link in the source refused, naming it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

#define OUTSIDE_FILES 64
#define ROUNDS 20000
#define MAX_SECONDS 3.0

static char base[4096];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void write_small(const char *path)
{
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(path, "x\n", 2, &err) == 0);
}

/* An outside folder of OUTSIDE_FILES files, named out. */
static void make_outside(const char *out)
{
    KV_REQUIRE(mkdir(out, 0755) == 0);
    for (int i = 0; i < OUTSIDE_FILES; i++) {
        char f[4200];
        snprintf(f, sizeof f, "%s/keep-%d", out, i);
        write_small(f);
    }
}

static int outside_left(const char *out)
{
    int n = 0;
    for (int i = 0; i < OUTSIDE_FILES; i++) {
        char f[4200];
        struct stat st;
        int len = snprintf(f, sizeof f, "%s/keep-%d", out, i);
        n += len >= 0 && (size_t)len < sizeof f && stat(f, &st) == 0;
    }
    return n;
}

typedef struct {
    const char *sub;     /* the tree's subfolder that is swapped */
    const char *stage;   /* outside the tree: the link while sub is a folder, and back */
    const char *outside; /* what the link points at */
    atomic_int stop;
} swapper;

/* Exchanges sub with stage (a folder for a link to outside, and back),
 * atomically, as fast as it can until told to stop; remakes whichever of
 * the two the removal took. */
static void *swap_loop(void *arg)
{
    swapper *s = arg;
    while (!atomic_load(&s->stop)) {
        if (renameat2(AT_FDCWD, s->sub, AT_FDCWD, s->stage, RENAME_EXCHANGE) == 0)
            continue;
        struct stat st;
        (void)mkdir(s->sub, 0755);
        if (lstat(s->stage, &st) == 0 && !S_ISLNK(st.st_mode))
            (void)rmdir(s->stage); /* the link was removed while in the tree */
        /* a failure leaves the tree as it is for this round: the race
         * goes on either way */
        if (symlink(s->outside, s->stage) != 0)
            continue;
    }
    return NULL;
}

/* rounds of remove(tree) while a helper swaps tree/sub; how many outside
 * files are left. contents: kv_rm_contents, else kv_rm_rf. */
static int race(const char *tag, int contents)
{
    char tree[4200], sub[4300], stage[4200], outside[4200];
    snprintf(tree, sizeof tree, "%s/%s-tree", base, tag);
    snprintf(sub, sizeof sub, "%s/sub", tree);
    snprintf(stage, sizeof stage, "%s/%s-stage", base, tag);
    snprintf(outside, sizeof outside, "%s/%s-outside", base, tag);
    make_outside(outside);
    swapper s = {sub, stage, outside, 0};
    pthread_t t;
    if (mkdir(tree, 0755) != 0 || pthread_create(&t, NULL, swap_loop, &s) != 0)
        return -1;
    double until = now_s() + MAX_SECONDS;
    for (int round = 0; round < ROUNDS && now_s() < until; round++) {
        (void)mkdir(tree, 0755);
        for (int i = 0; i < 4; i++) { /* files for the removal to walk over */
            char f[4400];
            snprintf(f, sizeof f, "%s/f%d", tree, i);
            FILE *fp = fopen(f, "w");
            if (fp)
                fclose(fp);
        }
        (void)(contents ? kv_rm_contents(tree) : kv_rm_rf(tree));
        if (round % 64 == 0 && outside_left(outside) != OUTSIDE_FILES)
            break; /* the race was lost: no need to go on */
    }
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    return outside_left(outside);
}

static void test_rm_rf_race(void)
{
    KV_CHECK(race("rf", 0) == OUTSIDE_FILES);
}

static void test_rm_contents_race(void)
{
    KV_CHECK(race("contents", 1) == OUTSIDE_FILES);
}

static void test_rm_rf_link(void)
{
    char outside[4200], tree[4200], link[4300], sub[4300];
    snprintf(outside, sizeof outside, "%s/link-outside", base);
    snprintf(tree, sizeof tree, "%s/link-tree", base);
    snprintf(link, sizeof link, "%s/link", base);
    snprintf(sub, sizeof sub, "%s/sub", tree);
    make_outside(outside);
    KV_REQUIRE(mkdir(tree, 0755) == 0 && symlink(outside, sub) == 0 && symlink(outside, link) == 0);
    KV_CHECK(kv_rm_rf(link) == 0);
    KV_CHECK(access(link, F_OK) != 0);
    errno = 0;
    KV_CHECK(kv_rm_contents(sub) == -1 && (errno == ELOOP || errno == ENOTDIR));
    KV_CHECK(kv_rm_rf(tree) == 0);
    KV_CHECK(access(tree, F_OK) != 0);
    KV_CHECK(outside_left(outside) == OUTSIDE_FILES);
    KV_CHECK(kv_rm_rf(tree) == 0); /* absent is fine */
}

static void test_copy_tree(void)
{
    char src[4200], dst[4200], p[4400], q[4400];
    snprintf(src, sizeof src, "%s/copy-src", base);
    snprintf(dst, sizeof dst, "%s/copy-dst", base);
    kv_err err = {{0}};
    snprintf(p, sizeof p, "%s/a/b", src);
    KV_REQUIRE(kv_mkdir_p(p, 0755, &err) == 0 && mkdir(dst, 0700) == 0);
    snprintf(p, sizeof p, "%s/a/b/t.bin", src);
    KV_REQUIRE(kv_write_file_atomic(p, "tensor", 6, &err) == 0);
    snprintf(p, sizeof p, "%s/top", src);
    write_small(p);
    KV_CHECKF(kv_copy_tree(src, dst, &err) == 0, "%s", err.msg);
    char *data = NULL;
    size_t len = 0;
    snprintf(q, sizeof q, "%s/a/b/t.bin", dst);
    KV_CHECKF(kv_read_file(q, &data, &len, &err) == 0 && len == 6 && memcmp(data, "tensor", 6) == 0,
              "%s", err.msg);
    free(data);
    struct stat st;
    KV_CHECK(lstat(q, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid());
    KV_CHECK(stat(dst, &st) == 0 && (st.st_mode & 07777) == 0700); /* dst itself untouched */

    /* what a hostile writer of the source could leave there */
    const char *what[] = {"a symbolic link", "a FIFO", "links"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/a/odd", src);
        (void)unlink(p);
        int made = i == 0 ? symlink("/etc/hostname", p) : i == 1 ? mkfifo(p, 0644) : link(q, p);
        KV_REQUIRE(made == 0);
        err.msg[0] = '\0';
        KV_CHECK(kv_copy_tree(src, dst, &err) == -1);
        KV_CHECK_STR_CONTAINS(err.msg, "/a/odd");
        KV_CHECK_STR_CONTAINS(err.msg, what[i]);
        snprintf(p, sizeof p, "%s/a/odd", dst);
        KV_CHECK(lstat(p, &st) != 0);
    }
    /* a link where the copy goes is not written through */
    snprintf(p, sizeof p, "%s/a/odd", src);
    KV_REQUIRE(unlink(p) == 0);
    char target[4400];
    snprintf(target, sizeof target, "%s/link-target", base);
    write_small(target);
    snprintf(p, sizeof p, "%s/top", dst);
    KV_REQUIRE(unlink(p) == 0 && symlink(target, p) == 0);
    KV_CHECK(kv_copy_tree(src, dst, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "top");
    data = NULL;
    KV_CHECK(kv_read_file(target, &data, &len, &err) == 0 && len == 2);
    free(data);
}

int main(void)
{
    kv_test_fresh_dir(base, sizeof base, "fstree");
    KV_RUN(test_rm_rf_race);
    KV_RUN(test_rm_contents_race);
    KV_RUN(test_rm_rf_link);
    KV_RUN(test_copy_tree);
    return kv_test_summary();
}
