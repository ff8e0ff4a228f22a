/* test_strbuf.c — the text buffer (common/strbuf.h): appends and growth, the
 * limit (a cut like snprintf into a fixed array, at any point of any
 * append), take, copy, free, the out-of-memory path; and the group's
 * messages in fixed arrays built with it (group_log.c), cut and out of
 * memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/group/group_internal.h"
#include "common/strbuf.h"
#include "test.h"

#define STR_EQ(got, want)                                                                         \
    KV_CHECKF(strcmp(kv_test_str(got), (want)) == 0, "got \"%s\", want \"%s\"", kv_test_str(got), \
              (want))

/* Makes an append to b (without a limit) fail as an allocation would:
 * len + n overflows, so nothing is read from s. */
static void force_oom(kv_strbuf *b)
{
    KV_CHECK(b->limit == 0);
    kv_sb_put(b, "x", SIZE_MAX);
}

/* A limited buffer cuts n first, so it cannot overflow: leave it as a
 * failed allocation does. */
static void fake_oom(kv_strbuf *b)
{
    b->oom = 1;
}

static void test_appends(void)
{
    kv_strbuf b = {0};
    KV_CHECK(b.p == NULL && b.len == 0);
    kv_sb_puts(&b, "ab");
    kv_sb_put(&b, "cdef", 2);
    kv_sb_printf(&b, "-%d-%s", 42, "x");
    STR_EQ(b.p, "abcd-42-x");
    KV_CHECK(b.len == 9 && !b.oom);
    /* NUL bytes stay, counted in len */
    kv_sb_put(&b, "\0z", 2);
    KV_CHECK(b.len == 11 && b.p[9] == '\0' && b.p[10] == 'z' && b.p[11] == '\0');
    kv_sb_free(&b);
    KV_CHECK(b.p == NULL && b.len == 0 && b.cap == 0);
    kv_sb_free(&b); /* twice is fine */

    /* growth past the first allocation, over several doublings */
    char line[101];
    memset(line, 'q', 100);
    line[100] = '\0';
    for (int i = 0; i < 1000; i++)
        kv_sb_printf(&b, "%04d%s", i, line);
    KV_REQUIRE(!b.oom && b.len == 1000 * 104);
    KV_CHECK(strncmp(b.p + 999 * 104, "0999qq", 6) == 0 && b.p[b.len] == '\0');
    KV_CHECK(strlen(b.p) == b.len);
    kv_sb_free(&b);
}

static void test_take(void)
{
    kv_strbuf b = {0};
    char *s = kv_sb_take(&b);
    STR_EQ(s, ""); /* "" when empty, and the caller's to free */
    free(s);
    kv_sb_puts(&b, "hello");
    s = kv_sb_take(&b);
    STR_EQ(s, "hello");
    KV_CHECK(b.p == NULL && b.len == 0 && b.cap == 0);
    free(s);
    /* b is usable again */
    kv_sb_puts(&b, "again");
    s = kv_sb_take(&b);
    STR_EQ(s, "again");
    free(s);
}

static void test_copy(void)
{
    kv_strbuf b = {0};
    char out[8];
    memset(out, '#', sizeof out);
    KV_CHECK(kv_sb_copy(&b, out, sizeof out) == 0);
    STR_EQ(out, "");
    kv_sb_puts(&b, "abcdefghij");
    KV_CHECK(kv_sb_copy(&b, out, sizeof out) == 0);
    STR_EQ(out, "abcdefg"); /* cut to cap - 1 */
    KV_CHECK(kv_sb_copy(&b, out, 1) == 0);
    STR_EQ(out, "");
    KV_CHECK(kv_sb_copy(&b, out, 4) == 0);
    STR_EQ(out, "abc");
    STR_EQ(b.p, "abcdefghij"); /* b stays */
    kv_sb_free(&b);
}

/* Appends step k of a fixed script, to b and to the reference full. */
static void script_step(kv_strbuf *b, kv_strbuf *full, int k)
{
    switch (k % 4) {
    case 0:
        kv_sb_puts(b, "word ");
        kv_sb_puts(full, "word ");
        break;
    case 1:
        kv_sb_printf(b, "%d, ", 1234567 * k);
        kv_sb_printf(full, "%d, ", 1234567 * k);
        break;
    case 2:
        kv_sb_put(b, "xyz", 3);
        kv_sb_put(full, "xyz", 3);
        break;
    default:
        kv_sb_printf(b, "\n%s:%c", "line", 'a' + k % 26);
        kv_sb_printf(full, "\n%s:%c", "line", 'a' + k % 26);
    }
}

/* With a limit, the text is the first limit bytes of everything appended,
 * wherever the cut falls: what snprintf would write into char[limit + 1]. */
