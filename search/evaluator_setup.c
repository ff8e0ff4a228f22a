/* evaluator_setup.c — kv_config to the evaluator's queue (evaluator_setup.h). */
#include "search/evaluator_setup.h"

#include <string.h>

#include "evaluator/evaluator.h"

_Static_assert(KV_CFG_MAX_GROUPS <= KV_EVALQ_MAX_GROUPS, "the queue holds every configured group");

int kv_search_evalq_new(const kv_config *cfg, const kv_eval_opts *base, kv_evalq *out, kv_err *err)
{
    kv_evalq_gpu_opts qo;
    memset(&qo, 0, sizeof qo);
    kv_eval_opts *full = &qo.full;
    *full = *base;
    full->world = cfg->world;
    full->trials = cfg->eval.trials;
    full->warmup = cfg->eval.full_warmup;
    full->iters = cfg->eval.full_iters;
    full->timing = (kv_timing_mode)cfg->eval.timing;
    full->job_timeout_s = cfg->eval.job_timeout_s;
    full->recycle_every = cfg->eval.recycle_every;
    full->allow_nvls = cfg->eval.allow_nvls;
    full->allow_runtime_lookups = cfg->eval.allow_runtime_lookups;
    full->allow_unconfined = cfg->eval.allow_unconfined;
    full->output_cap_kib = cfg->eval.worker_output_kib;
    full->log_max_mib = cfg->eval.worker_log_mib;
    full->scratch_mib = cfg->eval.scratch_mib;
    full->worker_uid = (uint32_t)cfg->eval.worker_uid;
    full->seed = cfg->seed;
    full->compile.timeout_s = cfg->eval.compile_timeout_s;
    full->compile.jobs = cfg->eval.compile_jobs;
    qo.screen = *full;
    qo.screen.warmup = cfg->eval.screen_warmup;
    qo.screen.iters = cfg->eval.screen_iters;
    qo.max_groups = KV_CFG_MAX_GROUPS;
    qo.groups_name = "gpu_groups";
    qo.n_groups = cfg->n_groups;
    for (int g = 0; g < cfg->n_groups; g++) {
        if (cfg->group_size[g] != cfg->world)
            return kv_err_set(err, "gpu_groups[%d] has %d GPUs; world is %d", g, cfg->group_size[g],
                              cfg->world);
        if (cfg->world <= KV_GROUP_MAX_WORLD) /* else the queue refuses the world */
            memcpy(qo.groups[g], cfg->groups[g], sizeof(int) * (size_t)cfg->world);
    }
    return kv_evalq_gpu_new(&qo, out, err);
}
