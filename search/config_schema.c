/* config_schema.c — the table of every configuration key, the checks of
 * single keys, the handlers of the keys that are not plain scalars, and the
 * rules that span keys.
 *
 * Adding a key: add a field to kv_config (search/config.h), one row
 * here, and its line in docs/config.md (tests/unit/test_config.c checks that
 * every row is documented). The parser, the writer and the defaults follow
 * from the row. */
#include "config_schema.h"
#include "common/machine.h"
#include "evaluator/evaluator.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG(m) .offset = offsetof(kv_config, m), .size = sizeof(((kv_config *)0)->m)
#define MODEL(m) .offset = offsetof(kv_cfg_model, m), .size = sizeof(((kv_cfg_model *)0)->m)

_Static_assert(sizeof(kv_mutator_kind) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(kv_llm_api) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(kv_seeds_from) == sizeof(int), "enums are stored as int");

static const char *const mutator_kinds[] = {"template", "llm", NULL};
static const char *const llm_apis[] = {"openai", "anthropic", NULL};

/* ---- checks of single keys ------------------------------------------ */

static int check_nonempty(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    const char *s = field;
    if (s[0] == '\0')
        return kv_schema_fail(err, jpath, "must not be empty");
    return KV_OK;
}

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

static int check_model_name(const kv_schema_key *k, const void *base, const char *jpath,
                            kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    const char *s = field;
    if (check_nonempty(k, base, jpath, err))
        return KV_FAIL;
    if (has_control(s))
        return kv_schema_fail(err, jpath, "model name contains a control character");
    return KV_OK;
}

/* "" means not set (allowed for the template mutator, see the rules).
 * Messages do not echo the URL when it may carry a secret. */
static int check_endpoint(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    const char *s = field;
    if (s[0] == '\0')
        return KV_OK;
    const char *host;
    if (strncmp(s, "https://", 8) == 0)
        host = s + 8;
    else if (strncmp(s, "http://", 7) == 0)
        host = s + 7;
    else {
        char q[80];
        kv_json_quote(q, sizeof q, s);
        return kv_schema_fail(
            err, jpath,
            "expected an http:// or https:// URL (e.g. \"https://api.openai.com/v1\"), got %s", q);
    }
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return kv_schema_fail(err, jpath, "URL contains a space or a control character");
    size_t hostlen = strcspn(host, "/?#");
    if (hostlen == 0)
        return kv_schema_fail(err, jpath, "URL has no host");
    if (memchr(host, '@', hostlen))
        return kv_schema_fail(err, jpath,
                              "URL must not carry credentials (user:password@); name the key's "
                              "environment variable in api_key_env");
    /* a query parameter whose name says it holds a secret (key=, api_key=,
     * token=, ...): refused without repeating the URL, which holds it */
    static const char *const secret_words[] = {"key",    "token", "secret",     "password",
                                               "passwd", "auth",  "credential", "sig"};
    const char *q = strchr(host, '?');
    while (q && *q && *q != '#') {
        q++;
        size_t n = strcspn(q, "=&#");
        char name[64];
        size_t m = n < sizeof name - 1 ? n : sizeof name - 1;
        for (size_t i = 0; i < m; i++)
            name[i] = (char)(q[i] >= 'A' && q[i] <= 'Z' ? q[i] - 'A' + 'a' : q[i]);
        name[m] = '\0';
        for (size_t i = 0; i < sizeof secret_words / sizeof secret_words[0]; i++)
            if (strstr(name, secret_words[i]))
                return kv_schema_fail(err, jpath,
                                      "URL must not carry credentials (a query parameter named "
                                      "like a key or token); name the key's environment variable "
                                      "in api_key_env");
        q += strcspn(q, "&#");
    }
    return KV_OK;
}

/* Prefixes of well-known API keys and tokens. */
static const char *const key_prefixes[] = {
    "sk-",  "sk_",  "pk-",     "rk-",     "xai-", "gsk_",   "hf_", "ghp_",  "github_pat_", "glpat-",
    "AIza", "AKIA", "Bearer ", "bearer ", "key-", "nvapi-", "r8_", "pplx-", "tgp_",        "csk-",
};

