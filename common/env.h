/* env.h — the environment kevo's children get: an allow-list of what CUDA,
 * NCCL and the toolchain need, never a secret of the user's
 * (docs/evaluator.md, "Confinement", lists it), and the erasure of a secret
 * from kevo's own environment. */
#ifndef KEVO_ENV_H
#define KEVO_ENV_H

/* Whether "NAME=value" may pass to a child: PATH, LD_LIBRARY_PATH, the
 * compiler's search paths and nvcc's flag variables, LANG, LANGUAGE, LC_*,
 * TZ, CUDA_*, NCCL_*, the sanitizers' options, and KEVO_FAKE_* (read by the
 * CPU tests' stand-in worker only); but no name holding KEY, SECRET, TOKEN,
 * PASSW, CREDENTIAL or AUTH (any case), whatever its prefix. */
int kv_env_allowed(const char *entry);

/* A NULL-terminated copy of the allowed entries of environ, with `extra`
 * ("NAME=value" strings, NULL-terminated; NULL for none) added, each
 * replacing an entry of the same name. Every string is the copy's own.
 * NULL when out of memory. Free with kv_env_free. */
char **kv_env_allowed_copy(const char *const extra[]);
void kv_env_free(char **env);

/* In a forked child that does not exec (the host check): environ becomes
 * its allowed entries, and the bytes of the others are overwritten, so that
 * /proc/self/environ shows none of them either. */
void kv_env_keep_allowed(void);

/* Removes NAME from the environment and overwrites the bytes of its value
 * where they lie: unsetenv alone leaves them in the block the process
 * started with, which /proc/<pid>/environ shows. */
void kv_env_erase(const char *name);

#endif
