/* config_schema.h — internal: the one table of every configuration key.
 *
 * Each row names a key by its dotted path below the document root ("world",
 * "budget.cost_usd", "mutator.llm.temperature"); "[]" marks the members of
 * array elements ("mutator.llm.models[].weight"). Rows are in document
 * order: kv_config_to_json writes keys in this order and docs/config.md
 * follows it.
 *
 * Offsets: rows outside "[]" point into kv_config; rows below
 * "mutator.llm.models[]" point into one kv_cfg_model. An OBJECT row has no
 * field of its own (its members are the rows below it); a CUSTOM row is
 * parsed and written by its handlers, which get the base of the whole struct.
 *
 * Users: search/config.c (the generic parser and writer), the CLI
 * (`kevo config keys`) and tests/test_config.c (docs stay true). */
#ifndef KEVO_SEARCH_CONFIG_SCHEMA_H
#define KEVO_SEARCH_CONFIG_SCHEMA_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "kevo/config.h"
#include "kevo/err.h"

typedef enum {
    KV_CFG_OBJECT,  /* nested object; its members are the rows below it */
    KV_CFG_INT,     /* int: a JSON number with no fraction, within [min, max] */
    KV_CFG_INT64,   /* int64_t, same rules */
    KV_CFG_UINT64,  /* uint64_t, same rules */
    KV_CFG_NUMBER,  /* double: a finite JSON number within [min, max] */
    KV_CFG_BOOL,    /* int 0/1 from true/false */
    KV_CFG_STRING,  /* char[size], NUL-terminated; longer strings are errors */
    KV_CFG_ENUM,    /* int-sized enum from a string; value = index in names[] */
    KV_CFG_CUSTOM   /* parse/emit handlers */
} kv_cfg_type;

#define KV_CFG_REQUIRED 0x1u /* the key must be present in its object */

/* Largest integer a JSON number (an IEEE double) carries exactly: 2^53 - 1.
 * 64-bit keys without a tighter limit are capped here so that every value
 * that parses is the value that was written. */
#define KV_CFG_INT_EXACT_MAX 9007199254740991.0

/* Room for a JSON path in messages ("$.mutator.llm.models[3].weight"). */
#define KV_CFG_PATH_MAX 256

typedef struct kv_cfg_key kv_cfg_key;

/* Extra validation of a parsed scalar; field points at the stored value. */
typedef int (*kv_cfg_check_fn)(const kv_cfg_key *key, const void *field,
                               const char *jpath, kv_err *err);
/* Parses item (at JSON path jpath) into base (kv_config or kv_cfg_model). */
typedef int (*kv_cfg_parse_fn)(const kv_cfg_key *key, const cJSON *item,
                               const char *jpath, void *base, kv_err *err);
/* Builds the JSON value of the key; NULL when out of memory. */
typedef cJSON *(*kv_cfg_emit_fn)(const kv_cfg_key *key, const void *base);

struct kv_cfg_key {
    const char *path;          /* dotted path below $ */
    kv_cfg_type type;
    unsigned flags;            /* KV_CFG_REQUIRED */
    size_t offset;             /* of the field in its base struct */
    size_t size;               /* sizeof the field (string capacity) */
    double min, max;           /* inclusive range of numbers; max may be INFINITY */
    double def;                /* default of numbers, booleans, enums (index) */
    const char *def_str;       /* default of strings; shown default of custom keys */
    const char *const *names;  /* enum values, NULL-terminated */
    kv_cfg_check_fn check;     /* optional, scalars only */
    kv_cfg_parse_fn parse;     /* CUSTOM only */
    kv_cfg_emit_fn emit;       /* CUSTOM only */
    const char *type_doc;      /* the JSON type in words (docs, `kevo config keys`) */
    const char *doc;           /* one line: what the key means */
};

extern const kv_cfg_key kv_cfg_schema[];
extern const size_t kv_cfg_schema_len;

/* The row of a dotted path, or NULL. */
const kv_cfg_key *kv_cfg_schema_find(const char *path);

/* The JSON type of a row in words ("integer", "enum", "array of ..."). */
const char *kv_cfg_type_name(const kv_cfg_key *key);

/* The last component of a row's path: its key in the JSON object. */
const char *kv_cfg_key_name(const kv_cfg_key *key);

/* Rules that span keys (group sizes vs world, what the LLM mutator
 * requires); run after every key has parsed. Errors name the JSON path. */
int kv_cfg_check_rules(const kv_config *cfg, kv_err *err);

/* ---- the generic engine (search/config.c), for the custom handlers ---- */

/* Sets "jpath: <message>"; returns KV_FAIL. */
int kv_cfg_fail(kv_err *err, const char *jpath, const char *fmt, ...) KV_PRINTF(3, 4);

/* "null", "a boolean", "a number", "a string", "an array", "an object". */
const char *kv_cfg_json_type(const cJSON *item);

/* jpath + "[i]" and jpath + ".key" (keys that are not identifiers are
 * written ["..."], escaped and shortened). */
void kv_cfg_path_index(char *out, size_t cap, const char *jpath, int i);
void kv_cfg_path_key(char *out, size_t cap, const char *jpath, const char *key);

/* A string value quoted for a message: escaped, at most ~48 characters. */
void kv_cfg_quote(char *out, size_t cap, const char *s);

/* Shortest text that reads back as v ("3", "0.8", "1e+30"). */
void kv_cfg_fmt_num(double v, char out[32]);

/* An integral number within [min, max] (messages name jpath). */
int kv_cfg_get_integer(const cJSON *item, const char *jpath, double min, double max,
                       double *out, kv_err *err);

/* Parses one value by its row (scalar, object or custom) into base. */
int kv_cfg_parse_row(const kv_cfg_key *key, const cJSON *item, const char *jpath,
                     void *base, kv_err *err);

/* Parses the members of obj against the rows directly below prefix ("" is
 * the root): unknown keys (with a suggestion), duplicates and missing
 * required keys are errors. */
int kv_cfg_parse_members(const char *prefix, const cJSON *obj, const char *jpath,
                         void *base, kv_err *err);

/* Sets the defaults of every scalar row below prefix (not crossing "[]"). */
void kv_cfg_apply_defaults(const char *prefix, void *base);

/* The JSON object of the rows directly below prefix; NULL when out of memory. */
cJSON *kv_cfg_emit_members(const char *prefix, const void *base);

#endif
