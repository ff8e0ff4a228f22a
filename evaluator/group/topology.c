/* topology.c — evaluation groups from the node's NVLink topology. */
#include "evaluator/evaluator.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol/protocol.h"

int kv_topology_parse(const char *doctor_json, kv_topology *t, kv_err *err)
{
    memset(t, 0, sizeof *t);
    kv_proto_doctor *d = malloc(sizeof *d); /* the codec's reader, as the worker's writer */
    if (!d)
        return kv_err_set(err, "the GPU report: out of memory");
    int rc = kv_proto_doctor_from_json(doctor_json, d, err);
    for (int g = 0; rc == 0 && g < d->n_gpus; g++) {
        const kv_proto_gpu *x = &d->gpus[g];
        if (x->index >= KV_TOPO_MAX_GPUS) {
            rc = kv_err_set(err, "the GPU report: GPU %d is beyond the %d kevo handles", x->index,
                            KV_TOPO_MAX_GPUS);
            break;
        }
        if (x->index + 1 > t->n)
            t->n = x->index + 1;
        for (int k = 0; k < x->n_peers; k++)
            if (x->peers[k].device < KV_TOPO_MAX_GPUS)
                t->peer[x->index][x->peers[k].device] =
                    x->peers[k].access && x->peers[k].native_atomics;
    }
    free(d);
    return rc;
}

int kv_topology_probe(const char *worker_path, kv_topology *t, kv_err *err)
{
    int fds[2];
    if (pipe(fds) != 0)
        return kv_err_errno(err, errno, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return kv_err_errno(err, e, "fork");
    }
    if (pid == 0) {
        if (dup2(fds[1], 1) < 0)
            _exit(126);
        close(fds[0]);
        close(fds[1]);
        execl(worker_path, worker_path, "--doctor", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    ssize_t n = 0;
    while (buf && len + 1 < cap && (n = read(fds[0], buf + len, cap - len - 1)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        len += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!buf)
        return kv_err_set(err, "out of memory");
    buf[len] = 0;
    char how[96];
    kv_wait_status_text(status, how, sizeof how);
    int rc = !WIFEXITED(status) || WEXITSTATUS(status) != 0
                 ? kv_err_set(err, "%s --doctor failed (%s)", worker_path, how)
                 : kv_topology_parse(buf, t, err);
    free(buf);
    return rc;
}

int kv_topology_check_group(const kv_topology *t, const int *devs, int w, kv_err *err)
{
    for (int i = 0; i < w; i++) {
        if (devs[i] < 0 || devs[i] >= t->n)
            return kv_err_set(err, "GPU %d does not exist (this node has %d)", devs[i], t->n);
        for (int j = 0; j < i; j++) {
            if (devs[i] == devs[j])
                return kv_err_set(err, "GPU %d is named twice in one group", devs[i]);
            if (!t->peer[devs[i]][devs[j]] || !t->peer[devs[j]][devs[i]])
                return kv_err_set(err,
                                  "GPUs %d and %d are not NVLink peers (no load/store access "
                                  "with native atomics between them); a group's GPUs must be",
                                  devs[j], devs[i]);
        }
    }
    return 0;
}

/* Extends group g[0..k) with devices > g[k-1] not yet used, depth first. */
static int extend(const kv_topology *t, int world, const unsigned char *used, int *g, int k)
{
    if (k == world)
        return 1;
    for (int d = k ? g[k - 1] + 1 : 0; d < t->n; d++) {
        if (used[d])
            continue;
        int ok = 1;
        for (int j = 0; j < k && ok; j++)
            ok = t->peer[d][g[j]] && t->peer[g[j]][d];
        if (!ok)
            continue;
        g[k] = d;
        if (extend(t, world, used, g, k + 1))
            return 1;
    }
    return 0;
}

int kv_topology_groups(const kv_topology *t, int world, int max_groups,
                       int groups[][KV_GROUP_MAX_WORLD])
{
    unsigned char used[KV_TOPO_MAX_GPUS] = {0};
    int n = 0;
    if (world < 1 || world > KV_GROUP_MAX_WORLD)
        return 0;
    while (n < max_groups && extend(t, world, used, groups[n], 0)) {
        for (int i = 0; i < world; i++)
            used[groups[n][i]] = 1;
        n++;
    }
    return n;
}