static int looks_like_key(const char *s)
{
    for (size_t i = 0; i < sizeof key_prefixes / sizeof key_prefixes[0]; i++)
        if (strncmp(s, key_prefixes[i], strlen(key_prefixes[i])) == 0)
            return 1;
    /* Long and unstructured: letters and digits mixed, no '_' separating words. */
    size_t len = strlen(s), digits = 0, lower = 0, upper = 0;
    for (const char *p = s; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p >= 'a' && *p <= 'z')
            lower++;
        else if (*p >= 'A' && *p <= 'Z')
            upper++;
    }
    return len >= 24 && !strchr(s, '_') && digits > 0 && (lower > 0 || upper > 0);
}

/* The value names a variable; it is never echoed, in case it is a key. */
static int check_env_name(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    const char *s = field;
    if (looks_like_key(s))
        return kv_schema_fail(err, jpath,
                              "looks like an API key, not the name of an environment variable: put "
                              "the key in an environment variable and name that variable here "
                              "(e.g. \"OPENAI_API_KEY\"); the value is not repeated here");
    int ok = s[0] != '\0' && !(s[0] >= '0' && s[0] <= '9');
    for (const char *p = s; *p && ok; p++)
        ok = (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!ok)
        return kv_schema_fail(
            err, jpath,
            "must name an environment variable: upper-case letters, digits and '_', "
            "not starting with a digit (e.g. \"OPENAI_API_KEY\")");
    return KV_OK;
}

static int check_target_speedup(const kv_schema_key *k, const void *base, const char *jpath,
                                kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    double v;
    memcpy(&v, field, sizeof v);
    if (v != 0 && v < 1) {
        char num[32];
        kv_json_fmt_number(v, num);
        return kv_schema_fail(err, jpath, "%s is out of range (must be 0 = never, or >= 1)", num);
    }
    return KV_OK;
}

static int check_positive(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    const void *field = kv_schema_cfield(k, base);
    double v;
    memcpy(&v, field, sizeof v);
    if (!(v > 0)) {
        char num[32];
        kv_json_fmt_number(v, num);
        return kv_schema_fail(err, jpath, "%s is out of range (must be > 0)", num);
    }
    return KV_OK;
}

/* ---- problems: array of unique names [a-z0-9_]+ ------------------------ */

static int valid_problem_name(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return 0;
    return n > 0 && n < KV_CFG_NAME_MAX;
}

static int parse_problems(const kv_schema *s, const kv_schema_key *k, const cJSON *item,
                          const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_config *cfg = base;
    if (!cJSON_IsArray(item))
        return kv_schema_fail(err, jpath, "expected an array of problem names, got %s",
                              kv_json_type(item));
    int n = cJSON_GetArraySize(item);
    if (n == 0)
        return kv_schema_fail(err, jpath, "must list at least one problem");
    if (n > KV_CFG_MAX_PROBLEMS)
        return kv_schema_fail(err, jpath, "at most %d problems, got %d", KV_CFG_MAX_PROBLEMS, n);
    int i = 0;
    for (const cJSON *el = item->child; el; el = el->next, i++) {
        char ep[KV_JSON_PATH_MAX], q[80];
        kv_json_path_index(ep, sizeof ep, jpath, i);
        if (!cJSON_IsString(el))
            return kv_schema_fail(err, ep, "expected a problem name (a string), got %s",
                                  kv_json_type(el));
        kv_json_quote(q, sizeof q, el->valuestring);
        if (!valid_problem_name(el->valuestring))
            return kv_schema_fail(
                err, ep, "invalid problem name %s: use 1 to %d lower-case letters, digits and '_'",
                q, KV_CFG_NAME_MAX - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(cfg->problems[j], el->valuestring) == 0) {
                char other[KV_JSON_PATH_MAX];
                kv_json_path_index(other, sizeof other, jpath, j);
                return kv_schema_fail(err, ep, "duplicate problem %s (also at %s)", q, other);
            }
        memset(cfg->problems[i], 0, sizeof cfg->problems[i]);
        memcpy(cfg->problems[i], el->valuestring, strlen(el->valuestring));
    }
    cfg->n_problems = n;
    return KV_OK;
}

