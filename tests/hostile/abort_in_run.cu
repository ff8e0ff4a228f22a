// expect: crash
// abort_in_run.cu — calls abort() inside kevo_run. The worker dies by SIGABRT before it can
// answer; the supervisor reaps it, records "crash" (killed by signal 6) and restarts the group.
#include "kevo/kernel.h"

#include <stdlib.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    (void)ctx;
    abort();
}
