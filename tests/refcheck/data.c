/* data.c — a `kevo baseline --dump` directory read into a kv_host_call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "refcheck/refcheck.h"

static int load_one(const char *path, void *buf, size_t bytes, kv_err *err)
{
    char *data = NULL;
    size_t len = 0;
    /* a dumped tensor is as large as its shape says (a GEMM's B passes the text limit) */
    if (kv_read_file_max(path, bytes, &data, &len, err) != 0)
        return -1;
    int rc = 0;
    if (len != bytes)
        rc = kv_err_set(err, "%s: %zu bytes, expected %zu", path, len, bytes);
    else
        memcpy(buf, data, bytes);
    free(data);
    return rc;
}

int rc_load_dump(kv_host_call *d, const char *dir, const char *side, kv_err *err)
{
    const kv_problem *p = d->p;
    char path[8192];
    for (int r = 0; r < d->world; r++) {
        for (int i = 0; i < p->n_inputs; i++) {
            snprintf(path, sizeof path, "%s/%s/rank%d/inputs/%s.bin", dir,
                     p->sizes[d->size].name, r, p->inputs[i].name);
            if (load_one(path, d->in[r][i], d->in_shape[i].bytes, err) != 0)
                return -1;
        }
        for (int j = 0; j < p->n_outputs; j++) {
            snprintf(path, sizeof path, "%s/%s/rank%d/%s/%s.bin", dir, p->sizes[d->size].name, r,
                     side, p->outputs[j].name);
            if (load_one(path, d->out[r][j], d->out_shape[j].bytes, err) != 0)
                return -1;
        }
    }
    return 0;
}
