/* group.c — the supervisor of one worker group: W processes, one per GPU,
 * started together, fed jobs, watched, killed and started again.
 *
 * The group is a state machine driven by poll(). Every worker has a
 * socketpair (its fd 3; our end non-blocking) and, where the kernel has
 * pidfd_open, a pidfd that becomes readable when it terminates; without
 * pidfds the group asks for a short poll timeout and checks with waitid.
 * Workers share one process group (rank 0's pid), so a kill reaches what a
 * candidate forked too.
 *
 * Phases (kv_group_get_state reports STOPPING and KILLING as STARTING):
 *   NONE     --start-->                      STARTING
 *   STARTING --all ready-->                  IDLE
 *   STARTING --failure or start timeout-->   KILLING, then DEAD
 *   IDLE     --submit-->                     BUSY
 *   BUSY     --ok result-->                  IDLE, or STOPPING after recycle_every jobs
 *   BUSY     --failure, deadline, not ok-->  KILLING, then STARTING
 *   IDLE     --a worker dies or talks-->     KILLING, then STARTING
 *   STOPPING --all exited, or 2 s-->         KILLING, then STARTING
 *   KILLING  --all reaped-->                 STARTING (spawned again) or DEAD
 *
 * Termination is seen with waitid(WNOWAIT) and the process is reaped only
 * after the kill of its process group: a pid we have not reaped cannot be
 * reused, so kill(-pgid) never reaches a stranger. docs/evaluator.md,
 * "Supervisor and workers", describes the protocol, the verdicts and the
 * restart policy.
 *
 * This file holds the state machine and the public API; group_watch.c
 * reads the workers' messages and notices their exits, group_spawn.c starts,
 * kills and reaps the processes, group_log.c writes the text of messages
 * (group_internal.h lists what they share). */
#include "evaluator/group/group_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"

#define STOP_GRACE_NS (2 * SEC)        /* recycle: "exit" sent, then SIGKILL */
#define EOF_GRACE_NS (200 * MS)        /* EOF on fd 3: wait this long for the exit status */
#define AFTER_FAIL_GRACE_NS (250 * MS) /* a rank reported a failure and left: others' answers */
#define TICK_MS 20                     /* poll period where pidfds are unavailable */
#define DEFAULT_START_TIMEOUT_S 300.0
#define DEFAULT_OUTPUT_CAP ((size_t)1 << 20)
#define DEFAULT_LOG_MAX ((size_t)64 << 20)
#define DRAIN_PER_STEP ((size_t)1 << 20) /* a flooding worker cannot hold the loop */

/* ---- stopping ------------------------------------------------------------------------------- */

static void go_dead(kv_group *g, const char *msg)
{
    snprintf(g->error, sizeof g->error, "%s", msg);
    kv_grp_start_kill(g, PH_DEAD);
}

/* Recycling: ask every worker to exit, kill after STOP_GRACE_NS. */
static void start_stop(kv_group *g)
{
    kv_proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = KV_MSG_EXIT;
    char *line = kv_proto_msg_to_json(&m);
    g->restart_ns = kv_monotonic_ns();
    if (!line) {
        kv_grp_start_kill(g, PH_STARTING);
        return;
    }
    for (int r = 0; r < g->o.world; r++)
        if (g->w[r].fd >= 0 && !g->w[r].gone)
            kv_proto_send(g->w[r].fd, line, NULL); /* a worker already gone is fine */
    free(line);
    g->ph = PH_STOPPING;
    g->until_ns = g->restart_ns + STOP_GRACE_NS;
}

/* ---- failures and results ------------------------------------------------------------------- */

static void job_failed(kv_group *g, kv_verdict v, int rank, const char *summary);

/* A job ended: its copy of the candidate goes, and each worker's output of
 * the job is written out (the kept tail behind the cut mark). */
static void end_job_files(kv_group *g)
{
    kv_sandbox_unstage_job(g->sb, &g->staged);
    for (int r = 0; r < g->o.world; r++)
        kv_out_flush(&g->w[r].out);
}

