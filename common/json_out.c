/* json_out.c — JSON printed as valid UTF-8 (json_out.h). */
#include <stdlib.h>
#include <string.h>

#include "common/json_out.h"
#include "common/text.h"

char *kv_json_print(const cJSON *j, int formatted, size_t *replaced)
{
    if (replaced)
        *replaced = 0;
    char *raw = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!raw)
        return NULL;
    char *text = kv_utf8_repair(raw, strlen(raw), NULL, replaced);
    cJSON_free(raw);
    return text;
}
