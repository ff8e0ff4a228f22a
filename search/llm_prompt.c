/* llm_prompt.c — what an LLM request shows the model (mutate/prompt.h
 * lays it out): the problem, the machine, the ABI, the parent with its
 * evaluation from the archive, inspirations from other cells and islands,
 * the target cell, and the pattern headers that matter to the parent. The
 * ABI and the headers are read once, when the run opens. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/evaluator.h"
#include "common/fsutil.h"
#include "common/machine.h"
#include "common/strbuf.h"
#include "mutate/prompt.h"
#include "search/run_state.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct kv_run_header *)a)->name, ((const struct kv_run_header *)b)->name);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n > k && strcmp(s + n - k, tail) == 0;
}

/* Every .cuh file of patterns_root, sorted by name. */
static int load_headers(kv_run_llm_text *x, const char *root, kv_err *err)
{
    DIR *d = opendir(root);
    if (!d)
        return kv_err_errno(err, errno, "%s (the pattern headers LLM prompts show)", root);
    struct dirent *e;
    int rc = 0, cap = 0;
    errno = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".cuh") || strlen(e->d_name) >= KV_NAME_MAX)
            continue;
        if (x->n_headers == cap) {
            cap = cap ? 2 * cap : 16;
            void *grown = realloc(x->headers, sizeof *x->headers * (size_t)cap);
            if (!grown) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            x->headers = grown;
        }
        struct kv_run_header *h = &x->headers[x->n_headers];
        char path[PATH_MAX];
        memcpy(h->name, e->d_name, strlen(e->d_name) + 1); /* shorter than KV_NAME_MAX */
        size_t len;
        if (kv_path_join(path, sizeof path, root, e->d_name, err) != 0 ||
            kv_read_file_max(path, KV_MAX_SOURCE_BYTES, &h->text, &len, err) != 0)
            rc = -1;
        else
            x->n_headers++;
        errno = 0;
    }
    if (rc == 0 && errno != 0)
        rc = kv_err_errno(err, errno, "reading %s", root);
    closedir(d);
    if (rc == 0 && x->n_headers == 0)
        rc = kv_err_set(err, "%s holds no pattern headers (*.cuh), which LLM prompts show", root);
    if (rc == 0)
        qsort(x->headers, (size_t)x->n_headers, sizeof *x->headers, by_name);
    return rc;
}

int kv_run_llm_text_load(kv_run *r, kv_err *err)
{
    kv_run_llm_text *x = &r->text;
    const kv_search_env *env = r->env;
    size_t len;
    if (!env->abi_path)
        return kv_err_set(err, "the LLM mutator needs docs/abi.md, and no path to it was given");
    if (kv_read_file_max(env->abi_path, KV_MAX_SOURCE_BYTES, &x->abi, &len, err) != 0)
        return kv_err_prefix(err, "the ABI that LLM prompts show");
    if (load_headers(x, env->patterns_root, err) != 0)
        return -1;
    snprintf(x->machine, sizeof x->machine,
             "One node of NVIDIA Hopper GPUs (sm_90a). A candidate runs on %d of them, one process "
             "per GPU; any two of them are NVLink peers (loads, stores and native atomics to "
             "each other's memory). The rooflines in the feedback use these ceilings per GPU: "
             "NVLink %.0f GB/s each way, HBM %.0f GB/s (read + write), %.0f TFLOP/s dense bf16, "
             "L2 %u MiB.",
             r->cfg->world, KV_LINK_BYTES_PER_S * 1e-9, KV_HBM_BYTES_PER_S * 1e-9,
             KV_BF16_FLOPS_PER_S * 1e-12, KV_L2_BYTES >> 20);
    return 0;
}

void kv_run_llm_text_free(kv_run_llm_text *x)
{
    free(x->abi);
    for (int i = 0; i < x->n_headers; i++)
        free(x->headers[i].text);
    free(x->headers);
    memset(x, 0, sizeof *x);
}

/* The parent's evaluation as the archive holds it: verdict, speedup, cell,
 * roofline, per-size times, and the evaluator's message (a compiler error,
 * a mismatch location) and compile report from its evidence (decoded by the
 * evaluator: kv_eval_summary_decode). The message is the attempt's detail of
 * a failed step, so the attempt log is not read. */
