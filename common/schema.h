/* schema.h — the one strict-JSON reader of kevo: a table of rows describes
 * the members of an object, and kv_schema_read reads a cJSON object into a
 * struct against it.
 *
 * Each row names a member by its dotted path below the document root
 * ("world", "budget.cost_usd", "inputs[].dtype"); "[]" marks the members of
 * the elements of an array, which a CUSTOM row reads one element at a time
 * with kv_schema_read(schema, "inputs[]", element, ...). Rows outside "[]"
 * point into the base struct the reader was given; rows below "x[]" into
 * the struct of one element.
 *
 * Reading an object checks, the first error ending it: a repeated key; a
 * key that is no row's ("unknown key; did you mean \"screen_iters\"?",
 * kv_suggest); a REQUIRED row's key that is missing ("required key is
 * missing"); each value by its row's type (a number's range with one
 * 2^53-1 limit, a string's room, an enum's names), then the row's check;
 * OBJECT rows recurse, CUSTOM rows call their reader. The order:
 *   - by default, document order: each member's key and then its value, as
 *     they come, and the missing required keys last (the configuration);
 *   - with KV_SCHEMA_TABLE_ORDER, every key of the object first, then the
 *     missing required keys, then the values in the order of the rows: for
 *     formats whose later members are read against earlier ones (a
 *     problem's sizes against its params, an input's init against its
 *     dtype).
 * Messages are "<JSON path>: <what is wrong>"; the caller prefixes its file:
 *   $.evaluation.screen_iter: unknown key; did you mean "screen_iters"?
 *   $.world: 17 is out of range (2..16)
 * Users: the run configuration (search/config_schema.c), problem.json
 * (problem/load.c), the worker protocol's messages (KV_SCHEMA_WIRE,
 * protocol/codec.c). Parsing the text itself is kv_json_parse_strict
 * (common/json.h): syntax, nesting depth and NUL characters. */
#ifndef KEVO_SCHEMA_H
#define KEVO_SCHEMA_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/json.h"

typedef enum {
    KV_SCHEMA_OBJECT, /* nested object; its members are the rows below it */
    KV_SCHEMA_INT,    /* int: a JSON number with no fraction, within [min, max] */
    KV_SCHEMA_INT64,  /* int64_t, same rules */
    KV_SCHEMA_UINT64, /* uint64_t, same rules */
    KV_SCHEMA_NUMBER, /* double: a finite JSON number within [min, max] */
    KV_SCHEMA_BOOL,   /* int 0/1 from true/false */
    KV_SCHEMA_STRING, /* char[size], NUL-terminated; longer strings are errors */
    KV_SCHEMA_ENUM,   /* int-sized enum from a string; value = index in names[] */
    KV_SCHEMA_CUSTOM  /* read (and written) by the row's handlers */
} kv_schema_type;

#define KV_SCHEMA_REQUIRED 0x01u /* the key must be present in its object */
#define KV_SCHEMA_NONEMPTY 0x02u /* STRING: "" is refused ("must not be empty") */
#define KV_SCHEMA_DIGITS \
    0x04u /* INT64, UINT64: a decimal string is read too (the form
                                    writers use beyond 2^53-1) */
#define KV_SCHEMA_NULL_NAN \
    0x08u                   /* NUMBER: null reads as NaN, any number as is (the form
                                    writers use for NaN and infinities) */
#define KV_SCHEMA_CUT 0x10u /* STRING: a longer string is cut to fit, not refused */

typedef struct kv_schema kv_schema;
typedef struct kv_schema_key kv_schema_key;

/* Extra validation of a read scalar: kv_schema_field(key, base) is the
 * stored value; base is the struct of the row's object. */
typedef int (*kv_schema_check_fn)(const kv_schema_key *key, const void *base, const char *jpath,
                                  kv_err *err);
/* Reads item (at JSON path jpath) into base. */
typedef int (*kv_schema_read_fn)(const kv_schema *s, const kv_schema_key *key, const cJSON *item,
                                 const char *jpath, void *base, kv_err *err);
/* Builds the JSON value of the row; NULL when out of memory. */
typedef cJSON *(*kv_schema_emit_fn)(const kv_schema *s, const kv_schema_key *key, const void *base);

