/* capture.c — one candidate call captured into a CUDA graph (never launched):
 * the evidence of what kevo_run enqueues, and the proof that its work is on
 * ctx->stream. A call that cannot be captured (a host synchronisation, an
 * allocation, a side stream forked and not joined back) is refused: its time
 * could not be measured honestly. Side streams forked from ctx->stream by an
 * event and joined back are captured with it (docs/abi.md rule 4). */
#include <stdio.h>
#include <stdlib.h>

#include "protocol/protocol.h"
#include "worker/worker.h"

/* Whether p lies in another rank's copy of the window. */
static int on_peer(const kv_worker *w, const void *p)
{
    for (int q = 0; q < w->world; q++) {
        const char *base = w->win_peers[q];
        if (q != w->rank && (const char *)p >= base && (const char *)p < base + w->win_bytes)
            return 1;
    }
    return 0;
}

int kv_capture_candidate(kv_size_run *r, kv_job_result *res, kv_fail *f)
{
    kv_worker *w = r->w;
    kv_side *c = &r->side[KV_SIDE_CAND];
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "cudaStreamBeginCapture");
    int rc = c->code.run(&c->ctx);
    c->ctx.call_index++; /* the epoch it used is gone, identically on every rank */
    e = cudaStreamEndCapture(w->stream, &graph);
    cudaError_t sticky = cudaGetLastError();
    if (rc != 0) {
        if (graph)
            cudaGraphDestroy(graph);
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "candidate: kevo_run returned %d (while captured)", rc);
    }
    if (e != cudaSuccess || !graph) {
        kv_proto_graph_failed(res->graph_json, sizeof res->graph_json,
                              cudaGetErrorName(e != cudaSuccess ? e : sticky));
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "candidate: kevo_run cannot be captured into a CUDA graph (%s): it "
                           "synchronises, allocates or leaves a side stream unjoined, so its time "
                           "cannot be measured on ctx->stream",
                           cudaGetErrorName(e != cudaSuccess ? e : sticky));
    }
    res->graph_captured = 1;
    size_t n = 0;
    cudaGraphNode_t *nodes = NULL;
    e = cudaGraphGetNodes(graph, NULL, &n);
    if (e == cudaSuccess && n > 0) {
        nodes = calloc(n, sizeof *nodes);
        e = nodes ? cudaGraphGetNodes(graph, nodes, &n) : cudaErrorMemoryAllocation;
    }
    kv_proto_graph_begin(res->graph_json, sizeof res->graph_json);
    for (size_t i = 0; e == cudaSuccess && i < n; i++) {
        enum cudaGraphNodeType type;
        if ((e = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess)
            break;
        const char *name = NULL, *kind = "other";
        if (type == cudaGraphNodeTypeKernel) {
            struct cudaKernelNodeParams kp;
            res->kernel_nodes++;
            kind = "kernel";
            if (cudaGraphKernelNodeGetParams(nodes[i], &kp) == cudaSuccess)
                (void)cudaFuncGetName(&name, kp.func);
            (void)cudaGetLastError(); /* a library kernel may have no name */
        } else if (type == cudaGraphNodeTypeMemcpy) {
            struct cudaMemcpy3DParms mp;
            res->memcpy_nodes++;
            kind = "memcpy";
            if (cudaGraphMemcpyNodeGetParams(nodes[i], &mp) == cudaSuccess &&
                (on_peer(w, mp.srcPtr.ptr) || on_peer(w, mp.dstPtr.ptr)))
                res->peer_copy_bytes += (double)mp.extent.width *
                                        (double)(mp.extent.height ? mp.extent.height : 1) *
                                        (double)(mp.extent.depth ? mp.extent.depth : 1);
            (void)cudaGetLastError();
        } else if (type == cudaGraphNodeTypeMemset) {
            res->memset_nodes++;
            kind = "memset";
        } else {
            res->other_nodes++;
        }
        /* the node list is cut where it no longer fits; the counts stay whole */
        (void)kv_proto_graph_add(res->graph_json, sizeof res->graph_json, kind, name);
    }
    free(nodes);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "reading the captured graph");
    if (n == 0)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "candidate: kevo_run put no work on ctx->stream (work on other "
                           "streams is invisible to the timer and is not allowed)");
    return 0;
}

int kv_capture_calls(kv_size_run *r, int s, int calls, cudaGraphExec_t *exec, kv_fail *f)
{
    kv_worker *w = r->w;
    kv_side *side = &r->side[s];
    cudaGraph_t graph = NULL;
    *exec = NULL;
    cudaError_t e = cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return kv_cuda_fail(f, e, "cudaStreamBeginCapture");
    int rc = 0;
    for (int k = 0; k < calls && rc == 0; k++) {
        kv_size_run_bind_slot(r, k % r->layout.slots);
        rc = side->code.run(&side->ctx);
        side->ctx.call_index++;
    }
    e = cudaStreamEndCapture(w->stream, &graph);
    (void)cudaGetLastError(); /* a refused capture leaves its error behind */
    if (rc != 0 || e != cudaSuccess || !graph) {
        if (graph)
            cudaGraphDestroy(graph);
        return 1;
    }
    e = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    return e == cudaSuccess ? 0 : kv_cuda_fail(f, e, "cudaGraphInstantiate");
}
