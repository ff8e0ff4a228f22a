/* cmd_doctor.c — kevo doctor: what this node offers kevo. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/json_out.h"
#include "cli.h"
#include "eval_setup.h"
#include "common/machine.h"
#include "common/text.h"
#include "evaluator/evaluator.h"
#include "protocol/protocol.h"

static const char usage[] =
    "usage: kevo doctor [--json]\n"
    "\n"
    "Lists the GPUs (name, SMs, memory), which pairs are peers with native\n"
    "atomics (NVLink), the evaluation groups they can form at W = 2, 4 and 8,\n"
    "the CUDA driver and runtime, the NCCL version, the NVLS policy of\n"
    "this machine, and how candidate code is confined here (Landlock ABI, the\n"
    "workers' uid, their scratch); it says loudly when it cannot be.\n"
    "\n"
    "Exits 1 when no evaluation group can run here (no GPUs, or none that are\n"
    "NVLink peers), its last line saying so.\n";

/* Runs kevo-worker --doctor and returns its stdout (malloc'ed). */
static char *probe(const char *worker, kv_err *err)
{
    int fds[2];
    if (pipe(fds) != 0) {
        kv_err_errno(err, errno, "pipe");
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        kv_err_errno(err, errno, "fork");
        close(fds[0]);
        close(fds[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(worker, worker, "--doctor", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(fds[0], buf + len, cap - len - 1)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)n;
        if (cap - len < 1024) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!buf) {
        kv_err_set(err, "%s --doctor: out of memory reading its output", worker);
        return NULL;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[96];
        kv_wait_status_text(status, how, sizeof how);
        kv_err_set(err, "%s --doctor failed (%s)", worker, how);
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            return kv_cli_usage("doctor", usage, "unknown argument '%s'", argv[i]);
    }
    kv_err err = {{0}};
    char worker[4096];
    if (kv_cli_worker_path(worker, sizeof worker, &err) != 0)
        return kv_cli_fail(&err);
    char *out = probe(worker, &err);
    if (!out)
        return kv_cli_fail(&err);
    /* the worker's report, read strictly through the protocol's codec: a
     * malformed one is named, never half-read */
    kv_proto_doctor *rep = calloc(1, sizeof *rep); /* ~80 KB */
    cJSON *root = NULL;
    if (!rep) {
        free(out);
        kv_err_set(&err, "out of memory");
        return kv_cli_fail(&err);
    }
    if (kv_proto_doctor_from_json(out, rep, &err) != 0 || !(root = cJSON_Parse(out))) {
        if (!err.msg[0])
            kv_err_set(&err, "out of memory");
        kv_err_prefix(&err, "%s --doctor", worker);
        free(rep);
        free(out);
        return kv_cli_fail(&err);
    }
    cJSON_AddBoolToObject(root, "nvls_allowed", kv_machine_allows_nvls());
    kv_sandbox_support sup;
    kv_sandbox_probe(&sup);
    char confinement[512], network[256];
    kv_sandbox_describe(&sup, 0, confinement, sizeof confinement);
    kv_sandbox_describe_network(&sup, network, sizeof network);
    cJSON *conf = cJSON_AddObjectToObject(root, "confinement");
    if (conf) {
        cJSON_AddNumberToObject(conf, "landlock_abi", sup.landlock_abi);
        cJSON_AddBoolToObject(conf, "workers_own_uid", sup.root);
        cJSON_AddBoolToObject(conf, "private_scratch", sup.mount_ns);
        cJSON_AddBoolToObject(conf, "network_namespace", sup.net_ns);
        cJSON_AddStringToObject(conf, "network", network);
        cJSON_AddStringToObject(conf, "summary", confinement);
    }
    /* the groups of every world, in both forms: none usable is a failure */
    int usable = 0;
    kv_topology topo;
    kv_err topo_err = {{0}};
    int topo_ok = kv_topology_parse(out, &topo, &topo_err) == 0;
    if (topo_ok)
        for (int w = 2; w <= 8; w *= 2) {
            int groups[KV_TOPO_MAX_GPUS][KV_GROUP_MAX_WORLD];
            usable += kv_topology_groups(&topo, w, KV_TOPO_MAX_GPUS, groups);
        }
    cJSON_AddNumberToObject(root, "usable_groups", usable);
    if (json) {
        char *s = kv_json_print(root, 1, NULL);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        int nccl = rep->nccl;
        printf("CUDA driver %d, runtime %d\n", rep->cuda_driver, rep->cuda_runtime);
        printf("NCCL %d.%d.%d (device API and symmetric windows need >= 2.28)\n", nccl / 10000,
               nccl / 100 % 100, nccl % 100);
        char text[4 * sizeof rep->gpus[0].name];
        if (rep->error[0])
            printf("GPUs: none usable (%s)\n", KV_TERM(text, rep->error));
        for (int g = 0; g < rep->n_gpus; g++) {
            const kv_proto_gpu *d = &rep->gpus[g];
            printf("GPU %d: %s, cc %d.%d, %d SMs, %.0f GiB, L2 %.0f MiB\n", d->index,
                   KV_TERM(text, d->name), d->cc_major, d->cc_minor, d->sms,
                   (double)d->memory_bytes / (1 << 30), (double)d->l2_bytes / (1 << 20));
            for (int i = 0; i < d->n_peers; i++)
                printf("  peer GPU %d: %s%s\n", d->peers[i].device,
                       d->peers[i].access ? "load/store access" : "no access",
                       d->peers[i].native_atomics ? ", native atomics (NVLink)" : "");
        }
        if (topo_ok) {
            for (int w = 2; w <= 8; w *= 2) {
                int groups[KV_TOPO_MAX_GPUS][KV_GROUP_MAX_WORLD];
                int n = kv_topology_groups(&topo, w, KV_TOPO_MAX_GPUS, groups);
                printf("evaluation groups at W=%d:", w);
                for (int g = 0; g < n; g++) {
                    printf(" {");
                    for (int i = 0; i < w; i++)
                        printf("%s%d", i ? "," : "", groups[g][i]);
                    printf("}");
                }
                printf("%s\n", n ? "" : " none (needs that many GPUs that are all NVLink peers)");
            }
        }
        const char *nv = KV_TERM(text, rep->nvls_enable);
        printf("NVLS (NVLink multicast): %s (NCCL_NVLS_ENABLE=%s)\n",
               kv_machine_allows_nvls() ? "allowed by the machine; a run must also allow it"
                                        : "forbidden on this machine; NVLS candidates are refused",
               nv[0] ? nv : "unset");
        printf("candidate code: %s\n", confinement);
        printf("candidate network: %s\n", network);
        if (!usable)
            printf("no evaluation group can run here: kevo run and kevo eval need at least "
                   "2 GPUs that are NVLink peers\n");
    }
    cJSON_Delete(root);
    free(rep);
    free(out);
    if (usable)
        return KV_EXIT_OK;
    if (json) /* stdout holds only the JSON; the reason goes to stderr */
        fprintf(stderr, "kevo doctor: no evaluation group can run here\n");
    return KV_EXIT_FAIL;
}

const kv_command kv_cmd_doctor = {
    .name = "doctor",
    .summary = "show the GPUs, NVLink peers, NCCL, the NVLS policy and the confinement",
    .usage = usage,
    .run = run,
};
