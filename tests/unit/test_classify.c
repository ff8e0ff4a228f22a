/* test_classify.c — behaviour cells from saved evidence.
 *
 * The fixtures in tests/fixtures/classify/ were made from the real
 * candidates beside them (make_fixtures.sh: nvcc with kevo's flags,
 * cuobjdump -sass/-ptx, the undefined dynamic symbols); this test reads them
 * and needs no CUDA toolchain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "evaluator/checks/classify.h"
#include "common/fsutil.h"
#include "test.h"

typedef struct {
    char *sass, *ptx, *imports, *source;
} fixture;

static const char *root(void)
{
    const char *r = getenv("KEVO_SOURCE_DIR");
    return r && *r ? r : ".";
}

static char *load(const char *name, const char *ext)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/classify/%s.%s", root(), name, ext);
    char *text = NULL;
    kv_err err;
    if (kv_read_file(path, &text, NULL, &err) != 0) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        return NULL;
    }
    return text;
}

static int fixture_load(fixture *f, const char *name)
{
    f->sass = load(name, "sass");
    f->ptx = load(name, "ptx");
    f->imports = load(name, "imports");
    f->source = load(name, "cu");
    return f->sass && f->ptx && f->imports && f->source ? 0 : -1;
}

static void fixture_free(fixture *f)
{
    free(f->sass);
    free(f->ptx);
    free(f->imports);
    free(f->source);
    memset(f, 0, sizeof *f);
}

static kv_evidence evidence_of(const fixture *f)
{
    kv_evidence ev;
    memset(&ev, 0, sizeof ev);
    ev.sass = f->sass;
    ev.ptx = f->ptx;
    ev.imports = f->imports;
    ev.source = f->source;
    return ev;
}

/* 1 when the JSON array obj[name] holds a string equal to (or, with
 * prefix, starting with) want */
static int json_list_has(const cJSON *obj, const char *name, const char *want, int prefix)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, name);
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsString(it))
            continue;
        if (prefix ? strncmp(it->valuestring, want, strlen(want)) == 0
                   : strcmp(it->valuestring, want) == 0)
            return 1;
    }
    return 0;
}

static int json_list_len(const cJSON *obj, const char *name)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(obj, name));
}

static const char *json_str(const cJSON *obj, const char *name)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsString(s) ? s->valuestring : "";
}

/* Classifies a fixture without a graph; checks the cell and the NVLS guard. */
static void check_fixture(const char *name, kv_transport t, kv_fusion f, int nvls, cJSON **json)
{
    fixture fx;
    *json = NULL;
    KV_CHECKF(fixture_load(&fx, name) == 0, "%s", name);
    kv_evidence ev = evidence_of(&fx);
    kv_class c;
    kv_err err;
    KV_CHECK(kv_classify(&ev, &c, &err) == 0);
    KV_CHECKF(c.transport == t, "%s: transport %s, want %s", name, kv_transport_name(c.transport),
              kv_transport_name(t));
    KV_CHECKF(c.fusion == f, "%s: fusion %s, want %s", name, kv_fusion_name(c.fusion),
              kv_fusion_name(f));
    KV_CHECKF(c.uses_nvls == nvls, "%s: uses_nvls %d", name, c.uses_nvls);
    KV_CHECKF(kv_uses_nvls(&ev) == nvls, "%s: kv_uses_nvls", name);
    KV_CHECK(c.evidence_json != NULL);
    *json = cJSON_Parse(c.evidence_json ? c.evidence_json : "");
    KV_CHECKF(*json != NULL, "%s: evidence is not JSON: %s", name,
              c.evidence_json ? c.evidence_json : "(null)");
    if (*json) {
        KV_CHECK(strcmp(json_str(*json, "transport"), kv_transport_name(t)) == 0);
        KV_CHECK(strcmp(json_str(*json, "fusion"), kv_fusion_name(f)) == 0);
    }
    kv_class_free(&c);
    KV_CHECK(c.evidence_json == NULL);
    fixture_free(&fx);
}

