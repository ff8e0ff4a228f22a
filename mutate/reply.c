/* reply.c — strict parsing of an LLM's reply (reply.h). */
#include "mutate/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/strbuf.h"
#include "mutate/pattern.h"
#include "mutate/schedule.h"
#include "mutate/schedule_prompt.h"

#define MARK_SEARCH "<<<<<<< SEARCH"
#define MARK_SPLIT "======="
#define MARK_REPLACE ">>>>>>> REPLACE"

typedef struct {
    const char *s; /* the line's start (in the normalised reply) */
    size_t len;    /* without its newline */
} line;

static int refuse(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return 1;
}

/* The line, trailing blanks removed, equals mark. */
static int is_mark(const line *l, const char *mark)
{
    size_t n = l->len;
    /* l->len counts bytes of the reply's text (kv_reply_use cuts it into lines) */
    // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult)
    while (n > 0 && (l->s[n - 1] == ' ' || l->s[n - 1] == '\t'))
        n--;
    return n == strlen(mark) && memcmp(l->s, mark, n) == 0;
}

/* A fence line: ``` after optional blanks; *tag gets what follows. */
static int is_fence(const line *l, const char **tag, size_t *tag_len)
{
    size_t i = 0;
    while (i < l->len && (l->s[i] == ' ' || l->s[i] == '\t'))
        i++;
    if (l->len - i < 3 || memcmp(l->s + i, "```", 3) != 0)
        return 0;
    i += 3;
    size_t e = l->len;
    while (e > i && (l->s[e - 1] == ' ' || l->s[e - 1] == '\t'))
        e--;
    *tag = l->s + i;
    *tag_len = e - i;
    return 1;
}

static int is_code_tag(const char *t, size_t n)
{
    static const char *const tags[] = {"", "cuda", "cu", "cuh", "cpp", "c++", "c", "cc"};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (n == strlen(tags[i]) && strncasecmp(t, tags[i], n) == 0) /* ```CUDA too */
            return 1;
    return 0;
}

/* Occurrences of needle in hay (non-overlapping), the first at *at. */
static int count(const char *hay, size_t hn, const char *needle, size_t nn, size_t *at)
{
    int c = 0;
    for (size_t i = 0; nn && i + nn <= hn;) {
        if (memcmp(hay + i, needle, nn) == 0) {
            if (c++ == 0)
                *at = i;
            i += nn;
        } else {
            i++;
        }
    }
    return c;
}

static void first_line(const char *s, char *out, size_t cap)
{
    size_t n = strcspn(s, "\n");
    snprintf(out, cap, "%.*s", (int)(n < 60 ? n : 60), s);
}