/* A failure outside any job's result: in STARTING the group is DEAD, in
 * IDLE it restarts, in BUSY the job fails with verdict v. */
void kv_grp_fail(kv_group *g, kv_verdict v, int rank, const char *fmt, ...)
{
    char summary[KV_JOB_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(summary, sizeof summary, fmt, ap);
    va_end(ap);
    if (g->ph == PH_BUSY) {
        job_failed(g, v, rank, summary);
        return;
    }
    if (g->ph != PH_STARTING && g->ph != PH_IDLE)
        return;
    char msg[KV_JOB_MSG_MAX];
    if (snprintf(msg, sizeof msg, "group %d, %s: %s", g->o.group_index,
                 g->ph == PH_STARTING ? "starting" : "idle", summary) < 0)
        memcpy(msg, summary, sizeof msg); /* cannot happen with these arguments */
    if (rank >= 0) {
        kv_strbuf b;
        kv_grp_msg_open(&b, msg, sizeof msg);
        kv_grp_add_log_tail(&b, &g->w[rank], rank);
        kv_grp_msg_close(&b, msg, sizeof msg);
    }
    if (g->ph == PH_STARTING) {
        go_dead(g, msg);
    } else {
        snprintf(g->error, sizeof g->error, "%s", msg);
        g->restart_ns = kv_monotonic_ns();
        kv_grp_start_kill(g, PH_STARTING);
    }
}

/* One line per rank: where it was and how it ended. */
static void add_rank_lines(kv_group *g, kv_strbuf *b)
{
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        char how[96];
        if (w->answered)
            kv_sb_printf(b, "\nrank %d: answered %s", r, kv_verdict_name(w->res.verdict));
        else
            kv_sb_printf(b, "\nrank %d: no result, phase %s", r,
                         w->phase[0] ? w->phase : "(none reported)");
        if (w->gone || (w->rd.eof && w->fd >= 0)) {
            kv_grp_describe_end(w, how, sizeof how);
            kv_sb_printf(b, ", %s", how);
        }
    }
}

static void set_size_names(kv_group *g, kv_job_result *res)
{
    res->n_sizes = g->job.n_sizes;
    for (int i = 0; i < res->n_sizes; i++)
        memcpy(res->sizes[i].name, g->job.sizes[i], sizeof res->sizes[i].name);
}

/* The job fails with verdict v (crash, hang): the result says why and
 * where, and the group restarts. */
static void job_failed(kv_group *g, kv_verdict v, int rank, const char *summary)
{
    int64_t now = kv_monotonic_ns();
    kv_job_result *res = &g->result;
    memset(res, 0, sizeof *res);
    res->verdict = v;
    set_size_names(g, res);
    snprintf(res->message, sizeof res->message, "%s", summary);
    kv_strbuf b;
    kv_grp_msg_open(&b, res->message, sizeof res->message);
    add_rank_lines(g, &b);
    for (int r = 0; r < g->o.world; r++)
        if (g->w[r].answered && g->w[r].res.verdict != KV_VERDICT_OK && g->w[r].res.message[0])
            kv_sb_printf(&b, "\nrank %d said: %s", r, g->w[r].res.message);
    if (rank >= 0)
        kv_grp_add_log_tail(&b, &g->w[rank], rank);
    kv_grp_msg_close(&b, res->message, sizeof res->message);
    res->wall_s = (double)(now - g->submit_ns) / SEC;
    end_job_files(g);
    g->have_result = 1;
    g->jobs++;
    g->restart_ns = now;
    kv_grp_start_kill(g, PH_STARTING);
}

/* A job with a dump: kevo copies what the workers wrote into the group's
 * dump/ to the user's folder (sandbox.h), which the workers never reach. A
 * copy that fails (a link or a FIFO left there, a full disk) fails the job. */
