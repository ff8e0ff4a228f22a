/* archive_upgrade.c — kevo archive upgrade: convert a run's archive of an
 * older schema to this kevo's (kv_archive_upgrade, archive/upgrade.h). Like
 * restore it writes to the run directory, so the directory is named, never
 * a default. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "archive_cmd.h"
#include "cli.h"
#include "archive/archive.h"
#include "archive/upgrade.h"

const char kv_cli_archive_upgrade_usage[] =
    "usage: kevo archive upgrade DIR\n"
    "\n"
    "Converts DIR/archive.mdb from an older schema to this kevo's (schema 1, whose\n"
    "sources are in kevo's own LZ77 coder, to schema 2: zstd with a dictionary).\n"
    "Every record is copied into a new file, each source decoded, stored with zstd\n"
    "and compared with what it was; the new file is checked record by record, and\n"
    "only then does it replace archive.mdb. The old file is kept as\n"
    "archive.mdb.v1-<UTC> and never deleted; a failure before the replacement\n"
    "leaves archive.mdb as it was. An archive that already has this kevo's schema\n"
    "is left alone. Refused while a process has the archive open (a run, or a\n"
    "reader): stop it first. DIR may also be given as --run DIR.\n";

/* "kevo archive upgrade: <message>" and the usage; KV_EXIT_USAGE. */
#define usage_error(...) kv_cli_usage("archive upgrade", kv_cli_archive_upgrade_usage, __VA_ARGS__)

int kv_cli_archive_upgrade(int argc, char **argv, const char *run_dir)
{
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
            return kv_cli_help(kv_cli_archive_upgrade_usage);
        return usage_error("unknown option '%s'", a);
    }
    if (!run_dir)
        return usage_error("missing the run directory DIR");

    kv_err err = {{0}};
    kv_upgrade_info ui;
    if (kv_archive_upgrade(run_dir, &ui, &err) != 0)
        return kv_cli_fail(&err);
    if (!ui.upgraded) {
        printf("%s/%s already has schema version %u: nothing to do\n", run_dir, KV_ARCHIVE_FILE,
               ui.from_version);
        return KV_EXIT_OK;
    }
    printf("upgraded %s/%s from schema version %u to %u: %" PRIu64 " records, %" PRIu64
           " sources (%" PRIu64 " bytes) re-encoded and compared byte for byte\n",
           run_dir, KV_ARCHIVE_FILE, ui.from_version, KV_ARCHIVE_SCHEMA_VERSION, ui.records,
           ui.sources, ui.source_bytes);
    printf("file size %" PRIu64 " -> %" PRIu64 " bytes\n", ui.old_bytes, ui.new_bytes);
    printf("the old archive is kept as %s\n", ui.aside);
    if (ui.lock_aside[0])
        printf("its lock file is kept as %s\n", ui.lock_aside);
    return KV_EXIT_OK; /* main checks that stdout was written */
}
