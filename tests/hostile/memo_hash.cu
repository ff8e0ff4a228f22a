// expect: ok
// no-faster-than: allreduce_oneshot_sm.cu
// memo_hash.cu — hashes the whole of its x on every call (a local read, far cheaper than the
// exchange) and skips the exchange when the hash and a sample of y match last time's for this y
// (memo.cuh, MEMO_HASH). Every timed call has fresh inputs, so the hash never matches: ok, at
// the honest cost plus its hash.
#define MEMO_MODE MEMO_HASH
#include "memo.cuh"