static void feedback(const kv_program *p, kv_strbuf *b)
{
    kv_eval_summary sum;
    if (kv_eval_summary_decode(p->evidence, &sum, NULL) != 0)
        (void)kv_eval_summary_decode(NULL, &sum, NULL); /* evidence not kevo's: shown without */
    kv_sb_printf(b, "Verdict: %s", kv_verdict_name(p->verdict));
    if (p->verdict == KV_VERDICT_OK)
        kv_sb_printf(b, ", %.3fx the reference (geometric mean over the size classes)", p->speedup);
    char cell[KV_CELL_NAME_MAX];
    if (sum.cell >= 0) {
        kv_cell_name(sum.cell, cell);
        kv_sb_printf(b, ", behaviour cell %s", cell);
    }
    if (p->roofline > 0)
        kv_sb_printf(b, ", %.0f%% of the roofline", 100 * p->roofline);
    kv_sb_printf(b, ".\n");
    for (uint32_t i = 0; i < p->n_sizes; i++) {
        const kv_size_result *s = &p->sizes[i];
        kv_sb_printf(b, "- %s: %s", s->name, s->ok ? "correct" : "wrong");
        if (s->cand_us > 0)
            kv_sb_printf(b, ", %.2f us against the reference's %.2f us, %.3fx", s->cand_us,
                         s->ref_us, s->ref_us / s->cand_us);
        if (s->cand_p90_us > 0)
            kv_sb_printf(b, " (its p10 %.2f us, p90 %.2f us)", s->cand_p10_us, s->cand_p90_us);
        if (s->roofline_us > 0)
            kv_sb_printf(b, "; roofline %.2f us", s->roofline_us);
        kv_sb_printf(b, "\n");
    }
    if (sum.message[0])
        kv_sb_printf(b, "\nThe evaluator's message:\n%s\n", sum.message);
    if (sum.compile_report && sum.compile_report[0])
        kv_sb_printf(b, "\nThe compiler's resource report:\n%s\n", sum.compile_report);
    kv_eval_summary_free(&sum);
}

/* Up to KV_PROMPT_MAX_INSPIRATIONS other elites of the problem, best first,
 * one per cell before a second of any cell; the parent itself is not one. */
typedef struct {
    uint64_t id;
    double fitness;
    int island, cell;
} insp;

static int by_fitness(const void *a, const void *b)
{
    const insp *x = a, *y = b;
    if (x->fitness != y->fitness)
        return x->fitness < y->fitness ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int inspirations(const kv_map *g, uint64_t parent, insp *out)
{
    int n = 0, cap = g->n_islands * KV_CELL_COUNT;
    insp *all = malloc(sizeof *all * (size_t)(cap > 0 ? cap : 1));
    if (!all)
        return 0; /* inspirations are optional */
    for (int i = 0; i < g->n_islands; i++)
        for (int c = 0; c < KV_CELL_COUNT; c++) {
            const kv_map_cell *mc = &g->islands[i].cells[c];
            int dup = mc->id == 0 || mc->id == parent;
            for (int k = 0; k < n && !dup; k++)
                dup = all[k].id == mc->id;
            if (!dup)
                all[n++] = (insp){mc->id, mc->fitness, i, c};
        }
    qsort(all, (size_t)n, sizeof *all, by_fitness);
    int m = 0;
    unsigned cells = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n && m < KV_PROMPT_MAX_INSPIRATIONS; k++) {
            int fresh = !(cells >> all[k].cell & 1u);
            if (all[k].id && (pass == 1 || fresh)) {
                cells |= 1u << all[k].cell;
                out[m++] = all[k];
                all[k].id = 0;
            }
        }
    free(all);
    return m;
}

static int quotes(const char *text, const char *name)
{
    char quoted[KV_NAME_MAX + 2];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    return strstr(text, quoted) != NULL;
}