static void take_dump(kv_group *g, kv_job_result *res)
{
    if (!g->job.dump_dir[0])
        return;
    kv_err e = {{0}};
    if (kv_sandbox_take_dump(g->sb, g->job.dump_dir, &e) == 0)
        return;
    if (res->verdict == KV_VERDICT_OK)
        res->verdict = KV_VERDICT_RUNTIME_ERROR;
    kv_strbuf b;
    kv_grp_msg_open(&b, res->message, sizeof res->message);
    kv_sb_printf(&b, "%sthe dump: %s", res->message[0] ? "\n" : "", e.msg);
    kv_grp_msg_close(&b, res->message, sizeof res->message);
}

/* Every rank answered, or a rank answered with a failure and left: merge
 * the answers (in rank order; the message is that of the rank where the
 * worst failure originated), then restart, recycle or stay idle. */
static void job_done(kv_group *g)
{
    int64_t now = kv_monotonic_ns();
    kv_job_result *res = &g->result;
    memset(res, 0, sizeof *res);
    int first = 1, left = 0, speaker = -1;
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->gone || w->rd.eof)
            left = 1;
        if (!w->answered)
            continue;
        if (w->res.message[0]) {
            kv_strbuf b;
            kv_grp_msg_open(&b, "", sizeof w->res.message);
            kv_sb_printf(&b, "rank %d: %s", r, w->res.message);
            kv_grp_msg_close(&b, w->res.message, sizeof w->res.message);
        }
        if (kv_job_result_merge(res, &w->res, first))
            speaker = r;
        first = 0;
    }
    if (first) /* no answer at all: cannot happen, but never report ok for it */
        res->verdict = KV_VERDICT_CRASH;
    if (g->n_answered < g->o.world) {
        kv_strbuf b;
        kv_grp_msg_open(&b, res->message, sizeof res->message);
        for (int r = 0; r < g->o.world; r++) {
            worker *w = &g->w[r];
            if (w->answered)
                continue;
            kv_sb_printf(&b, "\nrank %d: no result (phase %s) after rank %d failed", r,
                         w->phase[0] ? w->phase : "(none reported)", g->failed_rank);
            if (w->gone) {
                char how[96];
                kv_grp_describe_end(w, how, sizeof how);
                kv_sb_printf(&b, "; it %s", how);
            }
        }
        kv_grp_msg_close(&b, res->message, sizeof res->message);
    }
    /* A candidate's runtime error usually says what failed on its own stderr (which launch,
     * which call); the answer only says that kevo_run returned non-zero. A refusal at run
     * time names the call there too. The log is that of the rank whose message we quote. */
    if (speaker >= 0 &&
        (res->verdict == KV_VERDICT_RUNTIME_ERROR || res->verdict == KV_VERDICT_REFUSED)) {
        kv_strbuf b;
        kv_grp_msg_open(&b, res->message, sizeof res->message);
        kv_grp_add_log_tail(&b, &g->w[speaker], speaker);
        kv_grp_msg_close(&b, res->message, sizeof res->message);
    }
    res->wall_s = (double)(now - g->submit_ns) / SEC;
    take_dump(g, res);
    end_job_files(g);
    g->have_result = 1;
    g->jobs++;
    if (res->verdict != KV_VERDICT_OK || left) {
        g->restart_ns = now;
        kv_grp_start_kill(g, PH_STARTING);
    } else if (g->o.recycle_every > 0 && g->jobs >= g->o.recycle_every) {
        start_stop(g);
    } else {
        g->ph = PH_IDLE;
    }
}

/* ---- phases --------------------------------------------------------------------------------- */

const char *kv_grp_phase_name(enum phase ph)
{
    switch (ph) {
    case PH_STARTING: return "starting";
    case PH_IDLE: return "idle";
    case PH_BUSY: return "running a job";
    default: return "stopping";
    }
}

/* A worker has left when it terminated, or closed fd 3 a while ago. */
static int has_left(const worker *w, int64_t now)
{
    return w->gone || (w->rd.eof && now - w->eof_ns >= EOF_GRACE_NS);
}

