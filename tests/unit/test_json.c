/* test_json.c — the message helpers of the JSON readers (common/json.h):
 * type names, quoting, paths, syntax-error positions, unknown and repeated
 * keys. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json.h"
#include "test.h"

#define CHECK_EQ(got, want) \
    KV_CHECKF(strcmp((got), (want)) == 0, "got [%s], want [%s]", (got), (want))

static void test_type(void)
{
    cJSON *v = cJSON_Parse("[null, true, 1, \"s\", [], {}]");
    KV_REQUIRE(v);
    const char *want[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++)
        CHECK_EQ(kv_json_type(c), want[i]);
    KV_CHECK(i == 6);
    CHECK_EQ(kv_json_type(NULL), "null");
    cJSON_Delete(v);
}

static void test_quote(void)
{
    char q[80];
    kv_json_quote(q, sizeof q, "plain");
    CHECK_EQ(q, "\"plain\"");
    kv_json_quote(q, sizeof q, "a\"b\\c\x01\x7f");
    CHECK_EQ(q, "\"a\\\"b\\\\c\\u0001\\u007f\"");
    char long_s[60];
    memset(long_s, 'x', sizeof long_s - 1);
    long_s[sizeof long_s - 1] = '\0';
    kv_json_quote(q, sizeof q, long_s);
    KV_CHECK(strlen(q) == 1 + 48 + 3 + 1);
    KV_CHECK(strcmp(q + 49, "...\"") == 0);
    /* escapes that do not fit end in ... too */
    char tabs[20];
    memset(tabs, '\t', sizeof tabs - 1);
    tabs[sizeof tabs - 1] = '\0';
    kv_json_quote(q, sizeof q, tabs);
    KV_CHECK(strlen(q) < sizeof q);
    KV_CHECK(strcmp(q + strlen(q) - 4, "...\"") == 0);
    char tiny[4] = "zzz";
    kv_json_quote(tiny, sizeof tiny, "abc");
    CHECK_EQ(tiny, "");
}

static void test_paths(void)
{
    char p[KV_JSON_PATH_MAX];
    kv_json_path_key(p, sizeof p, "$", "world");
    CHECK_EQ(p, "$.world");
    kv_json_path_key(p, sizeof p, "$.a", "two words");
    CHECK_EQ(p, "$.a[\"two words\"]");
    kv_json_path_key(p, sizeof p, "$", "9lives");
    CHECK_EQ(p, "$[\"9lives\"]");
    kv_json_path_index(p, sizeof p, "$.sizes", 3);
    CHECK_EQ(p, "$.sizes[3]");
    char small[12];
    kv_json_path_key(small, sizeof small, "$.evaluation", "screen_iters");
    CHECK_EQ(small, "$.evalua...");
    KV_CHECK(kv_json_is_identifier("_a9"));
    KV_CHECK(!kv_json_is_identifier("9a"));
    KV_CHECK(!kv_json_is_identifier(""));
    KV_CHECK(!kv_json_is_identifier("a-b"));
}

/* The message for text as cJSON rejects it. */
static void error_of(const char *text, char *out, size_t cap)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    KV_CHECK(root == NULL);
    cJSON_Delete(root);
    kv_json_error_at(out, cap, text, end);
}

static void test_error_at(void)
{
    char m[KV_JSON_MSG_MAX];
    error_of("{\n  \"a\": 1,\n}\n", m, sizeof m);
    CHECK_EQ(m, "invalid JSON at line 3, column 1 near \"}\"");
    error_of("{\"a\": [1, 2", m, sizeof m);
    KV_CHECK_STR_CONTAINS(m, ": unexpected end of input");
    kv_json_error_at(m, sizeof m, "x", NULL);
    CHECK_EQ(m, "invalid JSON (or out of memory while parsing)");
    int line, col;
    kv_json_line_col("ab\n\xc3\xa9z", strchr("ab\n\xc3\xa9z", 'z'), &line, &col);
    KV_CHECK(line == 2 && col == 2); /* é is one column */
}

static void test_keys(void)
{
    cJSON *o = cJSON_Parse("{\"a\": 1, \"b\": 2, \"a\": 3}");
    KV_REQUIRE(o);
    KV_CHECK(!kv_json_is_duplicate(o, o->child));
    KV_CHECK(!kv_json_is_duplicate(o, o->child->next));
    KV_CHECK(kv_json_is_duplicate(o, o->child->next->next));
    cJSON_Delete(o);

    static const char *const valid[] = {"world", "problems", "seed"};
    char m[KV_JSON_MSG_MAX];
    kv_json_unknown_key(m, sizeof m, "wrold", valid, 3);
    CHECK_EQ(m, "unknown key; did you mean \"world\"?");
    kv_json_unknown_key(m, sizeof m, "zzzzzzzz", valid, 3);
    CHECK_EQ(m, "unknown key (valid keys here: world, problems, seed)");
    kv_json_join(m, sizeof m, valid, 0);
    CHECK_EQ(m, "");
}