static void test_limit(void)
{
    for (size_t limit = 1; limit <= 300; limit++) {
        kv_strbuf b = {.limit = limit}, full = {0};
        for (int k = 0; k < 80; k++)
            script_step(&b, &full, k);
        KV_REQUIRE(!b.oom && !full.oom && full.len > 300);
        char want[301];
        snprintf(want, limit + 1, "%s", full.p);
        KV_CHECKF(b.len == limit && strcmp(b.p, want) == 0, "limit %zu: got \"%s\"", limit, b.p);
        KV_CHECK(b.cap <= limit + 1); /* never more memory than the limit can use */
        /* later appends add nothing and are no error */
        kv_sb_printf(&b, "%s", "more");
        kv_sb_put(&b, "more", 4);
        KV_CHECK(b.len == limit && !b.oom && strcmp(b.p, want) == 0);
        kv_sb_free(&b);
        KV_CHECK(b.limit == limit); /* the limit outlives free */
        kv_sb_free(&full);
    }
    /* a limit past the first allocation */
    kv_strbuf b = {.limit = 5000};
    for (int i = 0; i < 1000; i++)
        kv_sb_puts(&b, "0123456789");
    KV_CHECK(b.len == 5000 && b.cap == 5001 && strlen(b.p) == 5000);
    KV_CHECK(strncmp(b.p + 4990, "0123456789", 10) == 0);
    char *s = kv_sb_take(&b);
    KV_CHECK(s && strlen(s) == 5000);
    free(s);
    KV_CHECK(b.limit == 5000);
}

static void test_oom(void)
{
    kv_strbuf b = {0};
    kv_sb_puts(&b, "kept");
    force_oom(&b);
    KV_CHECK(b.oom);
    STR_EQ(b.p, "kept"); /* the text from before the failure stays */
    kv_sb_puts(&b, " lost");
    kv_sb_printf(&b, "%d", 7);
    kv_sb_put(&b, "z", 1);
    KV_CHECK(b.len == 4 && strcmp(b.p, "kept") == 0);
    char out[16] = "untouched";
    KV_CHECK(kv_sb_copy(&b, out, sizeof out) == -1);
    STR_EQ(out, "untouched");
    KV_CHECK(kv_sb_take(&b) == NULL); /* and b is empty again */
    KV_CHECK(b.p == NULL && b.len == 0 && !b.oom);
    kv_sb_puts(&b, "fresh");
    char *s = kv_sb_take(&b);
    STR_EQ(s, "fresh");
    free(s);

    /* an empty buffer out of memory: take still says so */
    force_oom(&b);
    KV_CHECK(b.oom && b.p == NULL);
    KV_CHECK(kv_sb_take(&b) == NULL);

    /* free clears the flag too */
    kv_sb_puts(&b, "a");
    force_oom(&b);
    kv_sb_free(&b);
    KV_CHECK(!b.oom && b.p == NULL);
    kv_sb_puts(&b, "b");
    STR_EQ(b.p, "b");
    kv_sb_free(&b);
}

/* The supervisor's messages (group.c) are extended in fixed arrays through
 * kv_grp_msg_open/close: cut at the array's end as snprintf would. */
static void test_group_messages(void)
{
    char msg[32];
    snprintf(msg, sizeof msg, "rank %d failed", 1);
    kv_strbuf b;
    kv_grp_msg_open(&b, msg, sizeof msg);
    kv_sb_printf(&b, "\nrank %d: no result (phase %s)", 0, "timing");
    kv_sb_printf(&b, "; it %s", "exited");
    kv_grp_msg_close(&b, msg, sizeof msg);
    STR_EQ(msg, "rank 1 failed\nrank 0: no result"); /* 31 bytes: cut */
    KV_CHECK(b.p == NULL);                           /* closed: freed */

    /* what fits is kept whole */
    char big[128] = "summary";
    kv_grp_msg_open(&b, big, sizeof big);
    kv_sb_printf(&b, "\nrank %d said: %s", 2, "bad");
    kv_grp_msg_close(&b, big, sizeof big);
    STR_EQ(big, "summary\nrank 2 said: bad");

    /* out of memory: the message keeps its text and says the rest is missing */
    char m[64] = "summary";
    kv_grp_msg_open(&b, m, sizeof m);
    kv_sb_puts(&b, "\nsomething");
    fake_oom(&b);
    kv_grp_msg_close(&b, m, sizeof m);
    STR_EQ(m, "summary (the rest of this message left out: out of memory)");
    char small[16] = "summary";
    kv_grp_msg_open(&b, small, sizeof small);
    fake_oom(&b);
    kv_grp_msg_close(&b, small, sizeof small);
    STR_EQ(small, "summary (the re");
}

int main(void)
{
    KV_RUN(test_appends);
    KV_RUN(test_take);
    KV_RUN(test_copy);
    KV_RUN(test_limit);
    KV_RUN(test_oom);
    KV_RUN(test_group_messages);
    return kv_test_summary();
}
