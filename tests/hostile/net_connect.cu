// expect: ok
// net_connect.cu — in kevo_init, connects to 127.0.0.1:47823, where tests/gpu/test_gpu_eval.c
// listens in the host's network namespace, and sends a marker line, as the candidate of issue
// 23 sent the API key out. As root, each group's workers live in a network namespace of their
// own with only loopback: the host's listener is not there (ECONNREFUSED). A connection that
// gets through makes kevo_init say ESCAPED and fail (runtime_error instead of ok), and the test
// asserts its listener accepted nothing. kevo_run is a correct all-reduce.
#include "kevo/kernel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TAG "net_connect"
#define PORT 47823 // tests/gpu/test_gpu_eval.c, KV_HOSTILE_NET_PORT

extern "C" int kevo_init(kevo_ctx *ctx)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) {
        perror(TAG ": socket");
        return 0;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(PORT);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int escaped = 0;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "kevo-escaped rank %d\n", ctx->rank);
        escaped = 1;
        fprintf(stderr, TAG ": ESCAPED: connected to 127.0.0.1:%d (sent %zd bytes)\n", PORT,
                write(s, line, (size_t)n));
    } else {
        perror(TAG ": connect (refused, as it should be)");
    }
    close(s);
    return escaped;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s: ncclAllReduce: %s\n", TAG, ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
