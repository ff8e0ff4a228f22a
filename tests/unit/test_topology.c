/* test_topology.c — evaluation groups from `kevo-worker --doctor` reports:
 * every pair of a group must be NVLink peers; groups are disjoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "evaluator/evaluator.h"
#include "protocol/protocol.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

/* A doctor report of n GPUs where link(i, j) says whether i and j are peers,
 * written by the codec's encoder as kevo-worker writes it. */
static void report(char *out, size_t cap, int n, int (*link)(int, int))
{
    kv_proto_doctor *d = calloc(1, sizeof *d);
    KV_REQUIRE(d);
    d->n_gpus = n;
    for (int i = 0; i < n; i++) {
        kv_proto_gpu *g = &d->gpus[i];
        g->index = i;
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            kv_proto_peer *p = &g->peers[g->n_peers++];
            p->device = j;
            p->access = p->native_atomics = link(i, j);
        }
    }
    char *text = kv_proto_doctor_to_json(d);
    KV_REQUIRE(text && strlen(text) < cap);
    strcpy(out, text);
    free(text);
    free(d);
}

static int all_linked(int i, int j)
{
    (void)i;
    (void)j;
    return 1;
}

static int two_islands_of_four(int i, int j)
{
    return i / 4 == j / 4;
}

static int one_bad_pair(int i, int j)
{
    return !((i == 1 && j == 2) || (i == 2 && j == 1));
}

static void test_all_to_all(void)
{
    char json[16384];
    kv_topology t;
    kv_err err = {{0}};
    report(json, sizeof json, 8, all_linked);
    KV_REQUIRE(kv_topology_parse(json, &t, &err) == 0 && t.n == 8);
    int g[8][KV_GROUP_MAX_WORLD];
    KV_CHECK(kv_topology_groups(&t, 2, 8, g) == 4);
    KV_CHECK(g[0][0] == 0 && g[0][1] == 1 && g[3][0] == 6 && g[3][1] == 7);
    KV_CHECK(kv_topology_groups(&t, 4, 8, g) == 2);
    KV_CHECK(kv_topology_groups(&t, 8, 8, g) == 1);
    KV_CHECK(kv_topology_groups(&t, 3, 8, g) == 2); /* 8 GPUs make two groups of 3 */
    KV_CHECK(kv_topology_groups(&t, 2, 3, g) == 3); /* at most max_groups */
    int devs[2] = {3, 5};
    KV_CHECK(kv_topology_check_group(&t, devs, 2, &err) == 0);
}

static void test_islands(void)
{
    char json[16384];
    kv_topology t;
    kv_err err = {{0}};
    report(json, sizeof json, 8, two_islands_of_four);
    KV_REQUIRE(kv_topology_parse(json, &t, &err) == 0);
    int g[8][KV_GROUP_MAX_WORLD];
    KV_CHECK(kv_topology_groups(&t, 4, 8, g) == 2);
    KV_CHECK(g[1][0] == 4 && g[1][3] == 7);
    KV_CHECK(kv_topology_groups(&t, 8, 8, g) == 0); /* no group spans the islands */
    int across[2] = {3, 4};
    KV_CHECK(kv_topology_check_group(&t, across, 2, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "GPUs 3 and 4 are not NVLink peers");
}

static void test_bad_pair_and_errors(void)
{
    char json[16384];
    kv_topology t;
    kv_err err = {{0}};
    report(json, sizeof json, 4, one_bad_pair);
    KV_REQUIRE(kv_topology_parse(json, &t, &err) == 0);
    int g[4][KV_GROUP_MAX_WORLD];
    /* greedy on the lowest numbers, but never a group with the bad pair */
    int n = kv_topology_groups(&t, 2, 4, g);
    KV_CHECK(n == 2);
    for (int i = 0; i < n; i++)
        KV_CHECK(!((g[i][0] == 1 && g[i][1] == 2) || (g[i][0] == 2 && g[i][1] == 1)));
    KV_CHECK(kv_topology_groups(&t, 4, 4, g) == 0);
    int bad[2] = {1, 2}, missing[2] = {0, 9}, twice[2] = {0, 0};
    KV_CHECK(kv_topology_check_group(&t, bad, 2, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "GPUs 1 and 2");
    KV_CHECK(kv_topology_check_group(&t, missing, 2, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "GPU 9 does not exist");
    KV_CHECK(kv_topology_check_group(&t, twice, 2, &err) == -1);
    /* no GPUs at all (the report of a machine without a driver) */
    KV_CHECK(kv_topology_parse("{\"error\":\"no driver\",\"cuda_driver\":0,\"cuda_runtime\":13000,"
                               "\"nccl\":22809,\"NCCL_NVLS_ENABLE\":\"\",\"devices\":[]}",
                               &t, &err) == 0 &&
             t.n == 0);
    KV_CHECK(kv_topology_groups(&t, 2, 4, g) == 0);
    KV_CHECK(kv_topology_parse("not json", &t, &err) == -1);
    KV_CHECK(kv_topology_parse("{}", &t, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "doctor report: $.");
    /* read strictly: a peer link of the wrong type is named, not read as false */
    report(json, sizeof json, 2, all_linked);
    char *at = strstr(json, "\"access\":\ttrue");
    KV_REQUIRE(at);
    memcpy(at + strlen("\"access\":\t"), "1   ", 4);
    KV_CHECK(kv_topology_parse(json, &t, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.devices[0].peers[0].access: expected a boolean");
    /* a GPU beyond those kevo handles */
    static char big[1 << 16];
    report(big, sizeof big, KV_TOPO_MAX_GPUS + 1, all_linked);
    KV_CHECK(kv_topology_parse(big, &t, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "GPU 16 is beyond the 16 kevo handles");
}

/* A worker whose --doctor ends as the shell script body says. */
static void probe_fails(const char *dir, const char *body, const char *says)
{
    char path[512], script[256];
    kv_err err = {{0}};
    snprintf(path, sizeof path, "%s/worker.sh", dir);
    snprintf(script, sizeof script, "#!/bin/sh\n%s\n", body);
    KV_REQUIRE(kv_write_file_atomic(path, script, strlen(script), &err) == 0);
    KV_REQUIRE(chmod(path, 0755) == 0);
    kv_topology t;
    KV_CHECK(kv_topology_probe(path, &t, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "worker.sh --doctor failed (");
    KV_CHECK_STR_CONTAINS(err.msg, says);
    KV_CHECKF(strstr(err.msg, "status 256") == NULL, "%s", err.msg);
}

/* The failure of kevo-worker --doctor is described, not a raw wait status. */
static void test_probe_failure(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "topology");
    probe_fails(dir, "exit 1", "(exited with status 1)");
    probe_fails(dir, "kill -9 $$", "(killed by signal 9 (");
    kv_test_rm_rf(dir);
}

int main(void)
{
    KV_RUN(test_all_to_all);
    KV_RUN(test_islands);
    KV_RUN(test_bad_pair_and_errors);
    KV_RUN(test_probe_failure);
    return kv_test_summary();
}
