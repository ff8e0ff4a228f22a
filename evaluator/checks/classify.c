/* classify.c — a candidate's behaviour cell from evidence.
 *
 * Transport, first match wins:
 *   nvls  multimem: a multicast SASS opcode (LDGMC on sm_90, anything named
 *         MULTIMEM), a PTX "multimem." instruction (multimem.st/.red compile
 *         to plain STG/REDG on sm_90, so the PTX is the reliable witness),
 *         or cuMulticast* in the imports or the source;
 *   tma   bulk/tensor async copies: SASS UBLK* / UTMA* opcodes (UBLKCP,
 *         UBLKRED, UTMALDG, UTMASTG, UTMAREDG, UTMAPF, ...) or PTX
 *         "cp.async.bulk" / "cp.reduce.async.bulk";
 *   sm    the .so has kernels of its own (SASS "Function :" headers), or
 *         there is no SASS and the graph launched kernels;
 *   ce    memcpy imports (cudaMemcpy*, cuMemcpy*) or memcpy nodes, and no
 *         kernels of its own;
 *   sm    otherwise: NCCL collectives on Hopper move data with SM loads and
 *         stores ("reason": "nccl"), and so does anything else we cannot see.
 * Fusion: fused when the captured graph has exactly one node and it is a
 * kernel; without a graph, when the SASS has exactly one kernel function (the
 * template instances of one kernel count once) and there are no memcpy, NCCL
 * or cuBLAS compute imports. */
#include "common/json_out.h"
#include "evaluator/checks/classify.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define MAX_LIST 32 /* entries kept per evidence list */

/* ---- string lists --------------------------------------------------------- */

typedef struct {
    char *v[MAX_LIST];
    int n;
    int more; /* matches past MAX_LIST */
} strlist;

static int list_has(const strlist *l, const char *s, size_t n)
{
    for (int i = 0; i < l->n; i++)
        if (strlen(l->v[i]) == n && memcmp(l->v[i], s, n) == 0)
            return 1;
    return 0;
}

/* Adds [s, s+n) unless present; -1 when out of memory. */
static int list_add(strlist *l, const char *s, size_t n)
{
    if (list_has(l, s, n))
        return 0;
    if (l->n == MAX_LIST) {
        l->more++;
        return 0;
    }
    char *c = malloc(n + 1);
    if (!c)
        return -1;
    memcpy(c, s, n);
    c[n] = '\0';
    l->v[l->n++] = c;
    return 0;
}

static void list_free(strlist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

/* ---- line iteration ------------------------------------------------------- */

/* Calls fn on every line of text; stops at the first nonzero return. */
typedef int (*line_fn)(void *ctx, const char *s, const char *e);

static int each_line(const char *text, line_fn fn, void *ctx)
{
    if (!text)
        return 0;
    const char *s = text;
    while (*s) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        int rc = fn(ctx, s, e);
        if (rc)
            return rc;
        s = *e ? e + 1 : e;
    }
    return 0;
}

static const char *skip_space(const char *s, const char *e)
{
    while (s < e && isspace((unsigned char)*s))
        s++;
    return s;
}

static int starts(const char *s, const char *e, const char *prefix)
{
    size_t n = strlen(prefix);
    return (size_t)(e - s) >= n && memcmp(s, prefix, n) == 0;
}

static const char *find_in(const char *s, const char *e, const char *needle)
{
    size_t n = strlen(needle);
    for (; (size_t)(e - s) >= n; s++)
        if (memcmp(s, needle, n) == 0)
            return s;
    return NULL;
}

/* ---- SASS ------------------------------------------------------------------ */

typedef struct {
    strlist tma, multimem, kernels, families;
    int n_kernels;
    int oom;
} sass_scan;

/* The function a kernel was instantiated from: its mangled name up to the
 * template arguments ("_Z9allreduceILi2EEv4Args" and "_Z9allreduceILi4EEv4Args"
 * share "_Z9allreduce"). A kernel templated on W compiles to one SASS function
 * per W, yet a call launches only one of them. Returns the prefix's length. */
