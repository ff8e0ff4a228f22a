/* cmd_eval.c — kevo eval: check and time one candidate against the reference. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "eval_report.h"
#include "eval_setup.h"
#include "common/fsutil.h"

#define EXIT_REJECTED 4

static const char usage[] =
    "usage: kevo eval --problem P [options] FILE.cu\n"
    "\n"
    "Compiles FILE.cu against include/kevo/kernel.h, runs it beside the problem's\n"
    "NCCL reference on W GPUs, checks every rank's outputs at every size (and the\n"
    "validation size), times both interleaved and classifies how it moves data.\n"
    "\n"
    "  --problem P        the problem (kevo problems lists them)\n"
    "  --world W          GPUs in the group (default 2)\n"
    "  --devices 0,1      which GPUs (default 0 .. W-1)\n"
    "  --sizes a,b        only these size classes\n"
    "  --screen           the screening protocol (20 warm-up, 50 timed calls)\n"
    "  --trials N         correctness trials per size (default 3)\n"
    "  --warmup N         warm-up calls per side (default 500)\n"
    "  --iters N          timed calls per side (default 100)\n"
    "  --timeout S        deadline of the job in seconds (default 120)\n"
    "  --timing MODE      graph (default): each side timed as replays of a CUDA graph\n"
    "                     of its calls, as inference engines run them; call: calls one\n"
    "                     by one from the host, each paying its launch\n"
    "  --allow-nvls       allow NVLink multicast (only where the machine allows it too)\n"
    "  --allow-runtime-lookups\n"
    "                     run a candidate that looks up driver entry points, loads code\n"
    "                     or starts processes at run time (refused otherwise)\n"
    "  --allow-unconfined start the workers where the kernel offers no Landlock\n"
    "                     (candidate code then runs unconfined; refused otherwise)\n"
    "  --json             the report as JSON\n"
    "  --dump DIR         write one call's inputs and both sides' outputs per size and\n"
    "                     rank under DIR (<size>/rank<r>/{inputs,reference,candidate}/\n"
    "                     <tensor>.bin, raw bytes)\n"
    "\n"
    "Exit status: 0 the candidate is correct (verdict ok), 4 it was rejected\n"
    "(compile_error, mismatch, runtime_error, hang, crash, nvls_refused, refused,\n"
    "implausible: a time below the problem's floor), 1 kevo itself failed, 2 usage\n"
    "error.\n";

static const struct option long_opts[] = {
    {"problem", required_argument, NULL, 'p'},
    {"world", required_argument, NULL, 'w'},
    {"devices", required_argument, NULL, 'd'},
    {"sizes", required_argument, NULL, 's'},
    {"screen", no_argument, NULL, 'S'},
    {"trials", required_argument, NULL, 't'},
    {"warmup", required_argument, NULL, 'W'},
    {"iters", required_argument, NULL, 'i'},
    {"timeout", required_argument, NULL, 'T'},
    {"allow-nvls", no_argument, NULL, 'N'},
    {"allow-runtime-lookups", no_argument, NULL, 'L'},
    {"allow-unconfined", no_argument, NULL, 'U'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {"dump", required_argument, NULL, 'D'},
    {"timing", required_argument, NULL, 'G'},
    {NULL, 0, NULL, 0},
};

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    kv_cli_eval_args a;
    kv_cli_eval_args_init(&a);
    const char *problem = NULL;
    int first = kv_cli_eval_parse(argc, argv, "eval", usage, long_opts, 1, &a, &problem);
    if (first < 0)
        return KV_EXIT_USAGE;
    if (first != argc - 1)
        return kv_cli_usage("eval", usage, "expected one FILE.cu");
    const char *file = argv[first];

    kv_err err = {{0}};
    kv_problem p;
    if (kv_cli_load_problem(problem, &p, &err) != 0)
        return kv_cli_fail(&err);
    char *src = NULL;
    size_t len = 0;
    kv_eval_opts o;
    kv_evaluator *ev = NULL;
    kv_eval_report rep;
    int code = KV_EXIT_FAIL;
    if (kv_read_file_max(file, KV_MAX_SOURCE_BYTES, &src, &len, &err) != 0 ||
        kv_cli_eval_opts(&a, &p, &o, &err) != 0 || kv_evaluator_new(&o, &ev, &err) != 0) {
        kv_cli_fail(&err);
        goto out;
    }
    if (kv_evaluate(ev, &p, src, len, &rep, &err) != 0) {
        kv_cli_fail(&err);
        goto out;
    }
    if (a.json) {
        char *json = kv_eval_report_json(&rep);
        printf("%s\n", json ? json : "{}");
        free(json);
    } else {
        kv_cli_print_report(stdout, p.name, file, a.world, &rep);
    }
    code = rep.verdict == KV_VERDICT_OK ? KV_EXIT_OK : EXIT_REJECTED;
    kv_eval_report_free(&rep);
out:
    kv_evaluator_free(ev);
    free(src);
    kv_problem_free(&p);
    return code;
}

const kv_command kv_cmd_eval = {
    .name = "eval",
    .summary = "check and time one candidate kernel on the GPUs",
    .usage = usage,
    .run = run,
};
