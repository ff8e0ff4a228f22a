/* archive_verify.c — kevo archive verify: the full walk of the archive
 * (kv_archive_walk, archive/archive.h), every record of every database
 * decoded, in a child process that a damaged page may crash without taking
 * kevo down. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "archive_cmd.h"
#include "cli.h"

const char kv_cli_archive_verify_usage[] =
    "usage: kevo archive verify [--run DIR]\n"
    "\n"
    "Walks every database of the run's archive and decodes every record (its\n"
    "checksum, a program's source decompressed), in a child process, so that a\n"
    "damaged page that makes LMDB crash is reported, not suffered. Prints each\n"
    "damaged record as 'damaged: <database> <key>: <what>', then what is damaged\n"
    "and the snapshot that can replace it; exit status 1 when anything is.\n"
    "The other views make a quick walk (every page, no decoding) before they read.\n"
    "\n"
    "  --run DIR   the run directory (default $KEVO_RUN, else the default\n"
    "              configuration's run_dir if it holds an archive, else the\n"
    "              most recent run beside it)\n";

int kv_cli_archive_verify(int argc, char **argv, const char *run_dir)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return kv_cli_help(kv_cli_archive_verify_usage);
        if (strcmp(a, "--run") == 0 && i + 1 < argc && argv[i + 1][0] && !run_dir)
            run_dir = argv[++i];
        else if (strncmp(a, "--run=", 6) == 0 && a[6] && !run_dir)
            run_dir = a + 6;
        else if (strncmp(a, "--run", 5) == 0)
            return kv_cli_usage("archive verify", kv_cli_archive_verify_usage,
                                "option '--run' needs a directory, once");
        else
            return kv_cli_usage("archive verify", kv_cli_archive_verify_usage,
                                "unexpected argument '%s'", a);
    }
    if (!run_dir)
        run_dir = kv_cli_reader_run_dir();
    kv_err err = {{0}};
    kv_walk_info info;
    if (kv_archive_walk(run_dir, NULL, 1, stderr, &info, &err) != 0)
        return kv_cli_fail(&err);
    printf("%s/%s: sound (%" PRIu64 " records in every database, each decoded)\n", run_dir,
           KV_ARCHIVE_FILE, info.records);
    return KV_EXIT_OK;
}
