/* topology.h — which GPUs can form an evaluation group: every pair of a
 * group must be NVLink peers (load/store access and native atomics between
 * them), as `kevo-worker --doctor` reports them. */
#ifndef KEVO_EVALUATOR_TOPOLOGY_H
#define KEVO_EVALUATOR_TOPOLOGY_H

#include "evaluator/group/group.h"
#include "common/err.h"

#define KV_TOPO_MAX_GPUS 16

typedef struct {
    int n;                                      /* GPUs visible */
    unsigned char peer[KV_TOPO_MAX_GPUS][KV_TOPO_MAX_GPUS]; /* 1: NVLink peers */
} kv_topology;

/* Reads the JSON printed by `kevo-worker --doctor`. */
int kv_topology_parse(const char *doctor_json, kv_topology *t, kv_err *err);
/* Runs `<worker> --doctor` and parses what it prints. */
int kv_topology_probe(const char *worker_path, kv_topology *t, kv_err *err);

/* 0 when every pair of devs[0..w) are peers; otherwise -1 with a message
 * naming the first pair that is not (or a device that does not exist). */
int kv_topology_check_group(const kv_topology *t, const int *devs, int w, kv_err *err);

/* Splits the GPUs into as many disjoint groups of `world` mutual peers as
 * possible (at most max_groups), lowest device numbers first. Returns the
 * number of groups (0 when none can be formed). */
int kv_topology_groups(const kv_topology *t, int world, int max_groups,
                       int groups[][KV_GROUP_MAX_WORLD]);

#endif