static void test_sm_copy(void)
{
    cJSON *j;
    check_fixture("sm_copy", KV_TRANSPORT_SM, KV_FUSION_FUSED, 0, &j);
    KV_CHECK(json_list_has(j, "kernels", "_Z9peer_copy", 1));
    KV_CHECK(json_list_len(j, "kernels") == 1);
    KV_CHECK(json_list_len(j, "sass_tma") == 0);
    KV_CHECK(json_list_len(j, "ptx") == 0);
    KV_CHECK(strcmp(json_str(j, "reason"), "kernels") == 0);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "graph");
    KV_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(g, "captured")));
    cJSON_Delete(j);
}

static void test_tma(void)
{
    cJSON *j;
    check_fixture("tma_copy", KV_TRANSPORT_TMA, KV_FUSION_FUSED, 0, &j);
    KV_CHECK(json_list_has(j, "sass_tma", "UBLKCP", 0));
    KV_CHECK(json_list_has(j, "ptx",
                           "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", 0));
    KV_CHECK(json_list_has(j, "ptx", "cp.async.bulk.global.shared::cta.bulk_group", 0));
    KV_CHECK(json_list_len(j, "sass_multimem") == 0);
    cJSON_Delete(j);

    /* the SASS alone is enough, and so is the PTX alone */
    fixture fx;
    KV_REQUIRE(fixture_load(&fx, "tma_copy") == 0);
    kv_evidence ev = evidence_of(&fx);
    kv_class c;
    ev.ptx = NULL;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_TMA && c.uses_tma);
    kv_class_free(&c);
    ev.ptx = fx.ptx;
    ev.sass = NULL;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_TMA);
    kv_class_free(&c);
    fixture_free(&fx);
}

static void test_ce(void)
{
    cJSON *j;
    check_fixture("ce_memcpy", KV_TRANSPORT_CE, KV_FUSION_UNFUSED, 0, &j);
    KV_CHECK(json_list_has(j, "imports", "cudaMemcpyAsync", 0));
    KV_CHECK(json_list_len(j, "kernels") == 0);
    KV_CHECK(strcmp(json_str(j, "reason"), "memcpy") == 0);
    /* cudart's own registration symbols are not shown */
    KV_CHECK(!json_list_has(j, "imports", "__cudaRegisterFatBinary", 0));
    cJSON_Delete(j);

    fixture fx;
    KV_REQUIRE(fixture_load(&fx, "ce_memcpy") == 0);
    kv_evidence ev = evidence_of(&fx);
    kv_class c;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.uses_copy_engine && !c.has_kernels);
    kv_class_free(&c);
    fixture_free(&fx);
}

static void test_nvls(void)
{
    cJSON *j;
    check_fixture("nvls_multimem", KV_TRANSPORT_NVLS, KV_FUSION_FUSED, 1, &j);
    KV_CHECK(json_list_has(j, "sass_multimem", "LDGMC", 0));
    KV_CHECK(json_list_has(j, "ptx", "multimem.ld_reduce.relaxed.sys.global.add.f32", 0));
    KV_CHECK(json_list_has(j, "source_nvls", "multimem.", 0));
    cJSON_Delete(j);

    /* multimem.st / multimem.red are plain STG / REDG in sm_90a SASS: the
     * PTX is the witness */
    check_fixture("nvls_store", KV_TRANSPORT_NVLS, KV_FUSION_FUSED, 1, &j);
    KV_CHECK(json_list_len(j, "sass_multimem") == 0);
    KV_CHECK(json_list_has(j, "ptx", "multimem.st.relaxed.sys.global.f32", 0));
    KV_CHECK(json_list_has(j, "ptx", "multimem.red.release.sys.global.add.u32", 0));
    cJSON_Delete(j);

    /* the guard, from each kind of evidence alone */
    fixture fx;
    KV_REQUIRE(fixture_load(&fx, "nvls_store") == 0);
    kv_evidence ev;
    memset(&ev, 0, sizeof ev);
    ev.ptx = fx.ptx;
    KV_CHECK(kv_uses_nvls(&ev));
    ev.ptx = NULL;
    ev.sass = fx.sass; /* STG/REDG only */
    KV_CHECK(!kv_uses_nvls(&ev));
    fixture_free(&fx);

    memset(&ev, 0, sizeof ev);
    ev.imports = "cudaLaunchKernel\ncuMulticastCreate\ncuMulticastBindMem\n";
    KV_CHECK(kv_uses_nvls(&ev));
    kv_class c;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_NVLS);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "cuMulticastCreate");
    kv_class_free(&c);

    memset(&ev, 0, sizeof ev);
    ev.source = "void *fn; cudaGetDriverEntryPoint(\"cuMulticastCreate\", &fn, 0, 0);";
    KV_CHECK(kv_uses_nvls(&ev));
    ev.source = "__global__ void k(float *p) { p[0] = 1.f; }";
    KV_CHECK(!kv_uses_nvls(&ev));
    memset(&ev, 0, sizeof ev);
    KV_CHECK(!kv_uses_nvls(&ev));
}

