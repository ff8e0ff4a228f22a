/* data.c — host buffers for every rank's tensors, and reading them from a
 * `kevo baseline --dump` directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "refcheck/refcheck.h"

int rc_data_init(rc_data *d, const kv_problem *p, int size, int world, char *why, size_t cap)
{
    memset(d, 0, sizeof *d);
    d->p = p;
    d->size = size;
    d->world = world;
    kv_err err = {{0}};
    if (kv_problem_shapes(p, size, world, d->in_shape, d->out_shape, &err) != 0) {
        snprintf(why, cap, "%s", err.msg);
        return -1;
    }
    for (int r = 0; r < world; r++) {
        for (int i = 0; i < p->n_inputs; i++)
            if (!(d->in[r][i] = calloc(1, d->in_shape[i].bytes ? d->in_shape[i].bytes : 1)))
                goto oom;
        for (int j = 0; j < p->n_outputs; j++)
            if (!(d->out[r][j] = calloc(1, d->out_shape[j].bytes ? d->out_shape[j].bytes : 1)))
                goto oom;
    }
    return 0;
oom:
    rc_data_free(d);
    snprintf(why, cap, "out of memory for the tensors of %s", p->name);
    return -1;
}

void rc_data_free(rc_data *d)
{
    for (int r = 0; r < KEVO_MAX_RANKS; r++)
        for (int i = 0; i < KEVO_MAX_TENSORS; i++) {
            free(d->in[r][i]);
            free(d->out[r][i]);
            d->in[r][i] = d->out[r][i] = NULL;
        }
}

static int load_one(const char *path, void *buf, size_t bytes, char *why, size_t cap)
{
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    /* a dumped tensor is as large as its shape says (a GEMM's B passes the text limit) */
    if (kv_read_file_max(path, bytes, &data, &len, &err) != 0) {
        snprintf(why, cap, "%s", err.msg);
        return -1;
    }
    int rc = 0;
    if (len != bytes) {
        snprintf(why, cap, "%s: %zu bytes, expected %zu", path, len, bytes);
        rc = -1;
    } else {
        memcpy(buf, data, bytes);
    }
    free(data);
    return rc;
}

int rc_data_load_dump(rc_data *d, const char *dir, const char *side, char *why, size_t cap)
{
    const kv_problem *p = d->p;
    char path[8192];
    for (int r = 0; r < d->world; r++) {
        for (int i = 0; i < p->n_inputs; i++) {
            snprintf(path, sizeof path, "%s/%s/rank%d/inputs/%s.bin", dir,
                     p->sizes[d->size].name, r, p->inputs[i].name);
            if (load_one(path, d->in[r][i], d->in_shape[i].bytes, why, cap) != 0)
                return -1;
        }
        for (int j = 0; j < p->n_outputs; j++) {
            snprintf(path, sizeof path, "%s/%s/rank%d/%s/%s.bin", dir, p->sizes[d->size].name, r,
                     side, p->outputs[j].name);
            if (load_one(path, d->out[r][j], d->out_shape[j].bytes, why, cap) != 0)
                return -1;
        }
    }
    return 0;
}
