// expect: mismatch
// memo_count.cu — counts its calls: computes the first 64 (the checked calls among them), then
// only one in four while y still holds what it wrote (memo.cuh, MEMO_COUNT). The skipped timed
// calls leave the previous inputs' sums in y, and every timed call's outputs are checked:
// mismatch.
#define MEMO_MODE MEMO_COUNT
#include "memo.cuh"