static void test_nccl(void)
{
    cJSON *j;
    check_fixture("nccl_allreduce", KV_TRANSPORT_SM, KV_FUSION_UNFUSED, 0, &j);
    KV_CHECK(strcmp(json_str(j, "reason"), "nccl") == 0);
    KV_CHECK(json_list_has(j, "nccl", "ncclAllReduce", 0));
    KV_CHECK(json_list_has(j, "imports", "ncclAllReduce", 0));
    KV_CHECK(json_list_len(j, "kernels") == 0);
    cJSON_Delete(j);
}

static void test_two_kernels(void)
{
    cJSON *j;
    check_fixture("two_kernels", KV_TRANSPORT_SM, KV_FUSION_UNFUSED, 0, &j);
    KV_CHECK(json_list_len(j, "kernels") == 2);
    KV_CHECK(json_list_has(j, "kernels", "_Z4pull", 1));
    KV_CHECK(json_list_has(j, "kernels", "_Z5scale", 1));
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "kernel_count")) == 2);
    cJSON_Delete(j);
}

/* the launch graph decides fusion when it was captured */
static void test_graph(void)
{
    fixture sm, two, ce, nccl;
    KV_REQUIRE(fixture_load(&sm, "sm_copy") == 0);
    KV_REQUIRE(fixture_load(&two, "two_kernels") == 0);
    KV_REQUIRE(fixture_load(&ce, "ce_memcpy") == 0);
    KV_REQUIRE(fixture_load(&nccl, "nccl_allreduce") == 0);
    kv_class c;

    kv_evidence ev = evidence_of(&sm);
    ev.graph_captured = 1;
    ev.kernel_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_FUSED);
    cJSON *j = cJSON_Parse(c.evidence_json);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "graph");
    KV_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "captured")));
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(g, "kernels")) == 1);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(g, "memcpy")) == 0);
    cJSON_Delete(j);
    kv_class_free(&c);

    /* one kernel launched twice: not one kernel doing all the work */
    ev.kernel_nodes = 2;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_UNFUSED);
    kv_class_free(&c);

    /* kernel + memcpy nodes: unfused; the copy makes it use the copy
     * engine, but its own kernel keeps the transport sm */
    ev.kernel_nodes = 1;
    ev.memcpy_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_UNFUSED);
    KV_CHECK(c.transport == KV_TRANSPORT_SM && c.uses_copy_engine);
    kv_class_free(&c);

    /* kernel + memset: unfused */
    ev.memcpy_nodes = 0;
    ev.memset_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_UNFUSED);
    kv_class_free(&c);

    /* two kernels in the .so, one launched: fused */
    ev = evidence_of(&two);
    ev.graph_captured = 1;
    ev.kernel_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_FUSED &&
             c.transport == KV_TRANSPORT_SM);
    kv_class_free(&c);

    /* the copy engine: one memcpy node is not a fused kernel */
    ev = evidence_of(&ce);
    ev.graph_captured = 1;
    ev.memcpy_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_CE &&
             c.fusion == KV_FUSION_UNFUSED);
    kv_class_free(&c);

    /* memcpy nodes with no imports at all (e.g. through a driver entry point) */
    kv_evidence bare;
    memset(&bare, 0, sizeof bare);
    bare.sass = ce.sass; /* no functions */
    bare.graph_captured = 1;
    bare.memcpy_nodes = 3;
    KV_CHECK(kv_classify(&bare, &c, NULL) == 0 && c.transport == KV_TRANSPORT_CE);
    kv_class_free(&c);

    /* no SASS available: kernels in the graph make it sm */
    memset(&bare, 0, sizeof bare);
    bare.graph_captured = 1;
    bare.kernel_nodes = 1;
    KV_CHECK(kv_classify(&bare, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM &&
             c.fusion == KV_FUSION_FUSED && c.has_kernels);
    kv_class_free(&c);

    /* kernels of its own (barriers, a local reduction) around copies from
     * a peer: the copy engine moves the data */
    ev = evidence_of(&two);
    ev.graph_captured = 1;
    ev.kernel_nodes = 2;
    ev.memcpy_nodes = 1;
    ev.peer_copy_bytes = 1 << 20;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_CE &&
             c.fusion == KV_FUSION_UNFUSED);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "peer memcpy");
    kv_class_free(&c);
    /* the same with only local copies stays sm */
    ev.peer_copy_bytes = 0;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM);
    kv_class_free(&c);

    /* NCCL: its kernel is in the graph but not in the SASS; still sm */
    ev = evidence_of(&nccl);
    ev.graph_captured = 1;
    ev.kernel_nodes = 1;
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "\"nccl\"");
    kv_class_free(&c);

    fixture_free(&sm);
    fixture_free(&two);
    fixture_free(&ce);
    fixture_free(&nccl);
}

