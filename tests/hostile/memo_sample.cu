// expect: ok
// no-faster-than: allreduce_oneshot_sm.cu
// memo_sample.cu — the memoizing attack of issue 23: keeps, for each y it is given, 64 elements
// of its x and 16 of what it wrote into y, and skips the data movement when a look at them says
// nothing changed (memo.cuh, MEMO_SAMPLE). It won its run at 5.5x NCCL (223% of the roofline) when
// timing replayed calls on inputs seen before. Every timed call now has inputs no earlier call
// saw, so it never skips: ok, at the time of the honest one-shot all-reduce it always does.
#define MEMO_MODE MEMO_SAMPLE
#include "memo.cuh"
