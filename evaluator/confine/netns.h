/* netns.h — a network namespace of a group's own, with only loopback up:
 * its workers can reach each other (NCCL's bootstrap over TCP on lo, its
 * abstract unix sockets, which are per namespace) and nothing else. Root
 * only (CAP_SYS_ADMIN); the supervisor makes one per group, and each rank
 * joins it between fork and exec, before it gives up root.
 *
 * Internal to evaluator/. */
#ifndef KEVO_EVALUATOR_NETNS_H
#define KEVO_EVALUATOR_NETNS_H

#include "common/err.h"

/* Whether a namespace can be made here: tried in a throw-away child. */
int kv_netns_possible(void);

/* Makes a namespace with loopback up, through a short-lived child that
 * unshares it; returns an fd of it (close-on-exec, >= 10), which keeps it
 * alive, or -1. */
int kv_netns_new(kv_err *err);

/* In the child, between fork and exec: joins the namespace. 0 or an errno;
 * async-signal-safe. */
int kv_netns_enter(int fd);

#endif
