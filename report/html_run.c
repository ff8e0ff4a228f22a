/* html_run.c — the run's sections of the report: its directory, its
 * configuration without secrets and the budgets spent, in all and over time
 * (id="run", the chart by html_curves.c), and each
 * operator and model's share of the accepted children (id="models"). */
#include "html_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Whether a configuration key names a secret: it holds key, token, secret,
 * password or api (any case). */
static int secret_key(const char *k)
{
    static const char *const words[] = {"key", "token", "secret", "password", "api"};
    char low[128];
    size_t i = 0;
    for (; k[i] && i + 1 < sizeof low; i++)
        low[i] = (char)tolower((unsigned char)k[i]);
    low[i] = '\0';
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (strstr(low, words[w]))
            return 1;
    return 0;
}

/* Replaces the value of every member whose key names a secret by "(hidden)";
 * numbers and booleans stay (a budget of tokens is no secret). 0, or -1
 * when out of memory. */
static int mask(cJSON *node)
{
    for (cJSON *c = node ? node->child : NULL; c; c = c->next) {
        if (c->string && secret_key(c->string) && !cJSON_IsNumber(c) && !cJSON_IsBool(c) &&
            !cJSON_IsNull(c)) {
            cJSON *h = cJSON_CreateString("(hidden)");
            if (!h || !cJSON_ReplaceItemViaPointer(node, c, h)) {
                cJSON_Delete(h);
                return -1;
            }
            c = h;
        } else if (mask(c) != 0) {
            return -1;
        }
    }
    return 0;
}

double kv_rp_budget(const cJSON *config, const char *key)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(config, "budget");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* A row of the budgets' table: the limit printed as <before><limit><after>
 * with that many decimals, or "unlimited". */
static void budget_row(FILE *f, const char *what, const char *spent, double limit,
                       const char *before, int decimals, const char *after)
{
    fprintf(f, "<tr><td class=\"l\">%s</td><td>%s</td><td>", what, spent);
    if (limit > 0)
        fprintf(f, "%s%.*f%s", before, decimals, limit, after);
    else
        fputs("unlimited", f);
    fputs("</td></tr>\n", f);
}

int kv_rp_run(kv_rp *r, kv_err *err)
{
    FILE *f = r->f;
    fputs("<section id=\"run\">\n<h2>Run</h2>\n<p>Run directory: <code>", f);
    kv_html_str(f, r->run_dir);
    fputs("</code>", f);
    if (r->world)
        fprintf(f, "; W = %d GPUs per evaluation", r->world);
    fputs(".</p>\n", f);
    kv_run_state s;
    int got = kv_get_state(r->t, &s, err);
    if (got == KV_FAIL)
        return -1;
    fputs("<h3>Budgets spent</h3>\n", f);
    if (got == KV_NOTFOUND) {
        fputs("<p>No state stored yet.</p>\n", f);
    } else {
        char v[64];
        fputs("<table><tr><th class=\"l\">budget</th><th>spent</th><th>limit</th></tr>\n", f);
        snprintf(v, sizeof v, "%llu", (unsigned long long)s.evaluations);
        budget_row(f, "evaluations", v, kv_rp_budget(r->config, "evaluations"), "", 0, "");
        snprintf(v, sizeof v, "%.2f h", s.wall_s / 3600);
        budget_row(f, "wall time", v, kv_rp_budget(r->config, "wall_hours"), "", 2, " h");
        snprintf(v, sizeof v, "%llu in, %llu out", (unsigned long long)s.tokens_in,
                 (unsigned long long)s.tokens_out);
        budget_row(f, "LLM tokens", v, kv_rp_budget(r->config, "llm_tokens"), "", 0, "");
        snprintf(v, sizeof v, "$%.2f", s.cost_usd);
        budget_row(f, "LLM cost", v, kv_rp_budget(r->config, "cost_usd"), "$", 2, "");
        fputs("</table>\n", f);
    }
    if (kv_rp_budget_chart(r, err) != 0)
        return -1;
    fputs("<h3>Configuration</h3>\n", f);
    if (!r->config) {
        fputs("<p>No configuration stored.</p>\n", f);
    } else {
        cJSON *c = cJSON_Duplicate(r->config, 1);
        char *text = c && mask(c) == 0 ? cJSON_Print(c) : NULL;
        cJSON_Delete(c);
        if (!text)
            return kv_err_set(err, "configuration: out of memory");
        fputs("<details><summary>configuration (values of keys naming a key, token, secret, "
              "password or api hidden)</summary><pre>",
              f);
        kv_html_str(f, text);
        fputs("</pre></details>\n", f);
        free(text);
    }
    fputs("</section>\n", f);
    return 0;
}

/* ---- models ----------------------------------------------------------------------- */

typedef struct {
    char op[KV_NAME_MAX], model[KV_NAME_MAX];
    uint64_t ok, children;
} model_row;

typedef struct {
    model_row *v;
    size_t n, cap;
    uint64_t ok;
} model_list;

static int count_child(const kv_program *p, void *ctx, kv_err *err)
{
    model_list *l = ctx;
    if (p->n_parents == 0)
        return 0; /* seeds and references: no mutator made them */
    size_t i = 0;
    /* the model names the LLM; for other operators it names a pattern, not a mutator */
    const char *model = strcmp(p->op, "llm") == 0 ? p->model : "";
    for (; i < l->n; i++)
        if (strcmp(l->v[i].op, p->op) == 0 && strcmp(l->v[i].model, model) == 0)
            break;
    if (i == l->n) {
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 8;
            model_row *v = realloc(l->v, cap * sizeof *v);
            if (!v)
                return kv_err_set(err, "out of memory");
            l->v = v;
            l->cap = cap;
        }
        memset(&l->v[i], 0, sizeof l->v[i]);
        snprintf(l->v[i].op, sizeof l->v[i].op, "%s", p->op);
        snprintf(l->v[i].model, sizeof l->v[i].model, "%s", model);
        l->n++;
    }
    l->v[i].children++;
    if (p->verdict == KV_VERDICT_OK) {
        l->v[i].ok++;
        l->ok++;
    }
    return 0;
}

int kv_rp_models(kv_rp *r, kv_err *err)
{
    FILE *f = r->f;
    model_list l = {0};
    if (kv_each_program(r->t, count_child, &l, err) != 0) {
        free(l.v);
        return -1;
    }
    fputs("<section id=\"models\">\n<h2>Operators and models</h2>\n", f);
    if (l.n == 0) {
        fputs("<p>No children yet (only seeds and references).</p>\n", f);
    } else {
        fputs("<table><tr><th class=\"l\">operator</th><th class=\"l\">model</th>"
              "<th>children</th><th>accepted (ok)</th><th>share of accepted</th></tr>\n",
              f);
        for (size_t i = 0; i < l.n; i++) {
            fputs("<tr><td class=\"l\">", f);
            kv_html_str(f, l.v[i].op);
            fputs("</td><td class=\"l\">", f);
            kv_html_str(f, l.v[i].model[0] ? l.v[i].model : "-");
            fprintf(f, "</td><td>%llu</td><td>%llu</td><td>%.1f%%</td></tr>\n",
                    (unsigned long long)l.v[i].children, (unsigned long long)l.v[i].ok,
                    l.ok ? 100.0 * (double)l.v[i].ok / (double)l.ok : 0.0);
        }
        fputs("</table>\n", f);
    }
    fputs("</section>\n", f);
    free(l.v);
    return 0;
}
