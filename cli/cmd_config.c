/* cmd_config.c — kevo config: check and show run configurations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval_setup.h"
#include "search/config.h"

static const char usage[] =
    "usage: kevo config check FILE    validate a run configuration and load\n"
    "                                 every problem it names\n"
    "       kevo config show FILE     print it with every default filled in\n"
    "       kevo config defaults      print the default configuration\n"
    "\n"
    "Errors name the JSON path of the offending value; unknown keys get the\n"
    "nearest valid key suggested. docs/config.md documents every key.\n";

static int print_json(const kv_config *cfg)
{
    char *json = kv_config_to_json(cfg);
    if (!json) {
        fprintf(stderr, "kevo: out of memory\n");
        return KV_EXIT_FAIL;
    }
    printf("%s\n", json);
    free(json);
    return KV_EXIT_OK;
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    if (argc < 2)
        return kv_cli_usage("config", usage, "missing action");
    const char *action = argv[1];
    for (int i = 2; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] != 0)
            return kv_cli_usage("config", usage, "unknown option '%s'", argv[i]);
    kv_config cfg;
    kv_err err = {{0}};
    if (strcmp(action, "defaults") == 0) {
        if (argc != 2)
            return kv_cli_usage("config", usage, "'defaults' takes no arguments");
        kv_config_defaults(&cfg);
        return print_json(&cfg);
    }
    if (strcmp(action, "check") != 0 && strcmp(action, "show") != 0)
        return kv_cli_usage("config", usage, "unknown action '%s'", action);
    if (argc != 3)
        return kv_cli_usage("config", usage, "'%s' takes one FILE", action);
    if (kv_config_load(argv[2], &cfg, &err) != 0)
        return kv_cli_fail(&err);
    if (strcmp(action, "show") == 0)
        return print_json(&cfg);
    if (kv_cli_check_problems(&cfg, argv[2], &err) != 0)
        return kv_cli_fail(&err);
    printf("%s: ok (%d problem%s, W=%d, %d island%s, %s mutator)\n", argv[2], cfg.n_problems,
           cfg.n_problems == 1 ? "" : "s", cfg.world, cfg.islands, cfg.islands == 1 ? "" : "s",
           cfg.mutator == KV_MUTATOR_LLM ? "llm" : "template");
    return KV_EXIT_OK;
}

const kv_command kv_cmd_config = {
    .name = "config",
    .summary = "check or show a run configuration",
    .usage = usage,
    .run = run,
};
