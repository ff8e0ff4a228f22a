// expect: hang
// host_loop.cu — kevo_run never returns: an endless loop on the host (a volatile counter, so
// the compiler cannot remove it). Nothing is enqueued and no error is raised; the worker is
// alive but silent, so only the supervisor's job deadline ends it: "hang", then a restart.
#include "kevo/kernel.h"

extern "C" int kevo_run(kevo_ctx *ctx)
{
    (void)ctx;
    for (volatile unsigned i = 0;; i++) {
    }
    return 0;
}
