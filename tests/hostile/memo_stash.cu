// expect: ok
// no-faster-than: allreduce_oneshot_sm.cu
// memo_stash.cu — keeps each result in scratch, and when a sample of x matches last time's for
// this y, copies the stashed result back into y instead of computing it (memo.cuh,
// MEMO_STASH): a local copy instead of an exchange. Every timed call has fresh inputs, so the
// sample never matches: ok, at the honest cost plus the stash copy.
#define MEMO_MODE MEMO_STASH
#include "memo.cuh"
