/* archive_restore.c — kevo archive restore: put a snapshot back as the run's
 * archive (kv_archive_restore, archive/snapshot.h). Unlike the views it writes
 * to the run directory, so it has its own arguments: the run directory is
 * named, never a default. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "archive_cmd.h"
#include "cli.h"
#include "common/clock.h"
#include "archive/snapshot.h"

const char kv_cli_archive_restore_usage[] =
    "usage: kevo archive restore DIR [--snapshot FILE]\n"
    "\n"
    "Puts a snapshot of the run's archive back as DIR/archive.mdb: FILE, or the\n"
    "newest snapshot in DIR/snapshots that opens and whose programs count right.\n"
    "The archive it replaces (damaged, or changed by another process) and its lock\n"
    "file are moved aside as archive.mdb.damaged-<UTC> and\n"
    "archive.mdb-lock.damaged-<UTC>, never deleted. 'kevo run DIR' then resumes\n"
    "the run from the snapshot's state. Refused while a process has the archive\n"
    "open (a run, or a reader): stop it first. DIR may also be given as --run DIR.\n"
    "\n"
    "  --snapshot FILE   the snapshot to restore (default: the newest good one)\n";

/* "kevo archive restore: <message>" and the usage; KV_EXIT_USAGE. */
#define usage_error(...) kv_cli_usage("archive restore", kv_cli_archive_restore_usage, __VA_ARGS__)

int kv_cli_archive_restore(int argc, char **argv, const char *run_dir)
{
    const char *from = NULL; /* --snapshot FILE */
    int dashdash = 0;
    char why[256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = kv_cli_run_dir_arg(argc, argv, &i, &dashdash, &run_dir, why, sizeof why);
        if (r < 0)
            return usage_error("%s", why);
        if (r > 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return kv_cli_help(kv_cli_archive_restore_usage);
        if (strcmp(a, "--snapshot") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return usage_error("option '%s' needs a value", a);
            from = argv[++i];
        } else if (strncmp(a, "--snapshot=", 11) == 0 && a[11]) {
            from = a + 11;
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!run_dir)
        return usage_error("missing the run directory DIR");

    kv_err err = {{0}};
    kv_restore_info ri;
    if (kv_archive_restore(run_dir, from, &ri, &err) != 0)
        return kv_cli_fail(&err);
    char taken[32];
    kv_format_utc(ri.from.taken_ns, taken, sizeof taken);
    printf("restored %s/%s from %s (taken %s)\n", run_dir, KV_ARCHIVE_FILE, ri.from.path,
           ri.from.taken_ns ? taken : "at an unknown time");
    if (ri.aside[0])
        printf("the archive it replaced is kept as %s\n", ri.aside);
    else
        printf("there was no archive to replace\n");
    if (ri.lock_aside[0])
        printf("its lock file is kept as %s\n", ri.lock_aside);
    printf("the archive holds %" PRIu64 " programs; 'kevo run %s' resumes the run from the "
           "snapshot's state\n",
           ri.programs, run_dir);
    return KV_EXIT_OK; /* main checks that stdout was written */
}
