/* test_schema.c — the strict-JSON schema engine (common/schema.h) on a table
 * of its own: every kind of refusal, in both orders and both wordings, with
 * the JSON path and the nearest key in the message; defaults, nested
 * objects, elements of arrays through a custom reader, and writing back. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/schema.h"
#include "test.h"

typedef struct {
    int port;
    int64_t big;
    uint64_t id;
    double ratio;
    int verbose;
    char name[8];
    int color;
    struct {
        int depth;
        char label[16];
    } inner;
    int n_items;
    int items[4];
    double nan_ok;
    char cut[4];
} doc;

static const char *const colors[] = {"red", "green", "blue", NULL};

static int check_even(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    int v;
    memcpy(&v, kv_schema_cfield(k, base), sizeof v);
    if (v % 2)
        return kv_schema_fail(err, jpath, "%d is odd", v);
    return KV_OK;
}

/* items: an array of up to 4 integers 0..9 */
static int read_items(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                      void *base, kv_err *err)
{
    (void)s;
    (void)k;
    doc *d = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array, got %s", kv_json_type(v));
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ip[KV_JSON_PATH_MAX];
        double x;
        kv_json_path_index(ip, sizeof ip, jpath, i);
        if (i >= 4)
            return kv_schema_fail(err, ip, "too many items");
        if (kv_schema_get_number(c, ip, 1, 0, 9, &x, err))
            return KV_FAIL;
        d->items[i] = (int)x;
    }
    d->n_items = i;
    return KV_OK;
}

static cJSON *emit_items(const kv_schema *s, const kv_schema_key *k, const void *base)
{
    (void)s;
    (void)k;
    const doc *d = base;
    return cJSON_CreateIntArray(d->items, d->n_items);
}

#define D(m) .offset = offsetof(doc, m), .size = sizeof(((doc *)0)->m)

static const kv_schema_key rows[] = {
    {.path = "port",
     .type = KV_SCHEMA_INT,
     .flags = KV_SCHEMA_REQUIRED,
     D(port),
     .min = 1,
     .max = 65535,
     .def = 80,
     .check = check_even},
    {.path = "big", .type = KV_SCHEMA_INT64, D(big), .min = 0, .max = KV_SCHEMA_INT_EXACT_MAX},
    {.path = "id",
     .type = KV_SCHEMA_UINT64,
     D(id),
     .min = 0,
     .max = KV_SCHEMA_INT_EXACT_MAX,
     .def = 7},
    {.path = "ratio", .type = KV_SCHEMA_NUMBER, D(ratio), .min = 0, .max = INFINITY, .def = 0.5},
    {.path = "verbose", .type = KV_SCHEMA_BOOL, D(verbose)},
    {.path = "name",
     .type = KV_SCHEMA_STRING,
     .flags = KV_SCHEMA_NONEMPTY,
     D(name),
     .def_str = "x"},
    {.path = "color", .type = KV_SCHEMA_ENUM, D(color), .names = colors, .def = 1},
    {.path = "inner", .type = KV_SCHEMA_OBJECT},
    {.path = "inner.depth",
     .type = KV_SCHEMA_INT,
     .flags = KV_SCHEMA_REQUIRED,
     D(inner.depth),
     .min = 0,
     .max = 3},
    {.path = "inner.label", .type = KV_SCHEMA_STRING, D(inner.label), .def_str = "none"},
    {.path = "items", .type = KV_SCHEMA_CUSTOM, D(items), .read = read_items, .emit = emit_items},
    {.path = "nan_ok", .type = KV_SCHEMA_NUMBER, .flags = KV_SCHEMA_NULL_NAN, D(nan_ok)},
    {.path = "cut", .type = KV_SCHEMA_STRING, .flags = KV_SCHEMA_CUT, D(cut)},
};

static const kv_schema file_schema = {.keys = rows, .n = sizeof rows / sizeof rows[0]};
static const kv_schema table_schema = {
    .keys = rows, .n = sizeof rows / sizeof rows[0], .flags = KV_SCHEMA_TABLE_ORDER};
