/* group.h — a supervised group of W worker processes, one per GPU, with a
 * NCCL communicator and symmetric memory between them.
 *
 * The supervisor starts the workers (each in the group's own process group),
 * hands rank 0's NCCL unique id to all, sends jobs, enforces each job's
 * deadline, and on any failure (crash, hang, sticky CUDA error, protocol
 * violation) kills the whole group and starts it again. It is a state
 * machine driven by poll(): the evaluator's queue drives its groups from
 * its caller's loop (the search's, or kv_evaluate's wait).
 *
 * Internal to evaluator/ (its contract is evaluator/evaluator.h): the queue
 * (evalq.c) runs the groups; tests/ tests them directly. */
#ifndef KEVO_EVALUATOR_GROUP_H
#define KEVO_EVALUATOR_GROUP_H

#include <limits.h>
#include <poll.h>

#include "evaluator/confine/sandbox.h"
#include "evaluator/evaluator.h" /* KV_GROUP_MAX_WORLD */
#include "protocol/job.h"
#include "common/err.h"

/* kv_group_pollfds never needs more: a socket, a pidfd and an output pipe
 * per worker. */
#define KV_GROUP_MAX_POLLFDS (3 * KV_GROUP_MAX_WORLD)

typedef struct {
    int world;
    int devices[KV_GROUP_MAX_WORLD];
    char worker_path[PATH_MAX]; /* the kevo-worker binary */
    char log_dir[PATH_MAX];     /* worker-<group>-<rank>.log */
    int group_index;
    double start_timeout_s;  /* CUDA + NCCL initialisation */
    int recycle_every;       /* restart after this many jobs (0 = never) */
    size_t output_cap_bytes; /* per job, first and last bytes of a worker's output kept
                                    (0: 1 MiB) */
    size_t log_max_bytes;    /* a worker's log is rotated past this (0: 64 MiB) */
    kv_sandbox_opts sandbox; /* the workers' confinement (sandbox.h) */
} kv_group_opts;

typedef enum {
    KV_GROUP_STARTING,
    KV_GROUP_IDLE,
    KV_GROUP_BUSY,
    KV_GROUP_DEAD, /* failed to start; kv_group_restart to try again */
} kv_group_state;

typedef struct kv_group kv_group;

int kv_group_new(const kv_group_opts *o, kv_group **out, kv_err *err);
void kv_group_free(kv_group *g); /* kills the workers */
kv_group_state kv_group_get_state(const kv_group *g);

/* Starts (or restarts) the workers; non-blocking: the group becomes IDLE once
 * every worker reports its communicator ready. */
int kv_group_start(kv_group *g, kv_err *err);

/* Sends a job to an IDLE group; it must finish within deadline_s. */
int kv_group_submit(kv_group *g, const kv_job *job, double deadline_s, kv_err *err);

/* The fds to poll and the time (ms) until the next deadline, for the caller's
 * poll(); returns the number of fds written. */
int kv_group_pollfds(const kv_group *g, struct pollfd *fds, int cap, int *timeout_ms);

/* Advances the state machine (reads messages, checks deadlines, reaps dead
 * workers). Returns 1 when a job finished (its result in *res), 0 otherwise,
 * -1 on an error of kevo itself. A failed job (crash, hang, ...) is a result
 * with its verdict; the group restarts itself afterwards. */
int kv_group_step(kv_group *g, kv_job_result *res, kv_err *err);

/* Synchronous helpers built on the above. */
int kv_group_wait_ready(kv_group *g, kv_err *err);
int kv_group_run(kv_group *g, const kv_job *job, double deadline_s, kv_job_result *res,
                 kv_err *err);

/* Seconds the last restart took (kill + start until ready). */
double kv_group_last_restart_s(const kv_group *g);

/* Why the group is DEAD (or the last failure outside a job, after which an
 * idle group restarted); "" when there was none. */
const char *kv_group_last_error(const kv_group *g);

#endif
