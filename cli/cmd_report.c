/* cmd_report.c — kevo report: the run's report as one HTML page.
 *
 * PLACEHOLDER (issue 26, branch r-refresh): the smallest command that the
 * Chromium test needs; the command written with the report generator on
 * another branch replaces it at merge. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>

#include "cli.h"
#include "common/fsutil.h"
#include "report/html.h"
#include "report/refresh.h"

static const char usage[] =
    "usage: kevo report [--run DIR] [--out FILE]\n"
    "\n"
    "Writes the report of the run in DIR (default runs/default) to FILE\n"
    "(default DIR/report.html).\n";

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    static const struct option opts[] = {{"run", required_argument, NULL, 'r'},
                                         {"out", required_argument, NULL, 'o'},
                                         {NULL, 0, NULL, 0}};
    const char *dir = "runs/default", *out = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (c == 'r')
            dir = optarg;
        else if (c == 'o')
            out = optarg;
        else
            return kv_cli_usage("report", usage, "unknown option '%s'", argv[optind - 1]);
    }
    if (optind < argc)
        return kv_cli_usage("report", usage, "unexpected argument '%s'", argv[optind]);
    kv_err err = {{0}};
    char path[PATH_MAX];
    if (!out && kv_path_join(path, sizeof path, dir, KV_REPORT_FILE, &err) != 0)
        return kv_cli_fail(&err);
    if (kv_report_write(dir, out ? out : path, &err) != 0)
        return kv_cli_fail(&err);
    printf("%s\n", out ? out : path);
    return KV_EXIT_OK;
}

const kv_command kv_cmd_report = {
    .name = "report",
    .summary = "write the run's report as an HTML page",
    .usage = usage,
    .run = run,
};
