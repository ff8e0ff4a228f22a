/* datadir.c — the data root (datadir.h). */
#include "common/datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KEVO_SOURCE_DIR
#define KEVO_SOURCE_DIR "."
#endif

/* <exe dir>/../share/kevo in out when it holds problems/: 0, else -1. */
static int installed_root(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    char probe[PATH_MAX + 32];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/../share/kevo/problems", exe);
    if (stat(probe, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    /* the canonical form: messages name /usr/share/kevo, not /usr/bin/.. */
    snprintf(probe, sizeof probe, "%s/../share/kevo", exe);
    return realpath(probe, out) && strlen(out) < cap ? 0 : -1;
}

const char *kv_data_root(void)
{
    static char root[PATH_MAX];
    static int found;
    if (found)
        return root;
    const char *home = getenv("KEVO_HOME");
    if (home && *home && strlen(home) < sizeof root)
        snprintf(root, sizeof root, "%s", home);
    else if (installed_root(root, sizeof root) != 0)
        snprintf(root, sizeof root, "%s", KEVO_SOURCE_DIR);
    found = 1;
    return root;
}
