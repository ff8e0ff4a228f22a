/* clock.h — wall and monotonic clocks in nanoseconds. */
#ifndef KEVO_CLOCK_H
#define KEVO_CLOCK_H

#include <stdint.h>

int64_t kv_wall_ns(void);      /* CLOCK_REALTIME, ns since the epoch */
int64_t kv_monotonic_ns(void); /* CLOCK_MONOTONIC */

/* Formats a wall time as "2026-11-22T05:00:00Z" into out (>= 21 bytes). */
void kv_format_utc(int64_t wall_ns, char *out, unsigned cap);

#endif
