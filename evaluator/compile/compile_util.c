/* compile_util.c — small helpers the compile pipeline's files share: string
 * copies, executables, sorting strings. */
#include "evaluator/compile/compile_internal.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small file-system and string helpers ---------------------------------- */

int kv_compile_is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int kv_compile_copy_str(char *out, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap)
        return -1;
    memcpy(out, s, n + 1);
    return 0;
}

int kv_compile_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}