static void step_starting(kv_group *g, int64_t now)
{
    if (g->n_ready == g->o.world) {
        g->ph = PH_IDLE;
        if (g->restart_ns) {
            g->last_restart_s = (double)(now - g->restart_ns) / SEC;
            g->restart_ns = 0;
        }
        return;
    }
    for (int r = 0; r < g->o.world; r++) {
        if (has_left(&g->w[r], now)) {
            char how[96];
            kv_grp_describe_end(&g->w[r], how, sizeof how);
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "rank %d %s", r, how);
            return;
        }
    }
    if (now >= g->until_ns) {
        int r = 0;
        while (r < g->o.world - 1 && g->w[r].ready)
            r++;
        const worker *w = &g->w[r];
        kv_grp_fail(g, KV_VERDICT_CRASH, r,
                    "not ready within the start timeout of %g s (%d of %d ready; rank %d %s)",
                    g->o.start_timeout_s, g->n_ready, g->o.world, r,
                    !w->hello                ? "never said hello"
                    : r == 0 && !g->have_uid ? "never sent the NCCL unique id"
                                             : "never said ready");
    }
}

/* A hang: the summary names every rank that did not answer, with its phase;
 * the log tail that follows is the first one's. */
static void deadline_passed(kv_group *g)
{
    int first = -1;
    char others[KV_JOB_MSG_MAX / 2] = "";
    kv_strbuf b;
    kv_grp_msg_open(&b, others, sizeof others);
    for (int r = 0; r < g->o.world; r++) {
        if (g->w[r].answered)
            continue;
        if (first < 0)
            first = r;
        else
            kv_sb_printf(&b, "%s rank %d (phase %s)", b.len ? "," : "; no result from", r,
                         g->w[r].phase[0] ? g->w[r].phase : "(none reported)");
    }
    kv_grp_msg_close(&b, others, sizeof others);
    if (first < 0) /* every rank answered: job_done ran before this */
        first = 0;
    const char *phase = g->w[first].phase[0] ? g->w[first].phase : "(none reported)";
    kv_grp_fail(g, KV_VERDICT_HANG, first, "deadline of %g s passed in phase %s (rank %d)%s",
                g->deadline_s, phase, first, others);
}

static void step_busy(kv_group *g, int64_t now)
{
    if (g->n_answered == g->o.world) {
        job_done(g);
        return;
    }
    /* a rank that reported a failure and left: the others will not finish
     * (or fail because it left); collect what comes in a short while */
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (g->failed_rank < 0 && w->answered && has_left(w, now)) {
            if (w->res.verdict == KV_VERDICT_OK) {
                char how[96];
                kv_grp_describe_end(w, how, sizeof how);
                kv_grp_fail(g, KV_VERDICT_CRASH, r, "rank %d %s after answering ok", r, how);
                return;
            }
            g->failed_rank = r;
            g->grace_ns = now + AFTER_FAIL_GRACE_NS;
        }
    }
    int all_done = 1;
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->answered)
            continue;
        if (!has_left(w, now)) {
            all_done = 0;
            continue;
        }
        if (g->failed_rank < 0) {
            char how[96];
            kv_grp_describe_end(w, how, sizeof how);
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "rank %d %s in phase %s", r, how,
                        w->phase[0] ? w->phase : "(none reported)");
            return;
        }
    }
    if (g->failed_rank >= 0 && (all_done || now >= g->grace_ns)) {
        job_done(g);
        return;
    }
    if (now >= g->until_ns)
        deadline_passed(g);
}

static int take_result(kv_group *g, kv_job_result *res)
{
    if (res)
        memcpy(res, &g->result, sizeof *res);
    g->have_result = 0;
    return 1;
}

/* ---- public --------------------------------------------------------------------------------- */

