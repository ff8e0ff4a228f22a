/* machine.c — the machine's NVLS policy, from the environment NCCL reads. */
#include "common/machine.h"

#include <ctype.h>
#include <stdlib.h>

int kv_machine_allows_nvls(void)
{
    const char *v = getenv("NCCL_NVLS_ENABLE");
    if (!v)
        return 1;
    while (isspace((unsigned char)*v))
        v++;
    if (!*v)
        return 1;
    char *end;
    long n = strtol(v, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    return !(end != v && *end == '\0' && n == 0);
}