static size_t kernel_family_len(const char *n, size_t len)
{
    if (len < 3 || n[0] != '_' || n[1] != 'Z')
        return len; /* extern "C" or unmangled: the name itself */
    size_t i = 2;
    int nested = i < len && n[i] == 'N';
    if (nested)
        i++;
    do {
        if (i >= len || !isdigit((unsigned char)n[i]))
            break;
        size_t id = 0;
        while (i < len && isdigit((unsigned char)n[i]))
            id = id * 10 + (size_t)(n[i++] - '0');
        if (id > len - i)
            return len;
        i += id;
    } while (nested);
    return i;
}

static int is_multimem_opcode(const char *op, size_t n)
{
    static const char *const mc[] = {"LDGMC", "STGMC", "REDGMC", "ATOMGMC", "REDMC", "STMC"};
    for (size_t i = 0; i < sizeof mc / sizeof mc[0]; i++)
        if (strlen(mc[i]) == n && memcmp(op, mc[i], n) == 0)
            return 1;
    for (size_t i = 0; i + 8 <= n; i++)
        if (memcmp(op + i, "MULTIMEM", 8) == 0)
            return 1;
    return 0;
}

static int sass_line(void *ctx, const char *s, const char *e)
{
    sass_scan *sc = ctx;
    s = skip_space(s, e);
    if (starts(s, e, "Function :")) {
        const char *n = skip_space(s + 10, e);
        const char *ne = n;
        while (ne < e && !isspace((unsigned char)*ne))
            ne++;
        if (ne > n) {
            sc->n_kernels++;
            sc->oom |= list_add(&sc->kernels, n, (size_t)(ne - n));
            sc->oom |= list_add(&sc->families, n, kernel_family_len(n, (size_t)(ne - n)));
        }
        return 0;
    }
    /* an address comment, an optional predicate (@!P0), OPCODE.MODS, the
     * operands and an encoding comment */
    if (!starts(s, e, "/*"))
        return 0;
    const char *q = s + 2;
    while (q < e && isxdigit((unsigned char)*q))
        q++;
    if (q == s + 2 || !starts(q, e, "*/"))
        return 0;
    q = skip_space(q + 2, e);
    if (q < e && *q == '@') { /* predicate */
        while (q < e && !isspace((unsigned char)*q))
            q++;
        q = skip_space(q, e);
    }
    const char *op = q;
    while (q < e && (isalnum((unsigned char)*q) || *q == '_'))
        q++;
    size_t n = (size_t)(q - op);
    if (n == 0)
        return 0;
    if (starts(op, e, "UBLK") || starts(op, e, "UTMA"))
        sc->oom |= list_add(&sc->tma, op, n);
    else if (is_multimem_opcode(op, n))
        sc->oom |= list_add(&sc->multimem, op, n);
    return 0;
}

/* ---- PTX ------------------------------------------------------------------- */

typedef struct {
    strlist found; /* instruction mnemonics */
    int tma, multimem;
    int oom;
} ptx_scan;

static int ptx_line(void *ctx, const char *s, const char *e)
{
    ptx_scan *sc = ctx;
    s = skip_space(s, e);
    if (starts(s, e, "//"))
        return 0;
    static const struct {
        const char *needle;
        int multimem;
    } pats[] = {
        {"multimem.", 1},
        {"cp.async.bulk", 0},
        {"cp.reduce.async.bulk", 0},
    };
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        const char *m = find_in(s, e, pats[i].needle);
        if (!m || (m > s && (isalnum((unsigned char)m[-1]) || m[-1] == '_')))
            continue;
        /* cp.async.bulk inside a multimem instruction counts as multimem */
        if (!pats[i].multimem && m >= s + 9 && memcmp(m - 9, "multimem.", 9) == 0)
            continue;
        const char *me = m;
        while (me < e && !isspace((unsigned char)*me) && *me != ';')
            me++;
        if (pats[i].multimem)
            sc->multimem = 1;
        else
            sc->tma = 1;
        sc->oom |= list_add(&sc->found, m, (size_t)(me - m));
        break;
    }
    return 0;
}