int kv_group_new(const kv_group_opts *o, kv_group **out, kv_err *err)
{
    *out = NULL;
    if (o->world < 1 || o->world > KV_GROUP_MAX_WORLD)
        return kv_err_set(err, "group %d: world %d is out of range (1..%d)", o->group_index,
                          o->world, KV_GROUP_MAX_WORLD);
    for (int r = 0; r < o->world; r++)
        if (o->devices[r] < 0)
            return kv_err_set(err, "group %d: device %d of rank %d", o->group_index, o->devices[r],
                              r);
    if (!o->worker_path[0] || access(o->worker_path, X_OK) != 0)
        return kv_err_errno(err, o->worker_path[0] ? errno : ENOENT, "group %d: worker \"%s\"",
                            o->group_index, o->worker_path);
    if (!o->log_dir[0])
        return kv_err_set(err, "group %d: no log directory", o->group_index);
    if (kv_mkdir_own(o->log_dir, 0755, err) != 0)
        return kv_err_prefix(err, "group %d: log directory", o->group_index);
    kv_group *g = calloc(1, sizeof *g);
    if (!g)
        return kv_err_set(err, "group %d: out of memory", o->group_index);
    g->o = *o;
    if (!g->o.output_cap_bytes)
        g->o.output_cap_bytes = DEFAULT_OUTPUT_CAP;
    if (!g->o.log_max_bytes)
        g->o.log_max_bytes = DEFAULT_LOG_MAX;
    if (kv_sandbox_new(&g->o.sandbox, o->group_index, o->world, o->worker_path, &g->sb, err) != 0) {
        free(g);
        return -1;
    }
    if (!(g->o.start_timeout_s > 0))
        g->o.start_timeout_s = DEFAULT_START_TIMEOUT_S;
    if (g->o.start_timeout_s > 1e6)
        g->o.start_timeout_s = 1e6;
    g->ph = PH_NONE;
    g->failed_rank = -1;
    for (int r = 0; r < KV_GROUP_MAX_WORLD; r++) {
        kv_out_init(&g->w[r].out);
        kv_grp_reset_worker(&g->w[r]);
    }
    snprintf(g->error, sizeof g->error, "group %d: not started", o->group_index);
    *out = g;
    return 0;
}

void kv_group_free(kv_group *g)
{
    if (!g)
        return;
    kv_grp_kill_now(g);
    if (g->ph == PH_BUSY)
        kv_sandbox_unstage_job(g->sb, &g->staged);
    kv_sandbox_free(g->sb);
    free(g);
}

kv_group_state kv_group_get_state(const kv_group *g)
{
    if (g->have_result)
        return KV_GROUP_BUSY; /* until kv_group_step hands the result over */
    switch (g->ph) {
    case PH_IDLE: return KV_GROUP_IDLE;
    case PH_BUSY: return KV_GROUP_BUSY;
    case PH_STARTING:
    case PH_STOPPING: return KV_GROUP_STARTING;
    case PH_KILLING: return KV_GROUP_STARTING; /* DEAD, if so, once every process is reaped */
    default: return KV_GROUP_DEAD;
    }
}

int kv_group_start(kv_group *g, kv_err *err)
{
    switch (g->ph) {
    case PH_NONE:
    case PH_DEAD:
        g->error[0] = '\0';
        /* from DEAD, the time until ready counts as a restart */
        g->restart_ns = g->ph == PH_DEAD ? kv_monotonic_ns() : 0;
        if (kv_grp_any_process(g)) { /* a kill that timed out: try again */
            kv_grp_start_kill(g, PH_STARTING);
            if (g->ph == PH_DEAD)
                return kv_err_set(err, "%s", g->error);
            return 0;
        }
        return kv_grp_spawn_all(g, err);
    case PH_KILLING: g->then = PH_STARTING; return 0;
    default: /* a running group: restart it; a job in flight is dropped */
        g->restart_ns = kv_monotonic_ns();
        kv_grp_start_kill(g, PH_STARTING);
        return 0;
    }
}