/* hand-written evidence: opcode parsing, nm-style imports, no evidence */
static void test_synthetic(void)
{
    kv_evidence ev;
    kv_class c;
    memset(&ev, 0, sizeof ev);
    ev.sass =
        "\t\tFunction : _Z3tmaP14CUtensorMap_st\n"
        "        /*0090*/               @P0 UTMALDG.2D [UR8], [UR4] ;   /* 0x00000008040075b4 */\n"
        "        /*00a0*/                   UTMASTG.2D [UR4], [UR8] ;   /* 0x00000004080073b5 */\n"
        "        /*00b0*/                   EXIT ;                      /* 0x000000000000794d */\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_TMA &&
             c.fusion == KV_FUSION_FUSED);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "\"UTMALDG\"");
    KV_CHECK_STR_CONTAINS(c.evidence_json, "\"UTMASTG\"");
    KV_CHECK_STR_CONTAINS(c.evidence_json, "_Z3tmaP14CUtensorMap_st");
    kv_class_free(&c);

    /* an opcode named only in a comment or an operand is no evidence */
    ev.sass = "        /*0000*/                   MOV R1, UBLKCP_NOT_AN_OPCODE ; /* 0x0 */\n"
              "// UTMALDG in a note\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM && !c.uses_tma);
    kv_class_free(&c);

    /* nm's format, with versions; a kernel of its own and a cuBLAS call */
    memset(&ev, 0, sizeof ev);
    ev.imports = "                 U cudaMemcpyPeerAsync@libcudart.so.13\n"
                 "                 w __gmon_start__\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_CE &&
             c.fusion == KV_FUSION_UNFUSED);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "\"cudaMemcpyPeerAsync\"");
    kv_class_free(&c);

    ev.sass = "\t\tFunction : _Z1kPf\n";
    ev.imports = "cublasCreate_v2\ncublasSetStream_v2\ncublasGemmEx\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM &&
             c.fusion == KV_FUSION_UNFUSED);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "\"cublasGemmEx\"");
    kv_class_free(&c);
    ev.imports = "cublasCreate_v2\ncublasSetStream_v2\n"; /* handle management only */
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_FUSED);
    kv_class_free(&c);

    /* statically, one kernel templated on W is one kernel; two kernels are not */
    memset(&ev, 0, sizeof ev);
    ev.sass = "\t\tFunction : _ZN12_GLOBAL__N_19allreduceILi2EEEv4Args\n"
              "\t\tFunction : _ZN12_GLOBAL__N_19allreduceILi8EEEv4Args\n"
              "\t\tFunction : _Z9allreduceILi4EEv4Args\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_UNFUSED); /* two names */
    kv_class_free(&c);
    ev.sass = "\t\tFunction : _ZN12_GLOBAL__N_19allreduceILi2EEEv4Args\n"
              "\t\tFunction : _ZN12_GLOBAL__N_19allreduceILi8EEEv4Args\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_FUSED);
    KV_CHECK_STR_CONTAINS(c.evidence_json, "allreduceILi8EEEv4Args"); /* every instance listed */
    kv_class_free(&c);
    ev.sass = "\t\tFunction : _Z9allreduceILi2EEv4Args\n"
              "\t\tFunction : _Z4packPKfPf\n"
              "\t\tFunction : kevo_barrier\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_UNFUSED);
    kv_class_free(&c);
    ev.sass = "\t\tFunction : _Z99broken\n"; /* a length past the end: the name itself */
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.fusion == KV_FUSION_FUSED);
    kv_class_free(&c);

    /* constant uploads are not a transport */
    memset(&ev, 0, sizeof ev);
    ev.imports = "cudaMemcpyToSymbolAsync\n";
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM &&
             !c.uses_copy_engine);
    kv_class_free(&c);

    /* nothing at all */
    memset(&ev, 0, sizeof ev);
    KV_CHECK(kv_classify(&ev, &c, NULL) == 0 && c.transport == KV_TRANSPORT_SM &&
             c.fusion == KV_FUSION_UNFUSED && !c.has_kernels);
    cJSON *j = cJSON_Parse(c.evidence_json);
    KV_CHECK(j != NULL);
    KV_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "sass_seen")));
    cJSON_Delete(j);
    kv_class_free(&c);
    kv_class_free(&c); /* twice is harmless */
}