static cJSON *emit_problems(const kv_schema *s, const kv_schema_key *k, const void *base)
{
    (void)s;
    (void)k;
    const kv_config *cfg = base;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < cfg->n_problems; i++) {
        cJSON *name = cJSON_CreateString(cfg->problems[i]);
        if (!name || !cJSON_AddItemToArray(arr, name)) {
            cJSON_Delete(name);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---- gpu_groups: "auto" or [[gpu, ...], ...] ---------------------------- */

static int parse_gpu_groups(const kv_schema *s, const kv_schema_key *k, const cJSON *item,
                            const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_config *cfg = base;
    static const char expect[] =
        "expected \"auto\" or an array of GPU groups (arrays of GPU indices)";
    if (cJSON_IsString(item)) {
        if (strcmp(item->valuestring, "auto") == 0) {
            cfg->n_groups = 0;
            return KV_OK;
        }
        char q[80];
        kv_json_quote(q, sizeof q, item->valuestring);
        return kv_schema_fail(err, jpath, "%s, got %s", expect, q);
    }
    if (!cJSON_IsArray(item))
        return kv_schema_fail(err, jpath, "%s, got %s", expect, kv_json_type(item));
    int n = cJSON_GetArraySize(item);
    if (n == 0)
        return kv_schema_fail(err, jpath, "must be \"auto\" or list at least one group");
    if (n > KV_CFG_MAX_GROUPS)
        return kv_schema_fail(err, jpath, "at most %d groups, got %d", KV_CFG_MAX_GROUPS, n);

    int owner[KV_CFG_MAX_GPUS];
    for (int i = 0; i < KV_CFG_MAX_GPUS; i++)
        owner[i] = -1;
    int g = 0;
    for (const cJSON *grp = item->child; grp; grp = grp->next, g++) {
        char gp[KV_JSON_PATH_MAX];
        kv_json_path_index(gp, sizeof gp, jpath, g);
        if (!cJSON_IsArray(grp))
            return kv_schema_fail(err, gp, "expected an array of GPU indices, got %s",
                                  kv_json_type(grp));
        int m = cJSON_GetArraySize(grp);
        if (m == 0)
            return kv_schema_fail(err, gp, "empty group");
        if (m > KV_CFG_MAX_GPUS)
            return kv_schema_fail(err, gp, "a group has at most %d GPUs, got %d", KV_CFG_MAX_GPUS,
                                  m);
        int i = 0;
        for (const cJSON *el = grp->child; el; el = el->next, i++) {
            char ip[KV_JSON_PATH_MAX];
            double v;
            kv_json_path_index(ip, sizeof ip, gp, i);
            if (kv_schema_get_number(el, ip, 1, 0, KV_CFG_MAX_GPUS - 1, &v, err))
                return KV_FAIL;
            int gpu = (int)v;
            if (owner[gpu] == g)
                return kv_schema_fail(err, ip, "GPU %d appears twice in this group", gpu);
            if (owner[gpu] >= 0) {
                char other[KV_JSON_PATH_MAX];
                kv_json_path_index(other, sizeof other, jpath, owner[gpu]);
                return kv_schema_fail(
                    err, ip, "GPU %d is already in %s (a GPU belongs to one group)", gpu, other);
            }
            owner[gpu] = g;
            cfg->groups[g][i] = gpu;
        }
        cfg->group_size[g] = m;
    }
    cfg->n_groups = n;
    return KV_OK;
}

static cJSON *emit_gpu_groups(const kv_schema *s, const kv_schema_key *k, const void *base)
{
    (void)s;
    (void)k;
    const kv_config *cfg = base;
    if (cfg->n_groups == 0)
        return cJSON_CreateString("auto");
    cJSON *arr = cJSON_CreateArray();
    for (int g = 0; arr && g < cfg->n_groups; g++) {
        cJSON *grp = cJSON_CreateIntArray(cfg->groups[g], cfg->group_size[g]);
        if (!grp || !cJSON_AddItemToArray(arr, grp)) {
            cJSON_Delete(grp);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---- mutator.llm.models: names or {name, weight, prices} ----------------- */

static int parse_models(const kv_schema *s, const kv_schema_key *k, const cJSON *item,
                        const char *jpath, void *base, kv_err *err)
{
    kv_cfg_llm *llm = &((kv_config *)base)->llm;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s[]", k->path);
    if (!cJSON_IsArray(item))
        return kv_schema_fail(err, jpath,
                              "expected an array of models (names, or objects {name, weight, "
                              "price_in_per_mtok, price_out_per_mtok}), got %s",
                              kv_json_type(item));
    int n = cJSON_GetArraySize(item);
    if (n > KV_CFG_MAX_MODELS)
        return kv_schema_fail(err, jpath, "at most %d models, got %d", KV_CFG_MAX_MODELS, n);
    char name_path[80];
    snprintf(name_path, sizeof name_path, "%s.name", prefix);
    const kv_schema_key *name_key = kv_schema_find(s, name_path);

    int i = 0;
    for (const cJSON *el = item->child; el; el = el->next, i++) {
        char ep[KV_JSON_PATH_MAX];
        kv_json_path_index(ep, sizeof ep, jpath, i);
        kv_cfg_model *m = &llm->models[i];
        memset(m, 0, sizeof *m);
        kv_schema_defaults(s, prefix, m);
        if (cJSON_IsString(el)) {
            if (kv_schema_read_value(s, name_key, el, ep, m, err))
                return KV_FAIL;
        } else if (cJSON_IsObject(el)) {
            if (kv_schema_read(s, prefix, el, ep, m, err))
                return KV_FAIL;
        } else {
            return kv_schema_fail(err, ep,
                                  "expected a model name or an object {name, weight, "
                                  "price_in_per_mtok, price_out_per_mtok}, got %s",
                                  kv_json_type(el));
        }
        for (int j = 0; j < i; j++)
            if (strcmp(llm->models[j].name, m->name) == 0) {
                char other[KV_JSON_PATH_MAX], q[80];
                kv_json_path_index(other, sizeof other, jpath, j);
                kv_json_quote(q, sizeof q, m->name);
                return kv_schema_fail(err, ep, "duplicate model %s (also at %s)", q, other);
            }
    }
    llm->n_models = n;
    return KV_OK;
}

static cJSON *emit_models(const kv_schema *s, const kv_schema_key *k, const void *base)
{
    const kv_cfg_llm *llm = &((const kv_config *)base)->llm;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s[]", k->path);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < llm->n_models; i++) {
        cJSON *m = kv_schema_emit(s, prefix, &llm->models[i]);
        if (!m || !cJSON_AddItemToArray(arr, m)) {
            cJSON_Delete(m);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* ---- the table -------------------------------------------------------- */

const kv_schema_key kv_cfg_schema[] = {
    {.path = "problems",
     .type = KV_SCHEMA_CUSTOM,
     .flags = KV_SCHEMA_REQUIRED,
     CFG(problems),
     .read = parse_problems,
     .emit = emit_problems,
     .def_str = "(required)",
     .type_doc = "array of names [a-z0-9_]+, unique, 1..32",
     .doc = "problems to search (folders under problems/), one archive section each"},
    {.path = "world",
     .type = KV_SCHEMA_INT,
     CFG(world),
     .min = 2,
     .max = 16,
     .def = 2,
     .doc = "GPUs per evaluation group (W): every candidate runs on W GPUs"},
    {.path = "gpu_groups",
     .type = KV_SCHEMA_CUSTOM,
     CFG(groups),
     .read = parse_gpu_groups,
     .emit = emit_gpu_groups,
     .def_str = "\"auto\"",
     .type_doc = "\"auto\" or array of arrays of GPU indices 0..15",
     .doc =
         "GPU groups of the evaluator pool; each exactly world GPUs, a GPU in at most one group; "
         "\"auto\" forms groups from NVLink peers"},
    {.path = "islands",
     .type = KV_SCHEMA_INT,
     CFG(islands),
     .min = 1,
     .max = 64,
     .def = 4,
     .doc = "islands per problem, each its own MAP-Elites grid"},
    {.path = "migration_interval",
     .type = KV_SCHEMA_INT,
     CFG(migration_interval),
     .min = 1,
     .max = 1e6,
     .def = 50,
     .doc = "accepted (ok) evaluations of a problem between migrations: every island sends its "
            "best to the next (ring)"},
    {.path = "reseed_interval",
     .type = KV_SCHEMA_INT,
     CFG(reseed_interval),
     .min = 0,
     .max = 1e7,
     .def = 500,
     .doc = "accepted (ok) evaluations of a problem between re-seeding its weakest island from the "
            "best; 0 = never"},
    {.path = "seed",
     .type = KV_SCHEMA_UINT64,
     CFG(seed),
     .min = 0,
     .max = KV_JSON_INT_EXACT_MAX,
     .def = 1,
     .doc = "seed of the search's random number generator"},
    {.path = "seeds",
     .type = KV_SCHEMA_ENUM,
     CFG(seeds),
     .names = kv_seeds_names,
     .def = 0,
     .doc =
         "where the problems' seeds come from: \"patterns\": the hand-written seeds of "
         "patterns/<problem>/; \"schedules\": for a collective, seeds generated from "
         "schedules (the default schedule, one per reachable cell and an LL one), none for another "
         "problem; \"both\""},
    {.path = "run_dir",
     .type = KV_SCHEMA_STRING,
     CFG(run_dir),
     .def_str = "runs/default",
     .check = check_nonempty,
     .doc = "run directory (archive, log, state); `kevo run --run DIR` overrides it"},

    {.path = "budget", .type = KV_SCHEMA_OBJECT, .doc = "limits that stop the run (0 = unlimited)"},
    {.path = "budget.evaluations",
     .type = KV_SCHEMA_INT64,
     CFG(budget.evaluations),
     .min = 0,
     .max = KV_JSON_INT_EXACT_MAX,
     .def = 0,
     .doc = "GPU evaluations in all; 0 = unlimited"},
    {.path = "budget.wall_hours",
     .type = KV_SCHEMA_NUMBER,
     CFG(budget.wall_hours),
     .min = 0,
     .max = INFINITY,
     .def = 0,
     .doc = "wall-clock hours; 0 = unlimited"},
    {.path = "budget.llm_tokens",
     .type = KV_SCHEMA_INT64,
     CFG(budget.llm_tokens),
     .min = 0,
     .max = KV_JSON_INT_EXACT_MAX,
     .def = 0,
     .doc = "LLM tokens (prompt + completion); 0 = unlimited"},
    {.path = "budget.cost_usd",
     .type = KV_SCHEMA_NUMBER,
     CFG(budget.cost_usd),
     .min = 0,
     .max = INFINITY,
     .def = 0,
     .doc = "LLM cost in USD from the models' prices; 0 = unlimited"},
    {.path = "budget.target_speedup",
     .type = KV_SCHEMA_NUMBER,
     CFG(budget.target_speedup),
     .min = 0,
     .max = INFINITY,
     .def = 0,
     .check = check_target_speedup,
     .doc = "stop a problem once its best speedup reaches this; 0 = never, else >= 1"},

    {.path = "mutator", .type = KV_SCHEMA_OBJECT, .doc = "how candidates are proposed"},
    {.path = "mutator.kind",
     .type = KV_SCHEMA_ENUM,
     CFG(mutator),
     .names = mutator_kinds,
     .def = 0,
     .doc = "\"template\": parametric mutation of patterns, no network; \"llm\": an LLM endpoint"},
    {.path = "mutator.llm",
     .type = KV_SCHEMA_OBJECT,
     .doc = "the LLM mutator; validated whenever present, used when kind is \"llm\""},
    {.path = "mutator.llm.api",
     .type = KV_SCHEMA_ENUM,
     CFG(llm.api),
     .names = llm_apis,
     .def = 0,
     .doc = "\"openai\": /v1/chat/completions (OpenAI, vLLM, SGLang, ...); \"anthropic\": "
            "/v1/messages"},
    {.path = "mutator.llm.endpoint",
     .type = KV_SCHEMA_STRING,
     CFG(llm.endpoint),
     .def_str = "",
     .check = check_endpoint,
     .doc = "base URL, http:// or https://, e.g. https://api.openai.com/v1; required when kind is "
            "\"llm\""},
    {.path = "mutator.llm.api_key_env",
     .type = KV_SCHEMA_STRING,
     CFG(llm.api_key_env),
     .def_str = "OPENAI_API_KEY",
     .check = check_env_name,
     .doc = "NAME of the environment variable that holds the API key (never the key itself)"},
    {.path = "mutator.llm.models",
     .type = KV_SCHEMA_CUSTOM,
     CFG(llm.models),
     .read = parse_models,
     .emit = emit_models,
     .def_str = "[]",
     .type_doc = "array of 1..8 model names or objects",
     .doc = "models to sample from; required (1..8) when kind is \"llm\"; a bare string is "
            "{\"name\": it, weight 1, prices 0}"},
    {.path = "mutator.llm.models[].name",
     .type = KV_SCHEMA_STRING,
     .flags = KV_SCHEMA_REQUIRED,
     MODEL(name),
     .def_str = "",
     .check = check_model_name,
     .doc = "model id sent to the endpoint; unique"},
    {.path = "mutator.llm.models[].weight",
     .type = KV_SCHEMA_NUMBER,
     MODEL(weight),
     .min = 0,
     .max = 1e6,
     .def = 1,
     .check = check_positive,
     .doc = "relative sampling weight (> 0)"},
    {.path = "mutator.llm.models[].price_in_per_mtok",
     .type = KV_SCHEMA_NUMBER,
     MODEL(price_in_per_mtok),
     .min = 0,
     .max = 1e6,
     .def = 0,
     .doc = "USD per million prompt tokens (for budget.cost_usd)"},
    {.path = "mutator.llm.models[].price_out_per_mtok",
     .type = KV_SCHEMA_NUMBER,
     MODEL(price_out_per_mtok),
     .min = 0,
     .max = 1e6,
     .def = 0,
     .doc = "USD per million completion tokens (for budget.cost_usd)"},
    {.path = "mutator.llm.concurrency",
     .type = KV_SCHEMA_INT,
     CFG(llm.concurrency),
     .min = 1,
     .max = 256,
     .def = 4,
     .doc = "LLM requests in flight"},
    {.path = "mutator.llm.temperature",
     .type = KV_SCHEMA_NUMBER,
     CFG(llm.temperature),
     .min = 0,
     .max = 2,
     .def = 0.8,
     .doc = "sampling temperature"},
    {.path = "mutator.llm.max_tokens",
     .type = KV_SCHEMA_INT,
     CFG(llm.max_tokens),
     .min = 1,
     .max = 200000,
     .def = 8192,
     .doc = "completion tokens per request"},
    {.path = "mutator.llm.timeout_s",
     .type = KV_SCHEMA_NUMBER,
     CFG(llm.timeout_s),
     .min = 1,
     .max = 3600,
     .def = 300,
     .doc = "seconds per request before it is abandoned"},
    {.path = "mutator.llm.max_retries",
     .type = KV_SCHEMA_INT,
     CFG(llm.max_retries),
     .min = 0,
     .max = 20,
     .def = 5,
     .doc = "retries of a failed request (backoff, honours Retry-After)"},
    {.path = "mutator.llm.prompt_budget_chars",
     .type = KV_SCHEMA_INT,
     CFG(llm.prompt_budget_chars),
     .min = 1000,
     .max = 2000000,
     .def = 120000,
     .doc = "size budget of one prompt in characters"},

    {.path = "evaluation", .type = KV_SCHEMA_OBJECT, .doc = "how candidates are checked and timed"},
    {.path = "evaluation.trials",
     .type = KV_SCHEMA_INT,
     CFG(eval.trials),
     .min = 1,
     .max = 100,
     .def = 3,
     .doc = "correctness trials per size class"},
    {.path = "evaluation.screen_warmup",
     .type = KV_SCHEMA_INT,
     CFG(eval.screen_warmup),
     .min = 0,
     .max = 100000,
     .def = 20,
     .doc = "warm-up runs of the screening timing"},
    {.path = "evaluation.screen_iters",
     .type = KV_SCHEMA_INT,
     CFG(eval.screen_iters),
     .min = 1,
     .max = 1e6,
     .def = 50,
     .doc = "timed runs of the screening timing"},
    {.path = "evaluation.full_warmup",
     .type = KV_SCHEMA_INT,
     CFG(eval.full_warmup),
     .min = 0,
     .max = 1e6,
     .def = 500,
     .doc = "warm-up runs of the full timing (promising candidates)"},
    {.path = "evaluation.full_iters",
     .type = KV_SCHEMA_INT,
     CFG(eval.full_iters),
     .min = 1,
     .max = 1e6,
     .def = 100,
     .doc = "timed runs of the full timing"},
    {.path = "evaluation.timing",
     .type = KV_SCHEMA_ENUM,
     CFG(eval.timing),
     .names = kv_timing_names,
     .what = "timing",
     .def = 0,
     .doc = "\"graph\": each side timed as replays of a CUDA graph of its calls, as inference "
            "engines run them; \"call\": calls one by one from the host (each pays a launch)"},
    {.path = "evaluation.compile_timeout_s",
     .type = KV_SCHEMA_NUMBER,
     CFG(eval.compile_timeout_s),
     .min = 1,
     .max = 3600,
     .def = 120,
     .doc = "seconds one nvcc compilation may take"},
    {.path = "evaluation.job_timeout_s",
     .type = KV_SCHEMA_NUMBER,
     CFG(eval.job_timeout_s),
     .min = 1,
     .max = 3600,
     .def = 60,
     .doc = "deadline of one evaluation job on a GPU group (then: hang, group restarted)"},
    {.path = "evaluation.compile_jobs",
     .type = KV_SCHEMA_INT,
     CFG(eval.compile_jobs),
     .min = 0,
     .max = 1024,
     .def = 0,
     .doc = "parallel compilations; 0 = number of cores"},
    {.path = "evaluation.recycle_every",
     .type = KV_SCHEMA_INT,
     CFG(eval.recycle_every),
     .min = 1,
     .max = 1e6,
     .def = 200,
     .doc = "restart a worker group after this many jobs"},
    {.path = "evaluation.allow_nvls",
     .type = KV_SCHEMA_BOOL,
     CFG(eval.allow_nvls),
     .def = 0,
     .doc = "run NVLS (multicast) candidates; the machine policy must allow them too"},
    {.path = "evaluation.allow_runtime_lookups",
     .type = KV_SCHEMA_BOOL,
     CFG(eval.allow_runtime_lookups),
     .def = 0,
     .doc = "run candidates that look up driver entry points or load code at run time "
            "(cudaGetDriverEntryPoint, cuGetProcAddress, dlopen, dlsym, syscall, ...)"},
    {.path = "evaluation.allow_unconfined",
     .type = KV_SCHEMA_BOOL,
     CFG(eval.allow_unconfined),
     .def = 0,
     .doc = "run the workers unconfined where the kernel offers no Landlock; the default refuses "
            "to start"},
    {.path = "evaluation.worker_output_kib",
     .type = KV_SCHEMA_INT,
     CFG(eval.worker_output_kib),
     .min = 4,
     .max = 1048576,
     .def = 1024,
     .doc = "per job, the first and the last this many KiB of a worker's stdout and stderr go to "
            "its log; the cut between them is marked"},
    {.path = "evaluation.worker_log_mib",
     .type = KV_SCHEMA_INT,
     CFG(eval.worker_log_mib),
     .min = 1,
     .max = 1048576,
     .def = 64,
     .doc = "a worker's log is rotated (one old file kept) past this size"},
    {.path = "evaluation.scratch_mib",
     .type = KV_SCHEMA_INT,
     CFG(eval.scratch_mib),
     .min = 1,
     .max = 1048576,
     .def = 256,
     .doc = "size of each worker's scratch directory and the largest file a worker may write"},
    {.path = "evaluation.worker_uid",
     .type = KV_SCHEMA_INT64,
     CFG(eval.worker_uid),
     .min = 1,
     .max = 4294967294.0,
     .def = 61000,
     .doc = "when kevo runs as root, the workers of group g run as uid worker_uid + g"},

    {.path = "snapshots", .type = KV_SCHEMA_OBJECT, .doc = "hot snapshots of the archive"},
    {.path = "snapshots.interval_min",
     .type = KV_SCHEMA_NUMBER,
     CFG(snapshots.interval_min),
     .min = 0,
     .max = 1e6,
     .def = 10,
     .doc = "minutes between hot snapshots while a run writes; 0 = only at exit"},
    {.path = "snapshots.keep",
     .type = KV_SCHEMA_INT,
     CFG(snapshots.keep),
     .min = 1,
     .max = 1000,
     .def = 3,
     .doc = "the newest this many snapshots are kept"},

    {.path = "report", .type = KV_SCHEMA_OBJECT, .doc = "the run's report, <run_dir>/report.html"},
    {.path = "report.enabled",
     .type = KV_SCHEMA_BOOL,
     CFG(report.enabled),
     .def = 1,
     .doc = "kevo run writes the report while it runs and at exit"},
    {.path = "report.interval_min",
     .type = KV_SCHEMA_NUMBER,
     CFG(report.interval_min),
     .min = 0,
     .max = 1e6,
     .def = 5,
     .doc = "minutes between refreshes of the report while a run writes; 0 = only at exit"},
    {.path = "report.link_gbps",
     .type = KV_SCHEMA_NUMBER,
     CFG(report.link_gbps),
     .min = 1,
     .max = 1e5,
     .def = KV_FLOOR_LINK_BYTES_PER_S * 1e-9,
     .doc = "the link's measured ceiling per direction in GB/s, both directions loaded "
            "(bench/link_overlap prints it; the default is the 2 x H200 figure): the report's "
            "\"of link\" column"},
};

const size_t kv_cfg_schema_len = sizeof kv_cfg_schema / sizeof kv_cfg_schema[0];

const kv_schema kv_cfg_table = {
    .keys = kv_cfg_schema, .n = sizeof kv_cfg_schema / sizeof kv_cfg_schema[0], .flags = 0};

/* ---- rules that span keys ------------------------------------------------ */

int kv_cfg_check_rules(const kv_config *cfg, kv_err *err)
{
    for (int g = 0; g < cfg->n_groups; g++)
        if (cfg->group_size[g] != cfg->world) {
            char gp[KV_JSON_PATH_MAX];
            kv_json_path_index(gp, sizeof gp, "$.gpu_groups", g);
            return kv_schema_fail(
                err, gp, "group has %d GPU%s but world is %d (every group has exactly world GPUs)",
                cfg->group_size[g], cfg->group_size[g] == 1 ? "" : "s", cfg->world);
        }
    if (cfg->mutator == KV_MUTATOR_LLM) {
        if (cfg->llm.endpoint[0] == '\0')
            return kv_schema_fail(
                err, "$.mutator.llm.endpoint",
                "required when $.mutator.kind is \"llm\" (e.g. \"https://api.openai.com/v1\")");
        if (cfg->llm.n_models == 0)
            return kv_schema_fail(err, "$.mutator.llm.models",
                                  "required when $.mutator.kind is \"llm\": list 1 to %d models",
                                  KV_CFG_MAX_MODELS);
    }
    return KV_OK;
}
