/* config_schema.h — internal: the one table of every configuration key.
 *
 * Each row (common/schema.h) names a key by its dotted path below the document
 * root ("world", "budget.cost_usd", "mutator.llm.temperature"); "[]" marks
 * the members of array elements ("mutator.llm.models[].weight"). Rows are in
 * document order: kv_config_to_json writes keys in this order and
 * docs/config.md follows it.
 *
 * Offsets: rows outside "[]" point into kv_config; rows below
 * "mutator.llm.models[]" point into one kv_cfg_model. An OBJECT row has no
 * field of its own (its members are the rows below it); a CUSTOM row is
 * read and written by its handlers, which get the base of the whole struct.
 *
 * Users: search/config.c (reading and writing through the schema engine),
 * the CLI (`kevo config keys`) and tests/unit/test_config.c (docs stay true). */
#ifndef KEVO_SEARCH_CONFIG_SCHEMA_H
#define KEVO_SEARCH_CONFIG_SCHEMA_H

#include <stddef.h>

#include "search/config.h"
#include "common/err.h"
#include "common/schema.h"

/* The rows, and the table the engine reads with. */
extern const kv_schema_key kv_cfg_schema[];
extern const size_t kv_cfg_schema_len;
extern const kv_schema kv_cfg_table;

/* Rules that span keys (group sizes vs world, what the LLM mutator
 * requires); run after every key has been read. Errors name the JSON path. */
int kv_cfg_check_rules(const kv_config *cfg, kv_err *err);

#endif
