/* candidate.c — loading a compiled candidate (or reference) into the worker. */
#include <dlfcn.h>
#include <string.h>

#include "worker/worker.h"

int kv_inputs_hook_load(const char *path, kevo_inputs_fn *out, kv_fail *f)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "loading the inputs hook %s: %s", path,
                           dlerror());
    void *sym = dlsym(dl, "kevo_inputs");
    if (!sym)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "%s defines no kevo_inputs (extern \"C\")",
                           path);
    memcpy(out, &sym, sizeof sym);
    return 0;
}

int kv_code_load(const char *path, int require_run, kv_code *c, kv_fail *f)
{
    memset(c, 0, sizeof *c);
    /* RTLD_LOCAL: two candidates' symbols never resolve against each other.
     * The handle is kept until the worker exits: unloading CUDA modules
     * while the context lives is a source of trouble, and workers are
     * recycled every N jobs anyway. */
    c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!c->dl)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR, "loading %s: %s", path, dlerror());
    /* dlsym returns an object pointer; C11 allows converting it through memcpy */
    void *sym;
    if ((sym = dlsym(c->dl, "kevo_init")))
        memcpy(&c->init, &sym, sizeof sym);
    if ((sym = dlsym(c->dl, "kevo_run")))
        memcpy(&c->run, &sym, sizeof sym);
    if ((sym = dlsym(c->dl, "kevo_fini")))
        memcpy(&c->fini, &sym, sizeof sym);
    if (require_run && !c->run)
        return kv_fail_set(f, KV_VERDICT_RUNTIME_ERROR,
                           "%s defines no kevo_run (it must be declared extern \"C\")", path);
    return 0;
}
