/* group_internal.h — what the files of the group supervisor share: the
 * group's state, its workers, and the calls between the files.
 *
 *   group.c        the state machine and the public API: start, submit,
 *                  pollfds, step, failures, results, restart policy
 *   group_watch.c  what the workers say (protocol lines) and their exits
 *   group_spawn.c  starting the workers (fork, exec, fds, process group,
 *                  log files, pidfds), killing and reaping them
 *   group_log.c    the text of messages: how a worker ended, quoted lines,
 *                  the last lines of a worker's log
 *   group_output.c the workers' stdout and stderr: a pipe each, drained into
 *                  the worker's log with a cap per job
 * The confinement of the workers is sandbox.c's (sandbox.h).
 *
 * group.c's opening comment describes the phases and the design. */
#ifndef KEVO_EVALUATOR_GROUP_INTERNAL_H
#define KEVO_EVALUATOR_GROUP_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "evaluator/group/group.h"
#include "protocol/protocol.h"
#include "evaluator/confine/sandbox.h"
#include "common/err.h"
#include "common/strbuf.h"

#define MS 1000000LL
#define SEC 1000000000LL

enum phase { PH_NONE, PH_STARTING, PH_IDLE, PH_BUSY, PH_STOPPING, PH_KILLING, PH_DEAD };

/* A worker's output on its way to its log (group_output.c). */
typedef struct {
    int fd;              /* our end of the pipe; -1 when closed */
    int log;             /* the log, O_APPEND; -1 when closed */
    char path[PATH_MAX]; /* worker-<group>-<rank>.log */
    off_t start;         /* the log's size when this process started */
    size_t cap;          /* head and tail kept per job */
    size_t log_max;      /* rotate past this */
    size_t head_left;    /* bytes of this job still written as they come */
    char *ring;          /* the last bytes past the head */
    size_t ring_cap, ring_len, ring_pos;
    uint64_t cut; /* bytes of this job dropped between head and ring */
} kv_outcap;

typedef struct {
    pid_t pid; /* > 0 until reaped */
    int pidfd; /* -1 where pidfd_open is unavailable */
    int fd;    /* our end of the socketpair; -1 when closed */
    kv_line_reader rd;
    int64_t eof_ns;      /* when EOF was read on fd; 0 before */
    int gone;            /* terminated (seen, not reaped yet) */
    int code, sig, core; /* exit code (-1 when killed or unknown), signal, core dumped */
    int hello, ready, answered;
    char phase[KV_PROTO_PHASE_MAX];
    kv_outcap out;     /* its stdout and stderr */
    kv_job_result res; /* its answer to the current job */
} worker;

struct kv_group {
    kv_group_opts o;
    kv_sandbox *sb; /* the workers' confinement and directories */
    kv_job staged;  /* BUSY: the job as sent (paths into the inbox) */
    enum phase ph;
    enum phase then; /* KILLING: PH_STARTING (restart) or PH_DEAD */
    pid_t pgid;
    worker w[KV_GROUP_MAX_WORLD];
    int have_uid, n_ready, n_answered;
    int64_t until_ns;   /* deadline of the phase: start, job, stop, kill */
    int64_t grace_ns;   /* BUSY: end of the wait after a rank failed and left; 0 none */
    int failed_rank;    /* BUSY: that rank; -1 none */
    int64_t restart_ns; /* when the restart in progress began; 0 none */
    double last_restart_s;
    kv_job job;
    double deadline_s;
    int64_t submit_ns;
    int jobs; /* finished since the last start */
    int have_result;
    kv_job_result result;
    char error[KV_JOB_MSG_MAX];
};

/* ---- group.c -------------------------------------------------------------------------------- */

/* A failure outside any job's result: in STARTING the group is DEAD, in
 * IDLE it restarts, in BUSY the job fails with verdict v. */
void kv_grp_fail(kv_group *g, kv_verdict v, int rank, const char *fmt, ...) KV_PRINTF(4, 5);
const char *kv_grp_phase_name(enum phase ph);

/* ---- group_watch.c -------------------------------------------------------------------------- */

/* Reads what worker r has sent and handles every complete line. */
void kv_grp_pump(kv_group *g, int r);
/* Notices workers that terminated (without reaping them), and reads what
 * they wrote before they died. */
void kv_grp_watch_exits(kv_group *g);

/* ---- group_spawn.c -------------------------------------------------------------------------- */

int kv_grp_any_process(const kv_group *g);
void kv_grp_close_fd(int *fd);
void kv_grp_reset_worker(worker *w);
/* Spawns every worker: the group is STARTING, or DEAD with g->error set. */
int kv_grp_spawn_all(kv_group *g, kv_err *err);
/* SIGKILL to the process group and to every worker (one may have left the
 * group); the group is KILLING, then `then` once kv_grp_advance_kill has
 * reaped them all. */
void kv_grp_start_kill(kv_group *g, enum phase then);
/* Reaps the killed workers; once all are, closes everything and starts the
 * group again (or leaves it DEAD). */
void kv_grp_advance_kill(kv_group *g);
/* kv_group_free: kills and reaps every process, waiting a bounded time,
 * and releases every worker's fds. */
void kv_grp_kill_now(kv_group *g);

/* ---- group_output.c ------------------------------------------------------------------------- */

void kv_out_init(kv_outcap *o);
/* Opens the log (rotating it if needed), writes `mark`, and makes the pipe;
 * *child_fd is its write end (close-on-exec) for the worker's fds 1 and 2. */
int kv_out_start(kv_outcap *o, const char *path, size_t cap, size_t log_max, const char *mark,
                 int *child_fd, kv_err *err);
/* Reads at most about `budget` bytes of what the worker wrote; returns how many. */
size_t kv_out_drain(kv_outcap *o, size_t budget);
/* Ends the current job's window: what is left in the pipe (bounded), then
 * the cut mark and the kept tail, into the log. */
void kv_out_flush(kv_outcap *o);
/* Flushes and closes (the path and start stay, for messages). */
void kv_out_close(kv_outcap *o);

/* ---- group_log.c ---------------------------------------------------------------------------- */

/* Extending a message held in a fixed array of cap (> 0) bytes:
 * kv_grp_msg_open starts b holding msg, limited to cap - 1 bytes so that
 * what is appended is cut at the array's end; kv_grp_msg_close puts b's text
 * into msg and frees b. When b ran out of memory, msg keeps its text from
 * before the appends and says that the rest was left out. */
void kv_grp_msg_open(kv_strbuf *b, const char *msg, size_t cap);
void kv_grp_msg_close(kv_strbuf *b, char *msg, size_t cap);
/* "exited with status 3", "killed by signal 11 (SIGSEGV)", ... */
void kv_grp_describe_end(const worker *w, char *out, size_t cap);
/* A line quoted for a message: at most max bytes, control characters as '?'. */
void kv_grp_snippet(const char *s, size_t max, char *out, size_t cap);
/* Appends the last lines this worker's process wrote to its log (its
 * output is flushed there first); b's oom flag says when out of memory. */
void kv_grp_add_log_tail(kv_strbuf *b, worker *w, int rank);

#endif