/* ---- imports ----------------------------------------------------------------- */

typedef struct {
    strlist shown; /* the imports that matter to classification */
    strlist nccl, cublas, memcpy_, multicast;
    int oom;
} import_scan;

static int is_memcpy_import(const char *s, size_t n)
{
    char name[128];
    if (n >= sizeof name)
        return 0;
    memcpy(name, s, n);
    name[n] = '\0';
    if (strncmp(name, "cuMemcpy", 8) == 0)
        return 1;
    if (strncmp(name, "cudaMemcpy", 10) != 0)
        return 0;
    /* constant-memory uploads are set-up, not a transport */
    return strstr(name, "Symbol") == NULL;
}

static int is_nccl_collective(const char *s, size_t n)
{
    static const char *const ops[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                      "Bcast",     "Reduce",    "Send",          "Recv",
                                      "AlltoAll",  "AllToAll",  "Gather",        "Scatter",
                                      "AlltoAllv", "AllToAllv"};
    if (n <= 4 || memcmp(s, "nccl", 4) != 0)
        return 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strlen(ops[i]) == n - 4 && memcmp(s + 4, ops[i], n - 4) == 0)
            return 1;
    return 0;
}

/* cuBLAS calls that launch work (not handle or mode management) */
static int is_cublas_compute(const char *s, size_t n)
{
    if (n <= 6 || memcmp(s, "cublas", 6) != 0)
        return 0;
    static const char *const admin[] = {"Create",
                                        "Destroy",
                                        "Set",
                                        "Get",
                                        "LtCreate",
                                        "LtDestroy",
                                        "LtMatmulDesc",
                                        "LtMatrixLayout",
                                        "LtMatmulPreference",
                                        "LtMatmulAlgoGetHeuristic",
                                        "LtGet",
                                        "LtSet"};
    const char *r = s + 6;
    size_t rn = n - 6;
    /* versioned symbols: cublasCreate_v2 and the like */
    for (size_t i = 0; i < sizeof admin / sizeof admin[0]; i++) {
        size_t an = strlen(admin[i]);
        if (rn >= an && memcmp(r, admin[i], an) == 0)
            return 0;
    }
    return 1;
}

const char *kv_import_symbol(const char *s, const char *e, size_t *len)
{
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    const char *b = e;
    while (b > s && !isspace((unsigned char)b[-1]))
        b--;
    const char *at = memchr(b, '@', (size_t)(e - b));
    *len = (size_t)((at ? at : e) - b);
    return b;
}

static int import_line(void *ctx, const char *s, const char *e)
{
    import_scan *sc = ctx;
    size_t n;
    const char *b = kv_import_symbol(s, e, &n);
    if (n == 0)
        return 0;
    if (is_memcpy_import(b, n)) {
        sc->oom |= list_add(&sc->memcpy_, b, n);
        sc->oom |= list_add(&sc->shown, b, n);
    } else if (is_nccl_collective(b, n)) {
        sc->oom |= list_add(&sc->nccl, b, n);
        sc->oom |= list_add(&sc->shown, b, n);
    } else if (is_cublas_compute(b, n)) {
        sc->oom |= list_add(&sc->cublas, b, n);
        sc->oom |= list_add(&sc->shown, b, n);
    } else if (n >= 11 && memcmp(b, "cuMulticast", 11) == 0) {
        sc->oom |= list_add(&sc->multicast, b, n);
        sc->oom |= list_add(&sc->shown, b, n);
    }
    return 0;
}

/* ---- source ------------------------------------------------------------------ */

static const char *const source_nvls_names[] = {"cuMulticast", "multimem.", "lsaMultimem",
                                                "MultimemPointer"};

