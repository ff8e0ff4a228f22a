/* evalq_gpu.h — the search's evaluator on this node's GPUs (evalq_gpu.c). */
#ifndef KEVO_SEARCH_EVALQ_GPU_H
#define KEVO_SEARCH_EVALQ_GPU_H

#include "kevo/config.h"
#include "search/evalq.h"

/* Groups from cfg->gpu_groups (or every disjoint group of W NVLink peers),
 * started at once; protocols from cfg->evaluation; worker path, log folder
 * and compile options from base. */
int kv_evalq_gpu_new(const kv_config *cfg, const kv_eval_opts *base, kv_evalq *out, kv_err *err);

#endif
