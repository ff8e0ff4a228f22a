/* json.h — small helpers for the messages of kevo's strict JSON readers
 * (search/config.c, problem/load.c, protocol/codec.c; common/schema.h).
 *
 * The readers parse with cJSON and name what is wrong by its JSON path:
 *   $.evaluation.screen_iter: unknown key; did you mean "screen_iters"?
 * These functions build the pieces of such messages: type names, quoted
 * strings, JSON paths, the position of a syntax error, and the text for an
 * unknown or repeated key. They write into caller-owned buffers, never
 * allocate, and always NUL-terminate (cap > 0). */
#ifndef KEVO_JSON_H
#define KEVO_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* The largest integer a JSON number (an IEEE double) carries exactly:
 * 2^53 - 1. The one definition; the readers' integer limits use it. */
#define KV_JSON_INT_EXACT_MAX 9007199254740991.0

/* Room for a JSON path in messages ("$.mutator.llm.models[3].weight"). */
#define KV_JSON_PATH_MAX 256

/* Room for any text kv_json_error_at or kv_json_unknown_key writes. */
#define KV_JSON_MSG_MAX 700

/* The JSON type of v in words: "null" (NULL too), "a boolean", "a number",
 * "a string", "an array", "an object", else "an unknown value". */
const char *kv_json_type(const cJSON *v);

/* s in double quotes for a message: '"' and '\\' backslash-escaped, control
 * characters and DEL as \u00XX, at most 48 characters; a longer string, or
 * one that does not fit in cap, ends in ... before the closing quote. A cap
 * under 8 gives "". 80 bytes hold any result. */
void kv_json_quote(char *out, size_t cap, const char *s);

/* Whether s is an identifier: [A-Za-z_][A-Za-z0-9_]*. */
int kv_json_is_identifier(const char *s);

/* jpath + ".key", or jpath + "[\"key\"]" (quoted as kv_json_quote) when key
 * is not an identifier of at most 64 characters. A path that does not fit
 * in cap (>= 4) ends in "..." rather than being cut silently;
 * KV_JSON_PATH_MAX bytes hold any path kevo builds. */
void kv_json_path_key(char *out, size_t cap, const char *jpath, const char *key);

/* jpath + "[i]", cut as kv_json_path_key. */
void kv_json_path_index(char *out, size_t cap, const char *jpath, int i);

/* Line and column (1-based; columns count UTF-8 characters, not bytes) of
 * at within text. */
void kv_json_line_col(const char *text, const char *at, int *line, int *col);

/* The message for a text cJSON_ParseWithOpts rejected, at its parse-end
 * pointer at (NULL, or before text, when cJSON ran out of memory):
 *   invalid JSON at line 4, column 1 near "}"
 *   invalid JSON at line 9, column 2: unexpected end of input
 *   invalid JSON (or out of memory while parsing)
 * cJSON reports some errors after the whitespace that follows the token it
 * gave up on; the position is that token's. */
void kv_json_error_at(char *out, size_t cap, const char *text, const char *at);

/* The deepest nesting of arrays and objects the strict readers accept. The
 * deepest shipped file nests 5 levels; cJSON's own limit (1000) would give
 * an "invalid JSON at column 1001" instead of saying what is wrong. */
#define KV_JSON_DEPTH_MAX 64

/* Whether text nests arrays and objects deeper than KV_JSON_DEPTH_MAX
 * (brackets inside strings do not count). When it does, writes
 *   nested too deep (more than 64 levels) at line 1, column 65
 * (the bracket that opens level 65) and returns 1; else returns 0. Run
 * before cJSON, on any text, valid or not. */
int kv_json_too_deep(const char *text, char *msg, size_t cap);

/* Whether a string of root, which cJSON parsed from text, holds a NUL
 * character (a \u0000 escape: cJSON decodes it and the string ends there,
 * silently cut). When one does, writes
 *   $.problems[0]: contains a NUL character (\u0000)
 *   $.evaluation: a key contains a NUL character (\u0000)
 * and returns 1; else returns 0. text must be exactly what cJSON parsed
 * into root (without a byte-order mark it skipped). */
int kv_json_find_nul(const char *text, const cJSON *root, char *msg, size_t cap);

/* The strict readers' parse: one JSON value and nothing after it, nested at
 * most KV_JSON_DEPTH_MAX levels, no NUL in any string or key. On failure
 * returns NULL with the message in msg (kv_json_too_deep,
 * kv_json_error_at or kv_json_find_nul); the caller prefixes its file. */
cJSON *kv_json_parse_strict(const char *text, char *msg, size_t cap);

/* v as JSON number text that reads back as exactly v: an integral v of at
 * most 2^53-1 in magnitude in full ("9007199254740991", never
 * "9.00719925474099e+15"), any other in the shortest of %.15g..%.17g that
 * round-trips; 0 for -0; "nan", "inf", "-inf" (not JSON) for the others. */
void kv_json_fmt_number(double v, char out[32]);

/* Makes cJSON_Print exact: replaces every finite number below root by raw
 * text from kv_json_fmt_number (cJSON prints with 15 digits and calls that
 * equal when it is within a relative 2^-52, which loses integers above
 * 10^15). 0, or -1 when out of memory (root stays valid). */
int kv_json_exact_numbers(cJSON *root);

/* Whether a member before m in obj has m's key. */
int kv_json_is_duplicate(const cJSON *obj, const cJSON *m);

/* names[0..n) as "a, b, c" (cut where cap ends). */
void kv_json_join(char *out, size_t cap, const char *const *names, size_t n);

/* The message for a key that is not one of valid[0..n):
 *   unknown key; did you mean "screen_iters"?      (kv_suggest finds one)
 *   unknown key (valid keys here: world, problems)  (it does not) */
void kv_json_unknown_key(char *out, size_t cap, const char *key, const char *const *valid,
                         size_t n);

#endif
