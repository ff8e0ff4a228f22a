/* hostcheck_dump.c — one size of a dump (kv_eval_opts.dump_dir: kevo eval
 * and kevo baseline --dump, worker/dump.c) read back into a kv_host_call,
 * for the host check (hostcheck.h). */
#include "evaluator/checks/hostcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"

/* One tensor's file into buf, which holds exactly bytes. */
static int load_tensor(const char *path, void *buf, size_t bytes, kv_err *err)
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

/* <dir>/<size>/rank<r>/<part>/<tensor>.bin into path. */
static int tensor_path(char *path, size_t cap, const char *dir, const char *size, int rank,
                       const char *part, const char *tensor, kv_err *err)
{
    if ((size_t)snprintf(path, cap, "%s/%s/rank%d/%s/%s.bin", dir, size, rank, part, tensor) >= cap)
        return kv_err_set(err, "%s/%s/rank%d/%s/%s.bin: path too long", dir, size, rank, part,
                          tensor);
    return 0;
}

int kv_host_call_load_dump(kv_host_call *d, const char *dir, const char *side, kv_err *err)
{
    const kv_problem *p = d->p;
    const char *size = p->sizes[d->size].name;
    char path[PATH_MAX];
    for (int r = 0; r < d->world; r++) {
        for (int i = 0; i < p->n_inputs; i++)
            if (tensor_path(path, sizeof path, dir, size, r, "inputs", p->inputs[i].name, err) !=
                    0 ||
                load_tensor(path, d->in[r][i], d->in_shape[i].bytes, err) != 0)
                return -1;
        for (int j = 0; j < p->n_outputs; j++)
            if (tensor_path(path, sizeof path, dir, size, r, side, p->outputs[j].name, err) != 0 ||
                load_tensor(path, d->out[r][j], d->out_shape[j].bytes, err) != 0)
                return -1;
    }
    return 0;
}