struct kv_schema_key {
    const char *path; /* dotted path below $ */
    kv_schema_type type;
    unsigned flags;           /* KV_SCHEMA_REQUIRED, KV_SCHEMA_NONEMPTY */
    size_t offset;            /* of the field in its base struct */
    size_t size;              /* sizeof the field (string capacity) */
    double min, max;          /* inclusive range of numbers; max may be INFINITY */
    double def;               /* default of numbers, booleans, enums (index) */
    const char *def_str;      /* default of strings; shown default of custom keys */
    const char *const *names; /* ENUM: the values, NULL-terminated */
    const char *what;         /* ENUM: names the value in messages ("unknown dtype ...;
                                  expected one of a, b"); NULL: "unknown value ...;
                                  expected \"a\" or \"b\"" */
    kv_schema_check_fn check; /* optional, scalars only */
    kv_schema_read_fn read;   /* CUSTOM only */
    kv_schema_emit_fn emit;   /* CUSTOM only, where the table is written back */
    const char *type_doc;     /* the JSON type in words (docs, `kevo config keys`) */
    const char *doc;          /* one line: what the key means */
};

/* kv_schema.flags */
#define KV_SCHEMA_TABLE_ORDER 0x1u /* read values in the rows' order (see the top) */
#define KV_SCHEMA_WIRE \
    0x2u /* messages between processes rather than files people
                                      write: "missing", "unknown member" (no suggestion),
                                      "duplicate member", "expected a boolean",
                                      "longer than N bytes", and integers that name a
                                      string's text ("got the string \"12x\"") */

struct kv_schema {
    const kv_schema_key *keys;
    size_t n;
    unsigned flags; /* KV_SCHEMA_TABLE_ORDER, KV_SCHEMA_WIRE */
};

/* The largest integer a JSON number (an IEEE double) carries exactly:
 * 2^53 - 1. Integer rows without a tighter limit are capped here so that
 * every value that reads is the value that was written; messages write it
 * as "2^53-1". */
#define KV_SCHEMA_INT_EXACT_MAX KV_JSON_INT_EXACT_MAX

/* ---- reading ---- */

/* Reads the members of obj against the rows directly below prefix ("" is
 * the root) into base, in the order the header describes. */
int kv_schema_read(const kv_schema *s, const char *prefix, const cJSON *obj, const char *jpath,
                   void *base, kv_err *err);

/* Reads one value by its row (scalar, object or custom) into base. */
int kv_schema_read_value(const kv_schema *s, const kv_schema_key *key, const cJSON *item,
                         const char *jpath, void *base, kv_err *err);

/* Sets the defaults of every scalar row below prefix (not crossing "[]"). */
void kv_schema_defaults(const kv_schema *s, const char *prefix, void *base);

/* ---- writing ---- */

/* The JSON object of the rows directly below prefix; NULL when out of
 * memory. Integers are raw number text (exact beyond 10^15). */
cJSON *kv_schema_emit(const kv_schema *s, const char *prefix, const void *base);

/* ---- the table ---- */

/* The row of a dotted path, or NULL. */
const kv_schema_key *kv_schema_find(const kv_schema *s, const char *path);

/* The last component of a row's path: its key in the JSON object. */
const char *kv_schema_key_name(const kv_schema_key *key);

/* The JSON type of a row in words: type_doc, else "integer", "number", ... */
const char *kv_schema_type_name(const kv_schema_key *key);

/* Where the row's field lives in base. */
void *kv_schema_field(const kv_schema_key *key, void *base);
const void *kv_schema_cfield(const kv_schema_key *key, const void *base);

/* ---- pieces for custom readers and checks ---- */

/* Sets "jpath: <message>"; returns KV_FAIL. */
int kv_schema_fail(kv_err *err, const char *jpath, const char *fmt, ...) KV_PRINTF(3, 4);
#if defined(__clang_analyzer__) /* KV_FAIL where it is called, as kv_err_set (common/err.h) */
#define kv_schema_fail(...)          \
    ({                               \
        kv_schema_fail(__VA_ARGS__); \
        KV_FAIL;                     \
    })
#endif

/* A JSON number within [min, max], integral when integer is set:
 *   expected an integer, got a string | expected an integer, got 1.5
 *   17 is out of range (2..16) | -1 is out of range (0..2^53-1)
 * -0 reads as 0. */
int kv_schema_get_number(const cJSON *item, const char *jpath, int integer, double min, double max,
                         double *out, kv_err *err);

/* Every member of obj is one of names[0..n) and appears once (for objects
 * whose keys are not fixed, such as a size's parameters). */
int kv_schema_check_keys(const cJSON *obj, const char *jpath, const char *const *names, size_t n,
                         kv_err *err);

/* "jpath: unknown <what> "x"; expected one of a, b, c (did you mean "b"?)";
 * returns KV_FAIL. */
int kv_schema_unknown_value(kv_err *err, const char *jpath, const char *what, const char *value,
                            const char *const *names, size_t n);

#endif
