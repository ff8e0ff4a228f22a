/* sandbox.h — the confinement of a group's worker processes, where candidate
 * code runs (kevo_init, kevo_run, kevo_fini, a problem's inputs hook).
 *
 * Each group has a directory of its own, <tmp>/kevo-<pid>-g<G>-XXXXXX/ (a
 * name mkdtemp chose, which no one could make first), made by
 * kv_sandbox_new and removed by kv_sandbox_free:
 *   bin/     a copy of the worker binary (the workers exec this copy)
 *   inbox/   copies of each job's shared objects and problem folder, staged
 *            by kv_sandbox_stage_job: the workers read these and never the
 *            compile cache or the problems' own folders
 *   r<R>/    rank R's scratch: its working directory, HOME and TMPDIR
 *   dump/    where the workers write a dump (kevo eval --dump), owned by
 *            their uid; kv_sandbox_take_dump copies it to the user's folder
 *
 * A worker is confined between fork and exec (kv_sandbox_enter), in this
 * order: a private mount namespace with a tmpfs of scratch_bytes over its
 * scratch (where one can be made); RLIMIT_CORE 0, RLIMIT_FSIZE scratch_bytes,
 * RLIMIT_NPROC; the group's network namespace, loopback only (as root:
 * netns.h); when kevo runs as root, the uid worker_uid + G with no
 * supplementary groups and so no capabilities (RLIMIT_NPROC does not bind
 * uid 0, whatever its capabilities); no_new_privs; then a Landlock domain:
 * read the system's libraries and configuration, /proc, /sys and the group's
 * bin/ and inbox/; write its scratch, /dev/shm, the GPU device files (and the
 * group's dump/); no signals to processes outside the
 * domain (Landlock ABI >= 6); last, the system-call filter
 * (common/syscall_filter.h). Its environment is the allow-list of
 * common/env.h. docs/evaluator.md, "Confinement", lists every
 * path and what each layer stops.
 *
 * Internal to evaluator/: what others may ask of it (kv_sandbox_probe,
 * kv_sandbox_describe) is in evaluator/evaluator.h. */
#ifndef KEVO_EVALUATOR_SANDBOX_H
#define KEVO_EVALUATOR_SANDBOX_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "evaluator/evaluator.h" /* kv_sandbox_support, kv_sandbox_probe, kv_sandbox_describe */
#include "protocol/job.h"
#include "common/err.h"

#define KV_SANDBOX_DEFAULT_SCRATCH (256u << 20)
#define KV_SANDBOX_DEFAULT_NPROC 1024
#define KV_SANDBOX_DEFAULT_UID 61000u
#define KV_SANDBOX_MAX_RANKS 8 /* KV_GROUP_MAX_WORLD */

typedef struct {
    int allow_unconfined;       /* start workers unconfined where Landlock is missing */
    size_t scratch_bytes;       /* 0: KV_SANDBOX_DEFAULT_SCRATCH */
    long nproc;                 /* tasks a worker's uid may run; 0: KV_SANDBOX_DEFAULT_NPROC */
    uint32_t worker_uid;        /* root only: group G runs as worker_uid + G; 0: default */
    int dump;                   /* the workers may write a dump into the group's dump/ */
    char private_dir[PATH_MAX]; /* "" or a folder the workers must not reach (the run
                                   directory); kv_sandbox_new fails if a rule would let them */
} kv_sandbox_opts;

typedef struct kv_sandbox kv_sandbox;

/* Probes the kernel, makes the group's directory with its copy of
 * worker_path, and builds one Landlock ruleset per rank. Fails when the
 * kernel offers no Landlock and !o->allow_unconfined, or when a rule would
 * open private_dir to the workers. *out is freed with kv_sandbox_free. */
int kv_sandbox_new(const kv_sandbox_opts *o, int group, int world, const char *worker_path,
                   kv_sandbox **out, kv_err *err);
/* Closes the rulesets and removes the group's directory. NULL is fine. */
void kv_sandbox_free(kv_sandbox *sb);

/* The copy of the worker binary to exec. */
const char *kv_sandbox_worker_path(const kv_sandbox *sb);
/* Whether the workers run confined (Landlock); 0 only when allowed unconfined. */
int kv_sandbox_confined(const kv_sandbox *sb);

/* Before rank r is forked: makes its scratch folder anew, empty, owned by
 * the worker's uid. */
int kv_sandbox_prepare_rank(kv_sandbox *sb, int rank, kv_err *err);
/* The environment rank r is exec'd with: the allowed part of ours
 * (common/env.h), with HOME and TMPDIR set to its scratch, and
 * NCCL_SOCKET_IFNAME=lo in a network namespace. Owned by sb; valid until kv_sandbox_free. */
char *const *kv_sandbox_envp(const kv_sandbox *sb, int rank);

/* In the child, between fork and exec: async-signal-safe system calls only.
 * Returns 0, or an errno with *what naming the step that failed. */
int kv_sandbox_enter(const kv_sandbox *sb, int rank, const char **what);

/* Root only: SIGKILL to every process of the group's uid, which reaches what
 * a candidate forked and moved out of the process group (setsid). A helper
 * process takes the uid and sends kill(-1); it is waited for. */
void kv_sandbox_kill_all(const kv_sandbox *sb);

/* Copies the job's shared objects and problem folder into the inbox and
 * points the job at the copies. The reference, the inputs hook and the
 * problem are copied once per group; the candidate on every job, and
 * kv_sandbox_unstage_job removes its copy. A job with a dump_dir is pointed
 * at the group's dump/, emptied (fails when the group has none). */
int kv_sandbox_stage_job(kv_sandbox *sb, kv_job *job, kv_err *err);
void kv_sandbox_unstage_job(kv_sandbox *sb, const kv_job *staged);
/* After a job with a dump: copies what the workers left in dump/ into the
 * existing folder dest (kv_copy_tree: folders and regular files only, owned
 * by kevo; dest itself keeps its owner and mode), then empties dump/. */
int kv_sandbox_take_dump(kv_sandbox *sb, const char *dest, kv_err *err);

/* ---- sandbox.c and sandbox_stage.c share these -------------------------------------------- */
/* the group's directory (<tmp>/kevo-<pid>-g<G>-XXXXXX) */
const char *kv_sandbox_dir(const kv_sandbox *sb);
/* its dump/, or "" when made without one */
const char *kv_sandbox_dump_dir(const kv_sandbox *sb);
/* Copies a regular file (at most max_bytes) to dst with the given mode,
 * through a temporary name. */
int kv_sandbox_copy_file(const char *src, const char *dst, int mode, size_t max_bytes, kv_err *err);

#endif
