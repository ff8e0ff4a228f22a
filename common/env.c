/* env.c — the children's environment allow-list and the erasure of a
 * variable (env.h). */
#define _GNU_SOURCE
#include "common/env.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

static const char *const exact[] = {
    "PATH",
    "LD_LIBRARY_PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    /* the C compiler's and nvcc's own search paths and flags */
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    /* a sanitized build of the worker reads these */
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
};
/* CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_MODULE_LOADING, CUDA_CACHE_*,
 * NCCL_NVLS_ENABLE (the machine's policy, which the worker reads), NCCL_DEBUG,
 * NCCL_SOCKET_IFNAME, ...: settings, none a credential */
static const char *const prefixes[] = {"LC_", "CUDA_", "NCCL_", "KEVO_FAKE_"};
/* whatever the prefix, a name like these is never passed */
static const char *const secret_words[] = {"KEY", "SECRET", "TOKEN", "PASSW", "CREDENTIAL", "AUTH"};

static int name_has(const char *name, size_t n, const char *word)
{
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(name + i, word, k) == 0)
            return 1;
    return 0;
}

int kv_env_allowed(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry)
        return 0;
    size_t n = (size_t)(eq - entry);
    for (size_t i = 0; i < sizeof secret_words / sizeof secret_words[0]; i++)
        if (name_has(entry, n, secret_words[i]))
            return 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strlen(exact[i]) == n && strncmp(entry, exact[i], n) == 0)
            return 1;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t k = strlen(prefixes[i]);
        if (n > k && strncmp(entry, prefixes[i], k) == 0)
            return 1;
    }
    return 0;
}

/* Whether entry's name is that of one of extra's entries. */
static int overridden(const char *entry, const char *const extra[])
{
    size_t n = strcspn(entry, "=");
    for (size_t i = 0; extra && extra[i]; i++)
        if (strncmp(extra[i], entry, n) == 0 && extra[i][n] == '=')
            return 1;
    return 0;
}

char **kv_env_allowed_copy(const char *const extra[])
{
    size_t n = 0, n_extra = 0;
    while (environ && environ[n])
        n++;
    while (extra && extra[n_extra])
        n_extra++;
    char **env = calloc(n + n_extra + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (kv_env_allowed(environ[i]) && !overridden(environ[i], extra) &&
            !(env[k++] = strdup(environ[i])))
            goto oom;
    for (size_t i = 0; i < n_extra; i++)
        if (!(env[k++] = strdup(extra[i])))
            goto oom;
    return env;
oom:
    kv_env_free(env);
    return NULL;
}

void kv_env_free(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
}

void kv_env_keep_allowed(void)
{
    size_t k = 0;
    for (size_t i = 0; environ && environ[i]; i++) {
        if (kv_env_allowed(environ[i]))
            environ[k++] = environ[i]; /* compacted in place: no allocation */
        else
            memset(environ[i], 0, strlen(environ[i]));
    }
    if (environ)
        environ[k] = NULL;
}

void kv_env_erase(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; environ && environ[i]; i++)
        if (strncmp(environ[i], name, n) == 0 && environ[i][n] == '=')
            memset(environ[i] + n + 1, 0, strlen(environ[i] + n + 1));
    unsetenv(name);
}
