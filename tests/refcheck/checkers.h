/* checkers.h — one host checker per problem (see refcheck.h), grouped by
 * category into collectives.c, tensor_parallel.c, expert_parallel.c and
 * long_tail.c. */
#ifndef KEVO_TESTS_CHECKERS_H
#define KEVO_TESTS_CHECKERS_H

#include "refcheck/refcheck.h"

#define RC_CHECKER(name) int rc_expect_##name(const rc_data *d, int rank, rc_expect *e, \
                                              char *why, size_t cap)

/* collectives.c */
RC_CHECKER(allreduce);
RC_CHECKER(allgather);
RC_CHECKER(reducescatter);
RC_CHECKER(alltoall);
RC_CHECKER(broadcast);
/* tensor_parallel.c */
RC_CHECKER(gemm_allreduce);
RC_CHECKER(allgather_gemm);
RC_CHECKER(gemm_reducescatter);
RC_CHECKER(tp_rmsnorm);
/* expert_parallel.c (with the context-parallel reshuffle) */
RC_CHECKER(moe_dispatch);
RC_CHECKER(moe_combine);
RC_CHECKER(ulysses_seq_to_heads);
/* long_tail.c (vocab parallel, FSDP, convolution) */
RC_CHECKER(vocab_parallel_cross_entropy);
RC_CHECKER(fp8_allgather);
RC_CHECKER(halo_conv1d);

#endif