/* The message kv_json_parse_strict gives for text ("" when it parses). */
static void strict_of(const char *text, char *out, size_t cap)
{
    out[0] = '\0';
    cJSON *root = kv_json_parse_strict(text, out, cap);
    cJSON_Delete(root);
}

static void test_strict_nul(void)
{
    char m[KV_JSON_MSG_MAX];
    strict_of("{\"problems\": [\"allreduce\\u0000x\"]}", m, sizeof m);
    CHECK_EQ(m, "$.problems[0]: contains a NUL character (\\u0000)");
    strict_of("{\"a\": {\"b c\": [1, {\"d\": \"N\\u0000+1\"}]}}", m, sizeof m);
    CHECK_EQ(m, "$.a[\"b c\"][1].d: contains a NUL character (\\u0000)");
    strict_of("{\"a\": {\"k\\u0000\": 1}}", m, sizeof m);
    CHECK_EQ(m, "$.a: a key contains a NUL character (\\u0000)");
    strict_of("\"\\u0000\"", m, sizeof m);
    CHECK_EQ(m, "$: contains a NUL character (\\u0000)");
    /* an escaped backslash followed by u0000 is six plain characters; other
     * escapes, numbers, literals and brackets inside strings are walked past */
    strict_of("{\"a\": \"\\\\u0000\", \"b\": [\"]}\\\"\", -1.5e3, true, null, {}], "
              "\"c\": \"\\u0001\"}",
              m, sizeof m);
    CHECK_EQ(m, "");
    strict_of("[1, \"x\", \"\\u0000\"]", m, sizeof m);
    CHECK_EQ(m, "$[2]: contains a NUL character (\\u0000)");
    /* after a byte-order mark (cJSON skips it) */
    strict_of("\xEF\xBB\xBF{\"a\": 1, \"b\": \"\\u0000\"}", m, sizeof m);
    CHECK_EQ(m, "$.b: contains a NUL character (\\u0000)");
}

static void test_strict_depth(void)
{
    char m[KV_JSON_MSG_MAX];
    static char deep[100001 * 2 + 1];
    memset(deep, '[', 100000);
    memset(deep + 100000, ']', 100000);
    deep[200000] = '\0';
    strict_of(deep, m, sizeof m);
    CHECK_EQ(m, "nested too deep (more than 64 levels) at line 1, column 65");
    /* exactly the limit parses; brackets inside strings do not count */
    char ok[2 * KV_JSON_DEPTH_MAX + 1];
    memset(ok, '[', KV_JSON_DEPTH_MAX);
    memset(ok + KV_JSON_DEPTH_MAX, ']', KV_JSON_DEPTH_MAX);
    ok[2 * KV_JSON_DEPTH_MAX] = '\0';
    strict_of(ok, m, sizeof m);
    CHECK_EQ(m, "");
    char str[300];
    snprintf(str, sizeof str, "[\"%.*s\"]", 200, deep);
    strict_of(str, m, sizeof m);
    CHECK_EQ(m, "");
    /* syntax errors are cJSON's, as before */
    strict_of("{\"a\": 1,}", m, sizeof m);
    KV_CHECK_STR_CONTAINS(m, "invalid JSON at line 1, column 10");
}

static void test_exact_numbers(void)
{
    cJSON *o = cJSON_Parse("{\"max\": 9007199254740991, \"a\": [1e15, 123456789012345678, 0.1, "
                           "-0.0, {\"x\": 2.5e-300, \"s\": \"9\"}], \"b\": true}");
    KV_REQUIRE(o);
    char *before = cJSON_PrintUnformatted(o);
    KV_CHECKF(before && strstr(before, "9.00719925474099e+15"), "%s", before); /* cJSON's own */
    cJSON_free(before);
    KV_REQUIRE(kv_json_exact_numbers(o) == 0);
    char *after = cJSON_PrintUnformatted(o);
    KV_REQUIRE(after);
    CHECK_EQ(after, "{\"max\":9007199254740991,\"a\":[1000000000000000,1.2345678901234568e+17,0.1,"
                    "0,{\"x\":2.5e-300,\"s\":\"9\"}],\"b\":true}");
    cJSON_free(after);
    cJSON_Delete(o);
    char n[32];
    kv_json_fmt_number(-9007199254740991.0, n);
    CHECK_EQ(n, "-9007199254740991");
    kv_json_fmt_number(9007199254740992.0, n);
    CHECK_EQ(n, "9007199254740992");
    kv_json_fmt_number(1.0 / 3, n);
    CHECK_EQ(n, "0.3333333333333333"); /* 16 digits suffice */
}

int main(void)
{
    KV_RUN(test_type);
    KV_RUN(test_quote);
    KV_RUN(test_paths);
    KV_RUN(test_error_at);
    KV_RUN(test_keys);
    KV_RUN(test_strict_nul);
    KV_RUN(test_strict_depth);
    KV_RUN(test_exact_numbers);
    return kv_test_summary();
}