/* Applies the edit blocks of lines[0, n) to parent. */
static int apply_edits(const line *lines, int n, const char *parent, size_t parent_len, char **out,
                       size_t *out_len, char *why, size_t cap)
{
    kv_strbuf cur = {0};
    kv_sb_put(&cur, parent, parent_len);
    int edits = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!is_mark(&lines[i], MARK_SEARCH))
            continue;
        int start = i, split = -1, end = -1;
        for (int j = i + 1; j < n && end < 0; j++) {
            if (is_mark(&lines[j], MARK_SEARCH)) {
                rc = refuse(why, cap,
                            "edit %d (reply line %d): a new SEARCH begins at line %d "
                            "before this one ends",
                            edits + 1, start + 1, j + 1);
                break;
            }
            if (split < 0 && is_mark(&lines[j], MARK_SPLIT))
                split = j;
            else if (split >= 0 && is_mark(&lines[j], MARK_REPLACE))
                end = j;
        }
        if (rc)
            break;
        if (end < 0) {
            rc = refuse(why, cap, "edit %d (reply line %d) is not closed by %s", edits + 1,
                        start + 1, split < 0 ? MARK_SPLIT " and " MARK_REPLACE : MARK_REPLACE);
            break;
        }
        edits++;
        kv_strbuf search = {0}, repl = {0};
        for (int j = start + 1; j < split; j++) {
            kv_sb_put(&search, lines[j].s, lines[j].len);
            kv_sb_put(&search, "\n", 1);
        }
        for (int j = split + 1; j < end; j++) {
            kv_sb_put(&repl, lines[j].s, lines[j].len);
            kv_sb_put(&repl, "\n", 1);
        }
        size_t at = 0;
        int c = 0;
        if (search.oom || repl.oom || cur.oom) {
            rc = -1;
        } else if (search.len == 0) {
            rc = refuse(why, cap, "edit %d (reply line %d) has an empty SEARCH text", edits,
                        start + 1);
        } else {
            c = count(cur.p, cur.len, search.p, search.len, &at);
            if (c == 0 && cur.len && cur.p[cur.len - 1] != '\n') /* the file's last line, unended */
                c = count(cur.p, cur.len, search.p, search.len - 1, &at) == 1 &&
                            at + search.len - 1 == cur.len
                        ? 1
                        : 0;
            char first[64];
            first_line(search.p, first, sizeof first);
            if (c == 0)
                rc = refuse(why, cap,
                            "edit %d (reply line %d): its SEARCH text does not occur "
                            "in the source (it begins \"%s\")",
                            edits, start + 1, first);
            else if (c > 1)
                rc = refuse(why, cap,
                            "edit %d (reply line %d): its SEARCH text occurs %d times "
                            "in the source (it begins \"%s\"); it must occur once",
                            edits, start + 1, c, first);
        }
        if (rc == 0) {
            size_t cut = at + search.len <= cur.len ? search.len : cur.len - at;
            kv_strbuf next = {0};
            kv_sb_put(&next, cur.p, at);
            kv_sb_put(&next, repl.p ? repl.p : "", repl.len);
            kv_sb_put(&next, cur.p + at + cut, cur.len - at - cut);
            free(cur.p);
            cur = next;
            if (cur.oom)
                rc = -1;
        }
        free(search.p);
        free(repl.p);
        i = end;
    }
    if (rc == 0 && edits == 0)
        rc = refuse(why, cap, "no edit block");
    if (rc == 0 && cur.len == 0)
        rc = refuse(why, cap, "the edits leave an empty file");
    if (rc != 0) {
        free(cur.p);
        return rc;
    }
    *out = cur.p;
    *out_len = cur.len;
    return 0;
}

static int is_schedule_tag(const char *t, size_t n)
{
    return n == strlen(KV_SCHED_REPLY_TAG) && strncasecmp(t, KV_SCHED_REPLY_TAG, n) == 0;
}

/* The collective the parent is written for: its schedule's, else its
 * kevo:pattern problem's; -1 when neither says. */
static int parent_coll(const char *parent, size_t parent_len)
{
    kv_schedule s;
    if (kv_sched_from_source(parent, parent_len, &s, NULL) == 1)
        return (int)s.coll;
    kv_pattern_meta m;
    if (kv_pattern_parse(parent, parent_len, "parent", &m, NULL) == 0)
        return kv_sched_coll_parse(m.problem);
    return -1;
}

/* The schedule block lines(first, last) (blank lines dropped) parsed and
 * generated into *out. */
static int schedule_answer(const line *lines, int first, int last, const char *parent,
                           size_t parent_len, char **out, size_t *out_len, char *why, size_t cap)
{
    kv_strbuf t = {0};
    for (int j = first + 1; j < last; j++) {
        size_t k = 0;
        while (k < lines[j].len && (lines[j].s[k] == ' ' || lines[j].s[k] == '\t'))
            k++;
        if (k == lines[j].len)
            continue;
        if (t.len)
            kv_sb_put(&t, "\n", 1);
        kv_sb_put(&t, lines[j].s, lines[j].len);
    }
    if (t.oom) {
        free(t.p);
        return -1;
    }
    if (t.len == 0) {
        free(t.p);
        return refuse(why, cap, "the schedule block is empty");
    }
    kv_schedule s;
    kv_err e = {{0}};
    int rc = kv_sched_parse(t.p, &s, &e);
    free(t.p);
    if (rc != 0)
        return refuse(why, cap, "the schedule does not parse: %s", e.msg);
    int want = parent_coll(parent, parent_len);
    if (want >= 0 && (int)s.coll != want)
        return refuse(why, cap, "the schedule is for %s, the problem is %s",
                      kv_sched_coll_name(s.coll), kv_sched_coll_name((kv_sched_coll)want));
    if (kv_sched_generate(&s, out, out_len, &e) != 0) {
        *out = NULL;
        *out_len = 0;
        if (strstr(e.msg, "out of memory"))
            return -1;
        return refuse(why, cap, "the schedule cannot be generated: %s", e.msg);
    }
    return 0;
}

/* The one fenced code block of lines[0, n), or its one schedule block
 * (*is_sched set). */
