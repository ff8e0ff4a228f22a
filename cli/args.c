#include "common/text.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive/archive.h"
#include "search/config.h"

int kv_cli_vusage(const char *cmd, const char *usage, const char *fmt, va_list ap)
{
    fprintf(stderr, "kevo %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    return KV_EXIT_USAGE;
}

int kv_cli_usage(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = kv_cli_vusage(cmd, usage, fmt, ap);
    va_end(ap);
    return rc;
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

/* The modification time of DIR/archive.mdb in *mtime: 0, or -1 when DIR
 * holds no archive (or the name does not fit). */
static int archive_mtime(const char *dir, struct timespec *mtime)
{
    char path[PATH_MAX];
    struct stat st;
    int n = snprintf(path, sizeof path, "%s/%s", dir, KV_ARCHIVE_FILE);
    if (n < 0 || (size_t)n >= sizeof path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    *mtime = st.st_mtim;
    return 0;
}

const char *kv_cli_reader_run_dir(void)
{
    static kv_config defaults;
    static char found[PATH_MAX];
    const char *env = getenv("KEVO_RUN");
    if (env && *env)
        return env;
    kv_config_defaults(&defaults);
    struct timespec best = {0}, t;
    if (archive_mtime(defaults.run_dir, &t) == 0)
        return defaults.run_dir;
    /* the newest run next to the default one (runs/ for runs/default) */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", defaults.run_dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(parent, sizeof parent, ".");
    DIR *d = opendir(parent);
    if (!d)
        return defaults.run_dir; /* no runs at all: the view names the default */
    found[0] = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char dir[PATH_MAX];
        int n = snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name);
        if (e->d_name[0] == '.' || n < 0 || (size_t)n >= sizeof dir || archive_mtime(dir, &t) != 0)
            continue;
        if (!found[0] || t.tv_sec > best.tv_sec ||
            (t.tv_sec == best.tv_sec && t.tv_nsec > best.tv_nsec)) {
            best = t;
            memcpy(found, dir, (size_t)n + 1);
        }
    }
    closedir(d);
    if (!found[0])
        return defaults.run_dir;
    char shown[4 * PATH_MAX];
    fprintf(stderr, "kevo: reading %s (the most recent run; --run DIR to choose)\n",
            KV_TERM(shown, found));
    return found;
}