static const kv_schema wire_schema = {.keys = rows,
                                      .n = sizeof rows / sizeof rows[0],
                                      .flags = KV_SCHEMA_TABLE_ORDER | KV_SCHEMA_WIRE};

/* Reads text against s into d (defaults first); the engine's return code. */
static int read_doc(const kv_schema *s, const char *text, doc *d, kv_err *err)
{
    memset(d, 0, sizeof *d);
    kv_schema_defaults(s, "", d);
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return kv_err_set(err, "test: not JSON: %s", text);
    int rc = kv_schema_read(s, "", root, "$", d, err);
    cJSON_Delete(root);
    return rc;
}

/* text is refused with a message that contains want. */
static void refused(const kv_schema *s, const char *text, const char *want)
{
    doc d;
    kv_err err = {{0}};
    KV_CHECKF(read_doc(s, text, &d, &err) == KV_FAIL, "accepted: %s", text);
    KV_CHECKF(strstr(err.msg, want) != NULL, "%s: got [%s], want [%s]", text, err.msg, want);
}

static void test_defaults_and_values(void)
{
    doc d;
    kv_err err = {{0}};
    KV_REQUIRE(read_doc(&file_schema, "{\"port\": 8, \"inner\": {\"depth\": 2}}", &d, &err) == 0);
    KV_CHECK(d.port == 8 && d.id == 7 && d.ratio == 0.5 && d.color == 1);
    KV_CHECK(strcmp(d.name, "x") == 0 && strcmp(d.inner.label, "none") == 0 && d.inner.depth == 2);

    KV_REQUIRE(read_doc(&file_schema,
                        "{\"port\": 443.0e0, \"big\": 9007199254740991, \"id\": 3, \"ratio\": -0,"
                        " \"verbose\": true, \"name\": \"abcdefg\", \"color\": \"blue\","
                        " \"inner\": {\"depth\": 0, \"label\": \"l\"}, \"items\": [1, 2],"
                        " \"nan_ok\": null, \"cut\": \"abcdef\"}",
                        &d, &err) == KV_FAIL); /* 443 is odd: the row's check */
    KV_CHECK_STR_CONTAINS(err.msg, "$.port: 443 is odd");
    KV_REQUIRE(read_doc(&file_schema,
                        "{\"port\": 444, \"big\": 9007199254740991, \"id\": 3, \"ratio\": -0,"
                        " \"verbose\": true, \"name\": \"abcdefg\", \"color\": \"blue\","
                        " \"inner\": {\"depth\": 0, \"label\": \"l\"}, \"items\": [1, 2],"
                        " \"nan_ok\": null, \"cut\": \"abcdef\"}",
                        &d, &err) == 0);
    KV_CHECK(d.big == 9007199254740991LL && d.id == 3 && d.verbose == 1 && d.color == 2);
    KV_CHECK(d.ratio == 0 && !signbit(d.ratio)); /* no -0 */
    KV_CHECK(d.n_items == 2 && d.items[1] == 2 && isnan(d.nan_ok));
    KV_CHECK(strcmp(d.cut, "abc") == 0); /* KV_SCHEMA_CUT: cut to fit */

    /* written back and read again: the same values */
    cJSON *out = kv_schema_emit(&file_schema, "", &d);
    KV_REQUIRE(out);
    char *text = cJSON_PrintUnformatted(out);
    KV_REQUIRE(text);
    KV_CHECK_STR_CONTAINS(text, "\"big\":9007199254740991");
    KV_CHECK_STR_CONTAINS(text, "\"color\":\"blue\"");
    KV_CHECK_STR_CONTAINS(text, "\"inner\":{\"depth\":0,\"label\":\"l\"}");
    KV_CHECK_STR_CONTAINS(text, "\"items\":[1,2]");
    doc e;
    KV_CHECKF(read_doc(&file_schema, text, &e, &err) == 0, "%s", err.msg);
    KV_CHECK(e.big == d.big && e.port == d.port && e.n_items == 2 && e.color == d.color);
    cJSON_free(text);
    cJSON_Delete(out);
}