static int whole_file(const line *lines, int n, const char *parent, size_t parent_len, char **out,
                      size_t *out_len, int *is_sched, char *why, size_t cap)
{
    int blocks = 0, first = -1, last = -1, scheds = 0, s_first = -1, s_last = -1;
    for (int i = 0; i < n; i++) {
        const char *tag;
        size_t tl;
        if (!is_fence(&lines[i], &tag, &tl))
            continue;
        int close = -1;
        for (int j = i + 1; j < n && close < 0; j++) {
            const char *t2;
            size_t l2;
            if (is_fence(&lines[j], &t2, &l2) && l2 == 0)
                close = j;
        }
        if (close < 0)
            return refuse(why, cap, "the code block opened at reply line %d is not closed", i + 1);
        if (is_code_tag(tag, tl)) {
            if (blocks++ == 0) {
                first = i;
                last = close;
            }
        } else if (is_schedule_tag(tag, tl)) {
            if (scheds++ == 0) {
                s_first = i;
                s_last = close;
            }
        }
        i = close;
    }
    if (scheds > 0 && blocks > 0)
        return refuse(why, cap,
                      "a schedule block and %d code block%s; expected one schedule, "
                      "one whole file, or SEARCH/REPLACE edits",
                      blocks, blocks == 1 ? "" : "s");
    if (scheds > 1)
        return refuse(why, cap, "%d schedule blocks; expected one", scheds);
    if (scheds == 1) {
        *is_sched = 1;
        return schedule_answer(lines, s_first, s_last, parent, parent_len, out, out_len, why, cap);
    }
    if (blocks == 0)
        return refuse(why, cap, "no code block and no SEARCH/REPLACE edit in the reply");
    if (blocks > 1)
        return refuse(why, cap,
                      "%d code blocks; expected one holding the whole file, or "
                      "SEARCH/REPLACE edits",
                      blocks);
    kv_strbuf b = {0};
    for (int j = first + 1; j < last; j++) {
        kv_sb_put(&b, lines[j].s, lines[j].len);
        kv_sb_put(&b, "\n", 1);
    }
    if (b.oom) {
        free(b.p);
        return -1;
    }
    size_t k = 0;
    while (k < b.len && (b.p[k] == ' ' || b.p[k] == '\n' || b.p[k] == '\t'))
        k++;
    if (k == b.len) {
        free(b.p);
        return refuse(why, cap, "the code block is empty");
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}

int kv_reply_apply(const char *parent, size_t parent_len, const char *reply, char **out,
                   size_t *out_len, char *why, size_t why_cap)
{
    return kv_reply_use(parent, parent_len, reply, out, out_len, NULL, why, why_cap);
}

int kv_reply_use(const char *parent, size_t parent_len, const char *reply, char **out,
                 size_t *out_len, kv_reply_kind *kind, char *why, size_t why_cap)
{
    if (kind)
        *kind = KV_REPLY_CODE;
    *out = NULL;
    *out_len = 0;
    why[0] = 0;
    /* normalise CRLF, then cut into lines */
    size_t rn = strlen(reply);
    char *text = malloc(rn + 1);
    if (!text)
        return -1;
    size_t tn = 0;
    for (size_t i = 0; i < rn; i++)
        if (!(reply[i] == '\r' && i + 1 < rn && reply[i + 1] == '\n'))
            text[tn++] = reply[i];
    text[tn] = 0;
    int n = 1;
    for (size_t i = 0; i < tn; i++)
        n += text[i] == '\n';
    line *lines = malloc(sizeof *lines * (size_t)n);
    if (!lines) {
        free(text);
        return -1;
    }
    n = 0;
    for (char *p = text; *p || p == text;) {
        char *e = strchr(p, '\n');
        lines[n].s = p;
        lines[n].len = e ? (size_t)(e - p) : strlen(p);
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    int edits = 0;
    for (int i = 0; i < n && !edits; i++)
        edits = is_mark(&lines[i], MARK_SEARCH);
    int is_sched = 0;
    int rc = edits ? apply_edits(lines, n, parent ? parent : "", parent ? parent_len : 0, out,
                                 out_len, why, why_cap)
                   : whole_file(lines, n, parent ? parent : "", parent ? parent_len : 0, out,
                                out_len, &is_sched, why, why_cap);
    if (kind)
        *kind = edits ? KV_REPLY_EDITS : is_sched ? KV_REPLY_SCHEDULE : KV_REPLY_CODE;
    free(lines);
    free(text);
    return rc;
}
