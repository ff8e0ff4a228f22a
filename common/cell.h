/* cell.h — behaviour cells of the MAP-Elites grid: how a kernel moves data
 * (transport) × whether one kernel does all of the work (fusion).
 * A cell is written "transport/fusion", e.g. "tma/fused". */
#ifndef KEVO_CELL_H
#define KEVO_CELL_H

typedef enum {
    KV_TRANSPORT_CE,
    KV_TRANSPORT_SM,
    KV_TRANSPORT_TMA,
    KV_TRANSPORT_NVLS,
    KV_TRANSPORT_COUNT
} kv_transport;
typedef enum { KV_FUSION_FUSED, KV_FUSION_UNFUSED, KV_FUSION_COUNT } kv_fusion;

#define KV_CELL_COUNT (KV_TRANSPORT_COUNT * KV_FUSION_COUNT)
#define KV_CELL_NAME_MAX 16

const char *kv_transport_name(kv_transport t); /* "ce", "sm", "tma", "nvls" */
const char *kv_fusion_name(kv_fusion f);       /* "fused", "unfused" */

/* Cell index = transport * KV_FUSION_COUNT + fusion. */
int kv_cell_index(kv_transport t, kv_fusion f);
/* Writes "transport/fusion" into out (>= KV_CELL_NAME_MAX bytes). */
void kv_cell_name(int index, char *out);
/* Parses "transport/fusion"; returns the index or -1. */
int kv_cell_parse(const char *name);

#endif
