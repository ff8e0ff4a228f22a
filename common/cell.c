#include "common/cell.h"

#include <stdio.h>
#include <string.h>

static const char *const transport_names[KV_TRANSPORT_COUNT] = {"ce", "sm", "tma", "nvls"};
static const char *const fusion_names[KV_FUSION_COUNT] = {"fused", "unfused"};

const char *kv_transport_name(kv_transport t)
{
    return (int)t >= 0 && t < KV_TRANSPORT_COUNT ? transport_names[t] : "unknown";
}

const char *kv_fusion_name(kv_fusion f)
{
    return (int)f >= 0 && f < KV_FUSION_COUNT ? fusion_names[f] : "unknown";
}

int kv_cell_index(kv_transport t, kv_fusion f)
{
    return (int)t * KV_FUSION_COUNT + (int)f;
}

void kv_cell_name(int index, char *out)
{
    if (index < 0 || index >= KV_CELL_COUNT) {
        snprintf(out, KV_CELL_NAME_MAX, "unknown");
        return;
    }
    snprintf(out, KV_CELL_NAME_MAX, "%s/%s", transport_names[index / KV_FUSION_COUNT],
             fusion_names[index % KV_FUSION_COUNT]);
}

int kv_cell_parse(const char *name)
{
    char buf[KV_CELL_NAME_MAX];
    for (int i = 0; i < KV_CELL_COUNT; i++) {
        kv_cell_name(i, buf);
        if (strcmp(buf, name) == 0)
            return i;
    }
    return -1;
}
