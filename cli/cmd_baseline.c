/* cmd_baseline.c — kevo baseline: the reference's times and roofline fractions. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "common/text.h"
#include "eval_report.h"
#include "eval_setup.h"

static const char usage[] =
    "usage: kevo baseline --problem P [options]\n"
    "\n"
    "Times the problem's NCCL reference at every size on W GPUs and prints each\n"
    "time with the roofline of that size (from the cost model and the link and\n"
    "compute ceilings) and the fraction of it the reference reaches.\n"
    "\n"
    "  --problem P        the problem (kevo problems lists them)\n"
    "  --world W          GPUs in the group (default 2)\n"
    "  --devices 0,1      which GPUs (default 0 .. W-1)\n"
    "  --sizes a,b        only these size classes\n"
    "  --screen           20 warm-up and 50 timed calls instead of 500 and 100\n"
    "  --warmup N, --iters N, --timeout S\n"
    "  --timing MODE      graph (default): each side timed as replays of a CUDA graph\n"
    "                     of its calls, as inference engines run them; call: calls one\n"
    "                     by one from the host, each paying its launch\n"
    "  --json             the report as JSON\n"
    "  --dump DIR         write one call's inputs and the reference's outputs per size\n"
    "                     and rank under DIR (<size>/rank<r>/{inputs,reference}/\n"
    "                     <tensor>.bin, raw bytes)\n";

static const struct option long_opts[] = {
    {"problem", required_argument, NULL, 'p'},
    {"world", required_argument, NULL, 'w'},
    {"devices", required_argument, NULL, 'd'},
    {"sizes", required_argument, NULL, 's'},
    {"screen", no_argument, NULL, 'S'},
    {"warmup", required_argument, NULL, 'W'},
    {"iters", required_argument, NULL, 'i'},
    {"timeout", required_argument, NULL, 'T'},
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
    int first = kv_cli_eval_parse(argc, argv, "baseline", usage, long_opts, 1, &a, &problem);
    if (first < 0)
        return KV_EXIT_USAGE;
    if (first != argc)
        return kv_cli_usage("baseline", usage, "unexpected argument '%s'", argv[first]);

    kv_err err = {{0}};
    kv_problem p;
    if (kv_cli_load_problem(problem, &p, &err) != 0)
        return kv_cli_fail(&err);
    kv_eval_opts o;
    kv_evaluator *ev = NULL;
    kv_eval_report rep;
    int code = KV_EXIT_FAIL;
    if (kv_cli_eval_opts(&a, &p, &o, &err) != 0 || kv_evaluator_new(&o, &ev, &err) != 0 ||
        kv_baseline(ev, &p, &rep, &err) != 0) {
        kv_cli_fail(&err);
        goto out;
    }
    if (a.json) {
        char *json = kv_eval_report_json(&rep);
        printf("%s\n", json ? json : "{}");
        free(json);
    } else {
        kv_cli_print_report(stdout, p.name, "NCCL reference", a.world, &rep);
    }
    code = rep.verdict == KV_VERDICT_OK ? KV_EXIT_OK : KV_EXIT_FAIL;
    if (rep.verdict != KV_VERDICT_OK) {
        char shown[4 * sizeof rep.message], name[4 * sizeof p.name];
        fprintf(stderr, "kevo: the reference of %s failed: %s\n", KV_TERM(name, p.name),
                KV_TERM(shown, rep.message));
    }
    kv_eval_report_free(&rep);
out:
    kv_evaluator_free(ev);
    kv_problem_free(&p);
    return code;
}

const kv_command kv_cmd_baseline = {
    .name = "baseline",
    .summary = "time a problem's NCCL reference and its roofline fraction",
    .usage = usage,
    .run = run,
};