int kv_run_llm_wanted_headers(const kv_run_llm_text *x, const char *psrc, int target, int *wanted)
{
    char cell[KV_CELL_NAME_MAX];
    kv_cell_name(target, cell);
    int tma = strncmp(cell, "tma/", 4) == 0, ce = strncmp(cell, "ce/", 3) == 0;
    for (int i = 0; i < x->n_headers; i++)
        wanted[i] = quotes(psrc, x->headers[i].name) ||
                    (tma && strcmp(x->headers[i].name, "kevo_tma.cuh") == 0) ||
                    (ce && strcmp(x->headers[i].name, "kevo_side.cuh") == 0);
    /* and what those include, to the end of the chain */
    for (int grew = 1; grew;) {
        grew = 0;
        for (int i = 0; i < x->n_headers; i++)
            for (int j = 0; wanted[i] && j < x->n_headers; j++)
                if (!wanted[j] && quotes(x->headers[i].text, x->headers[j].name))
                    wanted[j] = grew = 1;
    }
    int n = 0;
    for (int i = 0; i < x->n_headers; i++)
        n += wanted[i];
    return n;
}

static void snippets(const kv_run_llm_text *x, const char *psrc, int target, kv_strbuf *b)
{
    int *wanted = calloc((size_t)(x->n_headers > 0 ? x->n_headers : 1), sizeof *wanted);
    if (!wanted)
        return; /* the prompt goes without them, as when they do not fit */
    kv_run_llm_wanted_headers(x, psrc, target, wanted);
    for (int i = 0; i < x->n_headers; i++)
        if (wanted[i])
            kv_sb_printf(b, "### %s\n\n```cuda\n%s\n```\n\n", x->headers[i].name,
                         x->headers[i].text);
    free(wanted);
}

int kv_run_llm_prompt(kv_run *r, const kv_run_pick *pk, const char *psrc, char **system,
                      char **user, kv_err *err)
{
    *system = *user = NULL;
    kv_run_problem *p = &r->problems[pk->problem];
    insp ins[KV_PROMPT_MAX_INSPIRATIONS];
    int n_ins = inspirations(&p->grid, pk->parent, ins);
    char *isrc[KV_PROMPT_MAX_INSPIRATIONS] = {0};
    char inote[KV_PROMPT_MAX_INSPIRATIONS][128];
    kv_program prog;
    memset(&prog, 0, sizeof prog);
    kv_txn *t = NULL;
    if (kv_read_begin(r->archive, &t, err) != 0)
        return -1;
    int rc = kv_get_program(t, pk->parent, &prog, err);
    for (int i = 0; i < n_ins && rc == 0; i++) {
        size_t len;
        char cell[KV_CELL_NAME_MAX];
        kv_cell_name(ins[i].cell, cell);
        snprintf(inote[i], sizeof inote[i], "the elite of cell %s on island %d, %.3fx", cell,
                 ins[i].island, ins[i].fitness);
        rc = kv_get_source(t, ins[i].id, &isrc[i], &len, err);
    }
    kv_txn_abort(t);
    if (rc == KV_NOTFOUND)
        rc = kv_err_set(err, "program %llu (a parent or an inspiration) is not in the archive",
                        (unsigned long long)pk->parent);
    kv_strbuf fb = {0}, snip = {0};
    if (rc == 0) {
        feedback(&prog, &fb);
        snippets(&r->text, psrc, pk->target, &snip);
        if (fb.oom || snip.oom)
            rc = kv_err_set(err, "out of memory");
    }
    if (rc == 0) {
        char cell[KV_CELL_NAME_MAX];
        kv_cell_name(pk->target, cell);
        kv_prompt_in in = {.problem = &p->problem,
                           .world = r->cfg->world,
                           .topology = r->text.machine,
                           .abi = r->text.abi,
                           .parent_src = psrc,
                           .parent_feedback = fb.p,
                           .target_cell = cell,
                           .n_inspirations = n_ins,
                           .snippets = snip.p,
                           .budget_chars = r->cfg->llm.prompt_budget_chars};
        for (int i = 0; i < n_ins; i++) {
            in.insp_src[i] = isrc[i];
            in.insp_note[i] = inote[i];
        }
        if (kv_prompt_build(&in, system, user, err) != 0)
            rc = 1; /* over its budget: this parent cannot be shown */
    }
    for (int i = 0; i < n_ins; i++)
        free(isrc[i]);
    free(fb.p);
    free(snip.p);
    kv_program_clear(&prog);
    return rc;
}
