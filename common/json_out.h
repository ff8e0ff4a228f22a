/* json_out.h — the one way kevo prints JSON for output (event log, archive
 * views, exports, reports, requests): cJSON's text, made valid UTF-8. cJSON
 * copies a string's bytes as they are, so a reply's invalid UTF-8 would
 * reach the output, which strict parsers then reject; each such byte
 * becomes U+FFFD instead (kv_utf8_repair), and the writer learns how many. */
#ifndef KEVO_JSON_OUT_H
#define KEVO_JSON_OUT_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* j printed (formatted: indented), valid UTF-8; malloc'ed, NULL when out of
 * memory. *replaced (may be NULL): the bytes replaced by U+FFFD. */
char *kv_json_print(const cJSON *j, int formatted, size_t *replaced);

#endif