static void test_keys(void)
{
    /* unknown, with the nearest key; without one, the valid keys */
    refused(&file_schema, "{\"port\": 8, \"prot\": 1}",
            "$.prot: unknown key; did you mean \"port\"?");
    refused(&file_schema, "{\"port\": 8, \"inner\": {\"depht\": 1}}",
            "$.inner.depht: unknown key; did you mean \"depth\"?");
    refused(&file_schema, "{\"port\": 8, \"zzzzzzzz\": 1}",
            "$.zzzzzzzz: unknown key (valid keys here: port, big, id, ratio, verbose, name, "
            "color, inner, items, nan_ok, cut)");
    refused(&file_schema, "{\"port\": 8, \"a b\": 1}", "$[\"a b\"]: unknown key");
    /* repeated, missing, not an object */
    refused(&file_schema, "{\"port\": 8, \"port\": 8}", "$.port: duplicate key");
    refused(&file_schema, "{\"inner\": {\"depth\": 1}}", "$.port: required key is missing");
    refused(&file_schema, "{\"port\": 8, \"inner\": {}}", "$.inner.depth: required key is missing");
    refused(&file_schema, "[1]", "$: expected an object, got an array");
    refused(&file_schema, "{\"port\": 8, \"inner\": 3}",
            "$.inner: expected an object, got a number");
}

static void test_values(void)
{
    const kv_schema *s = &file_schema;
    refused(s, "{\"port\": \"8\"}", "$.port: expected an integer, got a string");
    refused(s, "{\"port\": 8.5}", "$.port: expected an integer, got 8.5");
    refused(s, "{\"port\": 0}", "$.port: 0 is out of range (1..65535)");
    refused(s, "{\"port\": 1e400}", "$.port: number too large to represent (expected an integer)");
    refused(s, "{\"port\": 8, \"big\": 9007199254740992}",
            "$.big: 9007199254740992 is out of range (0..2^53-1)");
    refused(s, "{\"port\": 8, \"id\": -1}", "$.id: -1 is out of range (0..2^53-1)");
    refused(s, "{\"port\": 8, \"ratio\": -0.25}", "$.ratio: -0.25 is out of range (must be >= 0)");
    refused(s, "{\"port\": 8, \"ratio\": null}", "$.ratio: expected a number, got null");
    refused(s, "{\"port\": 8, \"verbose\": 1}", "$.verbose: expected true or false, got a number");
    refused(s, "{\"port\": 8, \"name\": 1}", "$.name: expected a string, got a number");
    refused(s, "{\"port\": 8, \"name\": \"\"}", "$.name: must not be empty");
    refused(s, "{\"port\": 8, \"name\": \"abcdefgh\"}",
            "$.name: string too long (8 bytes, at most 7)");
    refused(s, "{\"port\": 8, \"color\": \"gren\"}",
            "$.color: unknown value \"gren\"; expected \"red\", \"green\" or \"blue\" "
            "(did you mean \"green\"?)");
    refused(s, "{\"port\": 8, \"color\": \"purple\"}",
            "$.color: unknown value \"purple\"; expected \"red\", \"green\" or \"blue\"");
    refused(s, "{\"port\": 8, \"color\": 2}",
            "$.color: expected \"red\", \"green\" or \"blue\", got a number");
    refused(s, "{\"port\": 8, \"inner\": {\"depth\": 4}}",
            "$.inner.depth: 4 is out of range (0..3)");
    refused(s, "{\"port\": 8, \"items\": [1, 10]}", "$.items[1]: 10 is out of range (0..9)");
    refused(s, "{\"port\": 8, \"nan_ok\": \"x\"}", "$.nan_ok: expected a number, got a string");
}

/* Document order reads each member as it comes, the missing keys last;
 * table order checks every key and every missing key first. */
static void test_orders(void)
{
    refused(&file_schema, "{\"port\": 0, \"bogus\": 1}", "$.port: 0 is out of range");
    refused(&table_schema, "{\"port\": 0, \"bogus\": 1}", "$.bogus: unknown key");
    refused(&file_schema, "{\"ratio\": -1}", "$.ratio: -1 is out of range");
    refused(&table_schema, "{\"ratio\": -1}", "$.port: required key is missing");
    /* table order reads values in the rows' order, whatever the document's */
    refused(&table_schema, "{\"name\": \"\", \"port\": 3}", "$.port: 3 is odd");
    refused(&file_schema, "{\"name\": \"\", \"port\": 3}", "$.name: must not be empty");
}