int kv_group_submit(kv_group *g, const kv_job *job, double deadline_s, kv_err *err)
{
    if (g->have_result || g->ph != PH_IDLE)
        return kv_err_set(err, "group %d: not idle (%s)", g->o.group_index,
                          g->have_result ? "a result is waiting" : kv_grp_phase_name(g->ph));
    if (!(deadline_s > 0))
        return kv_err_set(err, "group %d: deadline %g s", g->o.group_index, deadline_s);
    if (job->n_sizes < 1 || job->n_sizes > KV_JOB_MAX_SIZES)
        return kv_err_set(err, "group %d: job %" PRIu64 " has %d sizes", g->o.group_index, job->id,
                          job->n_sizes);
    g->staged = *job;
    if (kv_sandbox_stage_job(g->sb, &g->staged, err) != 0) {
        kv_sandbox_unstage_job(g->sb, &g->staged);
        return kv_err_prefix(err, "group %d", g->o.group_index);
    }
    char *line = kv_proto_job_to_json(&g->staged);
    if (!line) {
        kv_sandbox_unstage_job(g->sb, &g->staged);
        return kv_err_set(err, "group %d: job %" PRIu64 ": out of memory", g->o.group_index,
                          job->id);
    }
    int64_t now = kv_monotonic_ns();
    g->job = *job;
    g->deadline_s = deadline_s;
    g->submit_ns = now;
    double d = deadline_s * SEC;
    g->until_ns = now + (d > 1e17 ? (int64_t)1e17 : (int64_t)d);
    g->n_answered = 0;
    g->failed_rank = -1;
    g->grace_ns = 0;
    for (int r = 0; r < g->o.world; r++) {
        g->w[r].answered = 0;
        g->w[r].phase[0] = '\0';
        kv_out_flush(&g->w[r].out); /* each job has its own window of output */
    }
    g->ph = PH_BUSY;
    for (int r = 0; r < g->o.world && g->ph == PH_BUSY; r++) {
        kv_err e;
        /* a worker that is gone shows as EOF and exit, with its status */
        if (kv_proto_send(g->w[r].fd, line, &e) != 0 && errno != EPIPE && errno != ECONNRESET)
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "sending the job to rank %d: %s", r, e.msg);
    }
    free(line);
    return 0;
}

int kv_group_pollfds(const kv_group *g, struct pollfd *fds, int cap, int *timeout_ms)
{
    int n = 0, tick = 0, full = 0;
    int64_t until = 0;
    if (g->have_result) {
        *timeout_ms = 0;
        return 0;
    }
    if (g->ph == PH_NONE || g->ph == PH_DEAD) {
        /* stuck processes: look again now and then */
        *timeout_ms = kv_grp_any_process(g) ? 1000 : -1;
        return 0;
    }
    int64_t now = kv_monotonic_ns();
    if (g->ph != PH_IDLE)
        until = g->until_ns;
    if (g->ph == PH_BUSY && g->grace_ns && g->grace_ns < until)
        until = g->grace_ns;
    for (int r = 0; r < g->o.world; r++) {
        const worker *w = &g->w[r];
        if (w->pid <= 0)
            continue;
        if (w->out.fd >= 0) {
            if (n < cap)
                fds[n++] = (struct pollfd){.fd = w->out.fd, .events = POLLIN};
            else
                full = 1;
        }
        if (g->ph != PH_KILLING && w->fd >= 0 && !w->rd.eof) {
            if (n < cap)
                fds[n++] = (struct pollfd){.fd = w->fd, .events = POLLIN};
            else
                full = 1;
        }
        if (w->rd.eof && !w->gone && (!until || w->eof_ns + EOF_GRACE_NS < until))
            until = w->eof_ns + EOF_GRACE_NS;
        if (!w->gone || g->ph == PH_KILLING) {
            if (w->pidfd >= 0 && !w->gone) {
                if (n < cap)
                    fds[n++] = (struct pollfd){.fd = w->pidfd, .events = POLLIN};
                else
                    full = 1;
            } else {
                tick = 1;
            }
        }
    }
    int64_t ms = -1;
    if (until) {
        ms = (until - now + MS - 1) / MS;
        if (ms < 0)
            ms = 0;
        if (ms > INT32_MAX)
            ms = INT32_MAX;
    }
    if ((tick || full) && (ms < 0 || ms > TICK_MS))
        ms = TICK_MS;
    *timeout_ms = (int)ms;
    return n;
}