static int source_nvls(const char *src, strlist *found, int *oom)
{
    int hit = 0;
    if (!src)
        return 0;
    for (size_t i = 0; i < sizeof source_nvls_names / sizeof source_nvls_names[0]; i++) {
        if (strstr(src, source_nvls_names[i])) {
            hit = 1;
            if (found && list_add(found, source_nvls_names[i], strlen(source_nvls_names[i])))
                *oom = 1;
        }
    }
    return hit;
}

/* ---- all evidence -------------------------------------------------------------- */

typedef struct {
    sass_scan sass;
    ptx_scan ptx;
    import_scan imp;
    strlist src_nvls;
    int oom;
} scan;

static void scan_free(scan *s)
{
    list_free(&s->sass.tma);
    list_free(&s->sass.multimem);
    list_free(&s->sass.kernels);
    list_free(&s->sass.families);
    list_free(&s->ptx.found);
    list_free(&s->imp.shown);
    list_free(&s->imp.nccl);
    list_free(&s->imp.cublas);
    list_free(&s->imp.memcpy_);
    list_free(&s->imp.multicast);
    list_free(&s->src_nvls);
}

static int scan_all(const kv_evidence *ev, scan *s)
{
    memset(s, 0, sizeof *s);
    each_line(ev->sass, sass_line, &s->sass);
    each_line(ev->ptx, ptx_line, &s->ptx);
    each_line(ev->imports, import_line, &s->imp);
    source_nvls(ev->source, &s->src_nvls, &s->oom);
    s->oom |= s->sass.oom | s->ptx.oom | s->imp.oom;
    return s->oom ? -1 : 0;
}

static int nvls_of(const scan *s)
{
    return s->sass.multimem.n > 0 || s->ptx.multimem || s->imp.multicast.n > 0 || s->src_nvls.n > 0;
}

int kv_uses_nvls(const kv_evidence *ev)
{
    scan s;
    int oom = scan_all(ev, &s) != 0;
    int r = nvls_of(&s);
    scan_free(&s);
    /* out of memory: say yes, the guard then refuses, which is the safe side */
    return r || oom;
}

void kv_class_free(kv_class *c)
{
    if (!c)
        return;
    free(c->evidence_json);
    c->evidence_json = NULL;
}

static int add_list(cJSON *obj, const char *name, const strlist *l)
{
    cJSON *a = cJSON_AddArrayToObject(obj, name);
    if (!a)
        return -1;
    for (int i = 0; i < l->n; i++) {
        cJSON *str = cJSON_CreateString(l->v[i]);
        if (!str || !cJSON_AddItemToArray(a, str)) {
            cJSON_Delete(str);
            return -1;
        }
    }
    if (l->more > 0) {
        cJSON *str = cJSON_CreateString("...");
        if (!str || !cJSON_AddItemToArray(a, str)) {
            cJSON_Delete(str);
            return -1;
        }
    }
    return 0;
}

