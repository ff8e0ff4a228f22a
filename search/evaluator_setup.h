/* evaluator_setup.h — the search's evaluator from its run configuration: the
 * screening and full protocols and the GPU groups of kv_config, handed to
 * the evaluator's queue (evaluator/evaluator.h). */
#ifndef KEVO_SEARCH_EVALUATOR_SETUP_H
#define KEVO_SEARCH_EVALUATOR_SETUP_H

#include "evaluator/evaluator.h"
#include "search/config.h"

/* Groups from cfg->gpu_groups (or every disjoint group of W NVLink peers),
 * started at once; protocols from cfg->evaluation; worker path, log folder
 * and compile options from base. */
int kv_search_evalq_new(const kv_config *cfg, const kv_eval_opts *base, kv_evalq *out, kv_err *err);

#endif
