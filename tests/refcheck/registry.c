/* registry.c — problem name → checker. */
#include <string.h>

#include "refcheck/checkers.h"

#define ENTRY(name) {#name, rc_expect_##name}

static const rc_checker checkers[] = {
    ENTRY(allreduce),
    ENTRY(allgather),
    ENTRY(reducescatter),
    ENTRY(alltoall),
    ENTRY(broadcast),
    ENTRY(gemm_allreduce),
    ENTRY(allgather_gemm),
    ENTRY(gemm_reducescatter),
    ENTRY(tp_rmsnorm),
    ENTRY(moe_dispatch),
    ENTRY(moe_combine),
    ENTRY(ulysses_seq_to_heads),
    ENTRY(vocab_parallel_cross_entropy),
    ENTRY(fp8_allgather),
    ENTRY(halo_conv1d),
};

const rc_checker *rc_find(const char *problem)
{
    for (size_t i = 0; i < sizeof checkers / sizeof checkers[0]; i++)
        if (strcmp(checkers[i].problem, problem) == 0)
            return &checkers[i];
    return NULL;
}
