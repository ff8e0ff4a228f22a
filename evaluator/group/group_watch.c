/* group_watch.c — what the workers of a group say and how they end: the
 * lines each sends on its protocol socket, checked against the phase of
 * the group (hello, uid, ready, progress, result), and the termination of
 * each, seen with waitid(WNOWAIT) so that the pid stays ours until
 * group_spawn.c reaps it. A worker that breaks the protocol fails the
 * group (kv_grp_fail). */
#include "evaluator/group/group_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "common/clock.h"

#define READS_PER_STEP 64 /* per worker, so that one cannot starve the others */

static void on_line(kv_group *g, int r, const char *line)
{
    worker *w = &g->w[r];
    enum phase ph = g->ph;
    if (ph != PH_STARTING && ph != PH_IDLE && ph != PH_BUSY)
        return; /* stopping or killing: nothing it says matters */
    kv_err e;
    kv_msg_type t;
    char q[96];
    if (kv_proto_type(line, &t, &e) != 0) {
        kv_grp_snippet(line, 80, q, sizeof q);
        kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent an unparsable line \"%s\" (%s)",
                    r, q, e.msg);
        return;
    }
    const char *tn = kv_msg_type_name(t);
    if (t == KV_MSG_RESULT) {
        if (ph != PH_BUSY || w->answered)
            goto out_of_order;
        uint64_t id;
        int rank;
        if (kv_proto_result_from_json(line, &id, &rank, &w->res, &e) != 0) {
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
            return;
        }
        if (rank != r || id != g->job.id) {
            kv_grp_fail(g, KV_VERDICT_CRASH, r,
                        "protocol: rank %d sent a result for rank %d, job %" PRIu64 " (job %" PRIu64
                        ")",
                        r, rank, id, g->job.id);
            return;
        }
        w->answered = 1;
        g->n_answered++;
        return;
    }
    if (t == KV_MSG_JOB || t == KV_MSG_INIT || t == KV_MSG_EXIT)
        goto out_of_order; /* the supervisor's messages */
    kv_proto_msg m;
    if (kv_proto_msg_from_json(line, &m, &e) != 0) {
        kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
        return;
    }
    if (t != KV_MSG_UID && m.rank != r) {
        kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent \"%s\" as rank %d", r, tn,
                    m.rank);
        return;
    }
    switch (t) {
    case KV_MSG_HELLO:
        if (ph != PH_STARTING || w->hello)
            goto out_of_order;
        if (m.device != g->o.devices[r]) {
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d says device %d, expected %d", r,
                        m.device, g->o.devices[r]);
            return;
        }
        w->hello = 1;
        return;
    case KV_MSG_UID: {
        if (ph != PH_STARTING || r != 0 || !w->hello || g->have_uid)
            goto out_of_order;
        g->have_uid = 1;
        m.type = KV_MSG_INIT;
        char *init = kv_proto_msg_to_json(&m);
        if (!init) {
            kv_grp_fail(g, KV_VERDICT_CRASH, -1, "out of memory");
            return;
        }
        for (int k = 0; k < g->o.world && g->ph == PH_STARTING; k++) {
            /* a worker that is gone shows as EOF and exit, with its status */
            if (g->w[k].fd >= 0 && kv_proto_send(g->w[k].fd, init, &e) != 0 && errno != EPIPE &&
                errno != ECONNRESET)
                kv_grp_fail(g, KV_VERDICT_CRASH, k, "sending init to rank %d: %s", k, e.msg);
        }
        free(init);
        return;
    }
    case KV_MSG_READY:
        if (ph != PH_STARTING || !w->hello || !g->have_uid || w->ready)
            goto out_of_order;
        w->ready = 1;
        g->n_ready++;
        return;
    case KV_MSG_PROGRESS:
        if (ph != PH_BUSY || w->answered)
            goto out_of_order;
        if (m.job != g->job.id) {
            kv_grp_fail(g, KV_VERDICT_CRASH, r,
                        "protocol: rank %d sent progress for job %" PRIu64 " (job %" PRIu64 ")", r,
                        m.job, g->job.id);
            return;
        }
        memcpy(w->phase, m.phase, sizeof w->phase);
        return;
    default: break;
    }
out_of_order:
    kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent \"%s\" out of order (group %s%s)",
                r, tn, kv_grp_phase_name(ph),
                ph == PH_BUSY && w->answered ? ", after its result"
                : !w->hello                  ? ", before hello"
                                             : "");
}

/* Reads what worker r has sent and handles every complete line. */
void kv_grp_pump(kv_group *g, int r)
{
    worker *w = &g->w[r];
    enum phase ph = g->ph;
    for (int i = 0; i < READS_PER_STEP; i++) {
        if (w->fd < 0 || w->rd.eof)
            return;
        size_t before = w->rd.len;
        kv_err e;
        if (kv_line_reader_fill(&w->rd, &e) != 0) {
            kv_grp_fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
            return;
        }
        int got = w->rd.len != before;
        char *line;
        while ((line = kv_line_reader_next(&w->rd)) != NULL) {
            on_line(g, r, line);
            free(line);
            if (g->ph != ph)
                return;
        }
        if (w->rd.eof && !w->eof_ns)
            w->eof_ns = kv_monotonic_ns();
        if (!got)
            return;
    }
}

/* Notices workers that terminated (without reaping them), and reads what
 * they wrote before they died. */
void kv_grp_watch_exits(kv_group *g)
{
    enum phase ph = g->ph;
    for (int r = 0; r < g->o.world && g->ph == ph; r++) {
        worker *w = &g->w[r];
        if (w->pid <= 0 || w->gone)
            continue;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int rc;
        do
            rc = waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT);
        while (rc < 0 && errno == EINTR);
        if (rc < 0) {
            w->gone = 1; /* ECHILD: reaped by someone else's waitpid(-1) */
            w->code = -1;
        } else if (si.si_pid == w->pid) {
            w->gone = 1;
            if (si.si_code == CLD_EXITED) {
                w->code = si.si_status;
            } else {
                w->code = -1;
                w->sig = si.si_status;
                w->core = si.si_code == CLD_DUMPED;
            }
        } else {
            continue;
        }
        kv_grp_close_fd(&w->pidfd);
        kv_grp_pump(g, r);
    }
}
