#include "common/verdict.h"

#include <string.h>

static const char *const verdict_names[KV_VERDICT_COUNT] = {
    [KV_VERDICT_NONE] = "none",
    [KV_VERDICT_OK] = "ok",
    [KV_VERDICT_MISMATCH] = "mismatch",
    [KV_VERDICT_COMPILE_ERROR] = "compile_error",
    [KV_VERDICT_RUNTIME_ERROR] = "runtime_error",
    [KV_VERDICT_HANG] = "hang",
    [KV_VERDICT_CRASH] = "crash",
    [KV_VERDICT_NVLS_REFUSED] = "nvls_refused",
    [KV_VERDICT_DUPLICATE] = "duplicate",
    [KV_VERDICT_PROPOSAL_ERROR] = "proposal_error",
    [KV_VERDICT_REFUSED] = "refused",
    [KV_VERDICT_IMPLAUSIBLE] = "implausible",
};

const char *kv_verdict_name(kv_verdict v)
{
    if ((int)v < 0 || v >= KV_VERDICT_COUNT)
        return "unknown";
    return verdict_names[v];
}

int kv_verdict_parse(const char *name, kv_verdict *out)
{
    for (int i = 0; i < KV_VERDICT_COUNT; i++) {
        if (strcmp(name, verdict_names[i]) == 0) {
            *out = (kv_verdict)i;
            return 0;
        }
    }
    return -1;
}
