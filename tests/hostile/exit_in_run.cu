// expect: crash
// exit_in_run.cu — calls exit(0) inside kevo_run (the first call, which the evaluator captures).
// The worker process ends in the middle of a job without sending a result; that its exit
// status is 0 changes nothing: the supervisor sees the process gone (and fd 3 closed) before an
// answer and records "crash", then kills the rest of the group and restarts it.
#include "kevo/kernel.h"

#include <stdlib.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    (void)ctx;
    exit(0);
}
