/* clock.c — wall and monotonic clocks, UTC formatting. */
#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* clock_gettime can only fail on a bad clock id, which would be a build or
 * platform defect: there is no sensible time to return, so stop loudly. */
static int64_t now_ns(clockid_t id, const char *name)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        fprintf(stderr, "kevo: clock_gettime(%s): %s\n", name, strerror(errno));
        abort();
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t kv_wall_ns(void)
{
    return now_ns(CLOCK_REALTIME, "CLOCK_REALTIME");
}

int64_t kv_monotonic_ns(void)
{
    return now_ns(CLOCK_MONOTONIC, "CLOCK_MONOTONIC");
}

void kv_format_utc(int64_t wall_ns, char *out, unsigned cap)
{
    if (cap == 0)
        return;
    /* Floor division, so times before the epoch round down too. */
    int64_t secs = wall_ns / 1000000000;
    if (wall_ns % 1000000000 < 0)
        secs--;
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        out[0] = '\0'; /* out of range, or cap too small */
}