int kv_classify(const kv_evidence *ev, kv_class *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    scan s;
    if (scan_all(ev, &s) != 0) {
        scan_free(&s);
        return kv_err_set(err, "classify: out of memory");
    }

    int own_kernels = s.sass.n_kernels;
    int graph_kernels = ev->graph_captured ? ev->kernel_nodes : 0;
    int memcpy_evidence = s.imp.memcpy_.n > 0 || (ev->graph_captured && ev->memcpy_nodes > 0);
    const char *reason;

    out->uses_nvls = nvls_of(&s);
    out->uses_tma = s.sass.tma.n > 0 || s.ptx.tma;
    out->uses_copy_engine = memcpy_evidence;
    out->has_kernels = own_kernels > 0 || graph_kernels > 0;

    if (out->uses_nvls) {
        out->transport = KV_TRANSPORT_NVLS;
        reason = "multimem";
    } else if (out->uses_tma) {
        out->transport = KV_TRANSPORT_TMA;
        reason = "bulk async copies";
    } else if (ev->graph_captured && ev->peer_copy_bytes > 0) {
        /* copies between GPUs in the captured call: the copy engine moves
         * the data, whatever local kernels (reductions, flags) surround it */
        out->transport = KV_TRANSPORT_CE;
        reason = "peer memcpy";
    } else if (own_kernels > 0 || (!ev->sass && graph_kernels > 0)) {
        out->transport = KV_TRANSPORT_SM;
        reason = "kernels";
    } else if (memcpy_evidence) {
        out->transport = KV_TRANSPORT_CE;
        reason = "memcpy";
    } else {
        out->transport = KV_TRANSPORT_SM;
        reason = s.imp.nccl.n > 0 ? "nccl" : "no evidence of another transport";
    }

    if (ev->graph_captured) {
        int nodes = ev->kernel_nodes + ev->memcpy_nodes + ev->memset_nodes + ev->other_nodes;
        out->fusion = nodes == 1 && ev->kernel_nodes == 1 ? KV_FUSION_FUSED : KV_FUSION_UNFUSED;
    } else {
        /* statically: one kernel function (in any number of template instances) */
        int families = s.sass.families.n + s.sass.families.more;
        out->fusion =
            families == 1 && s.imp.memcpy_.n == 0 && s.imp.nccl.n == 0 && s.imp.cublas.n == 0
                ? KV_FUSION_FUSED
                : KV_FUSION_UNFUSED;
    }

    cJSON *j = cJSON_CreateObject();
    int bad = !j;
    if (!bad) {
        bad |= !cJSON_AddStringToObject(j, "transport", kv_transport_name(out->transport));
        bad |= !cJSON_AddStringToObject(j, "fusion", kv_fusion_name(out->fusion));
        bad |= !cJSON_AddStringToObject(j, "reason", reason);
        bad |= add_list(j, "sass_tma", &s.sass.tma);
        bad |= add_list(j, "sass_multimem", &s.sass.multimem);
        bad |= add_list(j, "ptx", &s.ptx.found);
        bad |= add_list(j, "imports", &s.imp.shown);
        if (s.imp.nccl.n > 0)
            bad |= add_list(j, "nccl", &s.imp.nccl);
        if (s.imp.cublas.n > 0)
            bad |= add_list(j, "cublas", &s.imp.cublas);
        if (s.src_nvls.n > 0)
            bad |= add_list(j, "source_nvls", &s.src_nvls);
        bad |= add_list(j, "kernels", &s.sass.kernels);
        bad |= !cJSON_AddNumberToObject(j, "kernel_count", s.sass.n_kernels);
        cJSON *g = cJSON_AddObjectToObject(j, "graph");
        bad |= !g;
        if (g) {
            bad |= !cJSON_AddBoolToObject(g, "captured", ev->graph_captured != 0);
            if (ev->graph_captured) {
                bad |= !cJSON_AddNumberToObject(g, "kernels", ev->kernel_nodes);
                bad |= !cJSON_AddNumberToObject(g, "memcpy", ev->memcpy_nodes);
                bad |= !cJSON_AddNumberToObject(g, "peer_copy_bytes", ev->peer_copy_bytes);
                bad |= !cJSON_AddNumberToObject(g, "memset", ev->memset_nodes);
                bad |= !cJSON_AddNumberToObject(g, "other", ev->other_nodes);
            }
        }
        bad |= !cJSON_AddBoolToObject(j, "sass_seen", ev->sass != NULL);
        bad |= !cJSON_AddBoolToObject(j, "ptx_seen", ev->ptx != NULL);
    }
    if (!bad)
        bad = !(out->evidence_json = kv_json_print(j, 0, NULL));
    cJSON_Delete(j);
    scan_free(&s);
    if (bad) {
        kv_class_free(out);
        return kv_err_set(err, "classify: out of memory");
    }
    return 0;
}