static void test_machine_policy(void)
{
    char *saved = getenv("NCCL_NVLS_ENABLE") ? strdup(getenv("NCCL_NVLS_ENABLE")) : NULL;
    KV_CHECK(unsetenv("NCCL_NVLS_ENABLE") == 0);
    KV_CHECK(kv_machine_allows_nvls() == 1);
    KV_CHECK(setenv("NCCL_NVLS_ENABLE", "0", 1) == 0);
    KV_CHECK(kv_machine_allows_nvls() == 0);
    KV_CHECK(setenv("NCCL_NVLS_ENABLE", " 0 ", 1) == 0);
    KV_CHECK(kv_machine_allows_nvls() == 0);
    KV_CHECK(setenv("NCCL_NVLS_ENABLE", "1", 1) == 0);
    KV_CHECK(kv_machine_allows_nvls() == 1);
    KV_CHECK(setenv("NCCL_NVLS_ENABLE", "", 1) == 0);
    KV_CHECK(kv_machine_allows_nvls() == 1);
    if (saved) {
        setenv("NCCL_NVLS_ENABLE", saved, 1);
        free(saved);
    } else {
        unsetenv("NCCL_NVLS_ENABLE");
    }
}

int main(void)
{
    KV_RUN(test_sm_copy);
    KV_RUN(test_tma);
    KV_RUN(test_ce);
    KV_RUN(test_nvls);
    KV_RUN(test_nccl);
    KV_RUN(test_two_kernels);
    KV_RUN(test_graph);
    KV_RUN(test_synthetic);
    KV_RUN(test_machine_policy);
    return kv_test_summary();
}
