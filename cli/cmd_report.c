/* cmd_report.c — kevo report: the run's report as one HTML page
 * (report/html.h, docs/report.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fsutil.h"
#include "report/html.h"

static const char usage[] =
    "usage: kevo report [--run DIR] [--out FILE] [--link-gbps N]\n"
    "\n"
    "Writes the report of the run in DIR as one self-contained HTML page (inline CSS\n"
    "and SVG, no script, nothing fetched): the run's configuration without secrets\n"
    "and budgets spent, each model's share of accepted children, and per problem\n"
    "the behaviour grids, the best program per size, the anytime curves and the\n"
    "lineage of the best program, the verdicts over time, and the source of every\n"
    "program it links to. It reads one snapshot of the archive and events.jsonl up\n"
    "to its last complete line, so it may run while kevo run writes.\n"
    "\n"
    "  --run DIR   the run directory (default $KEVO_RUN, else the run_dir of the\n"
    "              default configuration); DIR may also be given alone\n"
    "  --out FILE  where to write the page (default DIR/report.html); written to a\n"
    "              temporary file beside it, then renamed\n"
    "  --link-gbps N  the link's measured ceiling per direction in GB/s, for the\n"
    "              \"of link\" column (default: the run's report.link_gbps; the\n"
    "              figure bench/link_overlap prints for this machine)\n";

static int run(int argc, char **argv)
{
    const char *run_dir = NULL, *out = NULL;
    kv_report_opts opts = {0};
    int dashdash = 0;
    char why[256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = kv_cli_run_dir_arg(argc, argv, &i, &dashdash, &run_dir, why, sizeof why);
        if (r < 0)
            return kv_cli_usage("report", usage, "%s", why);
        if (r > 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return kv_cli_help(usage);
        if (strcmp(a, "--out") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return kv_cli_usage("report", usage, "option '--out' needs a file");
            out = argv[++i];
        } else if (strncmp(a, "--out=", 6) == 0 && a[6]) {
            out = a + 6;
        } else if (strcmp(a, "--link-gbps") == 0 || strncmp(a, "--link-gbps=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : "");
            char *end;
            opts.link_gbps = strtod(v, &end);
            if (!v[0] || *end || !(opts.link_gbps >= 1 && opts.link_gbps <= 1e5))
                return kv_cli_usage("report", usage,
                                    "option '--link-gbps' needs a number of GB/s in 1..100000, "
                                    "not '%s'",
                                    v);
        } else {
            return kv_cli_usage("report", usage, "unknown option '%s'", a);
        }
    }
    if (!run_dir)
        run_dir = kv_cli_default_run_dir();
    kv_err err = {{0}};
    char path[PATH_MAX];
    if (!out) {
        if (kv_path_join(path, sizeof path, run_dir, "report.html", &err) != 0)
            return kv_cli_fail(&err);
        out = path;
    }
    if (kv_report_write(run_dir, out, &opts, &err) != 0)
        return kv_cli_fail(&err);
    printf("wrote %s\n", out);
    return KV_EXIT_OK;
}

const kv_command kv_cmd_report = {
    .name = "report",
    .summary = "write a run's report as one HTML page",
    .usage = usage,
    .run = run,
};
