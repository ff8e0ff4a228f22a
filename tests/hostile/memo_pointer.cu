// expect: mismatch
// memo_pointer.cu — keys on the y pointer: a y it has computed before that still holds what it
// wrote (not poisoned) is taken as done, whatever x holds (memo.cuh, MEMO_POINTER). The checked
// calls poison y first, so it computes there; the timed calls find their y unpoisoned on new
// inputs, skip, and leave stale sums: every timed call's outputs are checked: mismatch.
#define MEMO_MODE MEMO_POINTER
#include "memo.cuh"
