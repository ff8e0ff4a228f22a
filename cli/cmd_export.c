/* cmd_export.c — kevo export: a problem's best program at each measured size,
 * as a drop-in library (the programs' sources, a dispatcher that picks one
 * by the size of each call, a C header, a harness, CMakeLists.txt and a
 * README). export_plan.c decides what goes in, export_write.c writes it. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/views.h"
#include "cli.h"
#include "common/datadir.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "eval_setup.h"
#include "report/export_plan.h"
#include "report/export_write.h"

static const char usage[] =
    "usage: kevo export --problem P --out DIR [--run RUN] [--world W]\n"
    "\n"
    "Writes the problem's best correct program at each measured size (the\n"
    "archive's per-size ranking: full-protocol results only, ranked by the size's\n"
    "speedup over the reference) into DIR as a library to build with CMake:\n"
    "\n"
    "  programs/p<id>.cu     each chosen program, its source as kevo measured it\n"
    "  src/                  a dispatcher that runs, for each call, the program of the\n"
    "                        measured size nearest the call's input bytes (boundaries\n"
    "                        at the geometric midpoints), and a harness that makes\n"
    "                        contexts on an NCCL communicator without kevo\n"
    "  include/              the C header, the table of sizes and programs, kevo/kernel.h\n"
    "                        and the pattern headers the programs include\n"
    "  CMakeLists.txt        nvcc with the evaluator's flags; a shared or static library\n"
    "  README.md             the table (size, program, speedup, boundaries) and how to\n"
    "                        build and call it\n"
    "\n"
    "  --problem P   the problem (required)\n"
    "  --out DIR     a new or empty folder (required); written whole or not at all\n"
    "  --run RUN     the run directory (default $KEVO_RUN, else the default\n"
    "                configuration's run_dir if it holds an archive, else the\n"
    "                most recent run beside it)\n"
    "  --world W     the world whose input bytes per size the dispatcher compares\n"
    "                (default: the run's configured world, else 2)\n"
    "\n"
    "Refuses a problem without a correct program measured with the full protocol.\n"
    "Exit status: 0 written, 1 failed (nothing written), 2 usage error.\n";

static const struct option long_opts[] = {
    {"problem", required_argument, NULL, 'p'}, {"out", required_argument, NULL, 'o'},
    {"run", required_argument, NULL, 'r'},     {"world", required_argument, NULL, 'w'},
    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
};

static void print_summary(const kv_export_plan *plan, const char *out)
{
    char shown[4 * PATH_MAX], name[4 * KV_NAME_MAX];
    printf("wrote %s: %s, %d measured size%s, %d program%s (W=%d)\n", KV_TERM(shown, out),
           KV_TERM(name, plan->problem), plan->n_rows, plan->n_rows == 1 ? "" : "s",
           plan->n_programs, plan->n_programs == 1 ? "" : "s", plan->world);
    printf("%-14s %14s   %-36s %9s %9s\n", "size", "input bytes", "takes calls of bytes in",
           "program", "speedup");
    for (int r = 0; r < plan->n_rows; r++) {
        const kv_export_row *row = &plan->rows[r];
        char range[80], id[32], sp[32];
        if (row->hi == KV_EXPORT_NO_LIMIT)
            snprintf(range, sizeof range, "[%" PRIu64 ", no limit)", row->lo);
        else
            snprintf(range, sizeof range, "[%" PRIu64 ", %" PRIu64 ")", row->lo, row->hi);
        snprintf(id, sizeof id, "#%" PRIu64, row->best.program_id);
        kv_fmt_speedup(row->best.speedup, sp, sizeof sp);
        printf("%-14s %14" PRIu64 "   %-36s %9s %9s\n", KV_TERM(name, row->best.size), row->bytes,
               range, id, sp);
    }
    if (plan->notes[0]) {
        char note[4 * sizeof plan->notes];
        printf("left out:\n%s", KV_TERM(note, plan->notes));
    }
    printf("build: cmake -S %s -B %s/build && cmake --build %s/build\n", shown, shown, shown);
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    const char *problem = NULL, *out = NULL, *run_dir = NULL;
    long long world = 0;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (c) {
        case 'p': problem = optarg; break;
        case 'o': out = optarg; break;
        case 'r': run_dir = optarg; break;
        case 'w':
            if (kv_cli_parse_int(optarg, 1, KEVO_MAX_RANKS, &world) != 0)
                return kv_cli_usage("export", usage, "--world: expected 1 to %d, got '%s'",
                                    KEVO_MAX_RANKS, optarg);
            break;
        case ':':
            return kv_cli_usage("export", usage, "option '%s' needs a value", argv[optind - 1]);
        default: return kv_cli_usage("export", usage, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return kv_cli_usage("export", usage, "unexpected argument '%s'", argv[optind]);
    if (!problem || !*problem)
        return kv_cli_usage("export", usage, "missing --problem");
    if (!out || !*out)
        return kv_cli_usage("export", usage, "missing --out (the folder to write)");
    if (run_dir && !*run_dir)
        return kv_cli_usage("export", usage, "--run needs a directory");
    if (!run_dir)
        run_dir = kv_cli_reader_run_dir();

    kv_err err = {{0}};
    char patterns[PATH_MAX];
    if (kv_path_join(patterns, sizeof patterns, kv_data_root(), "patterns", &err) != 0)
        return kv_cli_fail(&err);
    kv_export_plan *plan = calloc(1, sizeof *plan);
    if (!plan) {
        kv_err_set(&err, "out of memory");
        return kv_cli_fail(&err);
    }
    int rc = kv_export_plan_make(run_dir, problem, (int)world, patterns, kv_cli_load_problem, plan,
                                 &err);
    if (rc == 0) {
        rc = kv_export_write(plan, out, kv_data_root(), &err);
        if (rc == 0)
            print_summary(plan, out);
        kv_export_plan_free(plan);
    }
    free(plan);
    return rc == 0 ? KV_EXIT_OK : kv_cli_fail(&err);
}

const kv_command kv_cmd_export = {
    .name = "export",
    .summary = "write a problem's best program per size as a library (CMake)",
    .usage = usage,
    .run = run,
};
