#include "common/text.h"
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/config.h"

int kv_cli_usage(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kevo %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage);
    return KV_EXIT_USAGE;
}

int kv_cli_fail(const kv_err *err)
{
    /* a message may hold text from outside (an endpoint's error, a file name) */
    char msg[4 * sizeof err->msg];
    fprintf(stderr, "kevo: %s\n", err->msg[0] ? KV_TERM(msg, err->msg) : "failed (no message)");
    return KV_EXIT_FAIL;
}

int kv_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    }
    return 0;
}

int kv_cli_help(const char *usage)
{
    fputs(usage, stdout);
    return KV_EXIT_OK;
}

int kv_cli_parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int kv_cli_run_dir_arg(int argc, char **argv, int *i, int *dashdash, const char **run_dir,
                       char *why, size_t cap)
{
    const char *a = argv[*i];
    if (!*dashdash && strcmp(a, "--") == 0) {
        *dashdash = 1;
        return 1;
    }
    if (!*dashdash && strcmp(a, "--run") == 0) {
        if (*i + 1 >= argc || !argv[*i + 1][0])
            snprintf(why, cap, "option '%s' needs a value", a);
        else if (*run_dir)
            snprintf(why, cap, "the run directory is given twice (at '%s')", a);
        else {
            *run_dir = argv[++*i];
            return 1;
        }
        return -1;
    }
    if (!*dashdash && a[0] == '-' && a[1])
        return 0;
    if (*run_dir)
        snprintf(why, cap, "unexpected argument '%s' (one run directory)", a);
    else if (!a[0])
        snprintf(why, cap, "the run directory is empty");
    else {
        *run_dir = a;
        return 1;
    }
    return -1;
}

const char *kv_cli_default_run_dir(void)
{
    static kv_config defaults; /* the documented default of run_dir */
    const char *env = getenv("KEVO_RUN");
    if (env && *env)
        return env;
    kv_config_defaults(&defaults);
    return defaults.run_dir;
}