static void test_wire_words(void)
{
    const kv_schema *s = &wire_schema;
    refused(s, "{\"port\": 8, \"prot\": 1}", "$.prot: unknown member");
    refused(s, "{\"port\": 8, \"port\": 8}", "$.port: duplicate member");
    refused(s, "{}", "$.port: missing");
    refused(s, "{\"port\": \"8\"}", "$.port: expected an integer, got the string \"8\"");
    refused(s, "{\"port\": 1.5}", "$.port: expected an integer, got 1.5");
    refused(s, "{\"port\": 70000}", "$.port: 70000 is out of range (1..65535)");
    refused(s, "{\"port\": 8, \"id\": -1}", "$.id: expected an unsigned integer, got -1");
    refused(s, "{\"port\": 8, \"verbose\": 0}", "$.verbose: expected a boolean, got a number");
    refused(s, "{\"port\": 8, \"name\": \"abcdefgh\"}", "$.name: longer than 7 bytes");
}

static void test_wire_digits(void)
{
    static const kv_schema_key wrows[] = {
        {.path = "u",
         .type = KV_SCHEMA_UINT64,
         .flags = KV_SCHEMA_DIGITS,
         .offset = offsetof(doc, id),
         .size = sizeof(uint64_t)},
        {.path = "i",
         .type = KV_SCHEMA_INT64,
         .flags = KV_SCHEMA_DIGITS,
         .offset = offsetof(doc, big),
         .size = sizeof(int64_t),
         .min = -INFINITY,
         .max = INFINITY},
    };
    static const kv_schema w = {.keys = wrows, .n = 2, .flags = KV_SCHEMA_WIRE};
    doc d;
    kv_err err = {{0}};
    KV_CHECKF(read_doc(&w, "{\"u\": \"18446744073709551615\", \"i\": \"-9223372036854775808\"}", &d,
                       &err) == 0,
              "%s", err.msg);
    KV_CHECK(d.id == UINT64_MAX && d.big == INT64_MIN);
    refused(&w, "{\"u\": \"12x\"}", "$.u: expected an unsigned integer, got the string \"12x\"");
    refused(&w, "{\"u\": \"18446744073709551616\"}", "$.u: expected an unsigned integer");
    refused(&w, "{\"u\": 9007199254740992}", "$.u: expected an unsigned integer");
    refused(&w, "{\"i\": \"+1\"}", "$.i: expected an integer, got the string \"+1\"");
}

static void test_helpers(void)
{
    kv_err err = {{0}};
    static const char *const names[] = {"alpha", "beta"};
    KV_CHECK(kv_schema_unknown_value(&err, "$.x", "letter", "alpah", names, 2) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(
        err.msg,
        "$.x: unknown letter \"alpah\"; expected one of alpha, beta (did you mean \"alpha\"?)");
    cJSON *o = cJSON_Parse("{\"alpha\": 1, \"gamma\": 2}");
    KV_REQUIRE(o);
    KV_CHECK(kv_schema_check_keys(o, "$.s", names, 2, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "$.s.gamma: unknown key");
    cJSON_Delete(o);

    const kv_schema_key *k = kv_schema_find(&file_schema, "inner.depth");
    KV_REQUIRE(k);
    KV_CHECK(strcmp(kv_schema_key_name(k), "depth") == 0);
    KV_CHECK(strcmp(kv_schema_type_name(k), "integer") == 0);
    KV_CHECK(kv_schema_find(&file_schema, "depth") == NULL);
}

int main(void)
{
    KV_RUN(test_defaults_and_values);
    KV_RUN(test_keys);
    KV_RUN(test_values);
    KV_RUN(test_orders);
    KV_RUN(test_wire_words);
    KV_RUN(test_wire_digits);
    KV_RUN(test_helpers);
    return kv_test_summary();
}