int kv_group_step(kv_group *g, kv_job_result *res, kv_err *err)
{
    (void)err; /* failures of workers are results or states, not errors */
    if (g->have_result)
        return take_result(g, res);
    for (int r = 0; r < g->o.world; r++)
        kv_out_drain(&g->w[r].out, DRAIN_PER_STEP);
    int64_t now;
    switch (g->ph) {
    case PH_STARTING:
    case PH_IDLE:
    case PH_BUSY:
        for (int r = 0; r < g->o.world; r++) {
            enum phase ph = g->ph;
            kv_grp_pump(g, r);
            if (g->ph != ph)
                break;
        }
        if (g->ph == PH_STARTING || g->ph == PH_IDLE || g->ph == PH_BUSY)
            kv_grp_watch_exits(g);
        now = kv_monotonic_ns();
        if (g->ph == PH_STARTING) {
            step_starting(g, now);
        } else if (g->ph == PH_BUSY) {
            step_busy(g, now);
        } else if (g->ph == PH_IDLE) {
            for (int r = 0; r < g->o.world; r++) {
                if (has_left(&g->w[r], now)) {
                    char how[96];
                    kv_grp_describe_end(&g->w[r], how, sizeof how);
                    kv_grp_fail(g, KV_VERDICT_CRASH, r, "rank %d %s", r, how);
                    break;
                }
            }
        }
        break;
    case PH_STOPPING: {
        for (int r = 0; r < g->o.world; r++)
            kv_grp_pump(g, r); /* drained and ignored */
        kv_grp_watch_exits(g);
        int all = 1;
        for (int r = 0; r < g->o.world; r++)
            if (!g->w[r].gone)
                all = 0;
        if (all || kv_monotonic_ns() >= g->until_ns)
            kv_grp_start_kill(g, PH_STARTING);
        break;
    }
    case PH_KILLING: kv_grp_advance_kill(g); break;
    case PH_NONE:
    case PH_DEAD:
        if (kv_grp_any_process(g)) /* processes a kill left behind */
            kv_grp_advance_kill(g);
        break;
    }
    if (g->have_result)
        return take_result(g, res);
    return 0;
}

/* One round of the synchronous helpers: poll what the group waits on. */
static int wait_round(kv_group *g, kv_err *err)
{
    struct pollfd fds[KV_GROUP_MAX_POLLFDS];
    int timeout;
    int n = kv_group_pollfds(g, fds, KV_GROUP_MAX_POLLFDS, &timeout);
    if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
        return kv_err_errno(err, errno, "group %d: poll", g->o.group_index);
    return 0;
}

int kv_group_wait_ready(kv_group *g, kv_err *err)
{
    for (;;) {
        kv_group_state st = kv_group_get_state(g);
        if (st == KV_GROUP_IDLE)
            return 0;
        if (st == KV_GROUP_DEAD)
            return kv_err_set(err, "%s", g->error);
        if (st == KV_GROUP_BUSY)
            return kv_err_set(err, "group %d: busy with a job", g->o.group_index);
        if (wait_round(g, err) != 0)
            return -1;
        if (kv_group_step(g, NULL, err) < 0)
            return -1;
    }
}

int kv_group_run(kv_group *g, const kv_job *job, double deadline_s, kv_job_result *res, kv_err *err)
{
    if (kv_group_wait_ready(g, err) != 0)
        return -1;
    if (kv_group_submit(g, job, deadline_s, err) != 0)
        return -1;
    for (;;) {
        int rc = kv_group_step(g, res, err);
        if (rc != 0)
            return rc > 0 ? 0 : -1;
        if (wait_round(g, err) != 0)
            return -1;
    }
}

double kv_group_last_restart_s(const kv_group *g)
{
    return g->last_restart_s;
}

const char *kv_group_last_error(const kv_group *g)
{
    return g->error;
}
