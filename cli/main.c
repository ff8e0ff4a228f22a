/* main.c — the kevo command: dispatch to subcommands, and the one check
 * that what they printed on stdout was written (output.c). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common/suggest.h"

/* Only subcommands that work are listed here. */
static const kv_command *const commands[] = {
    &kv_cmd_run,      &kv_cmd_eval,    &kv_cmd_baseline, &kv_cmd_seed,
    &kv_cmd_problems, &kv_cmd_archive, &kv_cmd_report,   &kv_cmd_export,
    &kv_cmd_schedule, &kv_cmd_config,  &kv_cmd_doctor,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *out)
{
    fprintf(out, "usage: kevo <command> [options]\n"
                 "\n"
                 "kevo searches for fast multi-GPU kernels (island MAP-Elites over how kernels\n"
                 "move data), checked and timed against NCCL references on real GPUs.\n"
                 "\n"
                 "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "\n'kevo <command> --help' describes a command.\n");
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return KV_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        print_usage(stdout);
        return KV_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("kevo %s\n", KEVO_VERSION);
        return KV_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, commands[i]->name) == 0)
            return commands[i]->run(argc - 1, argv + 1);

    const char *names[N_COMMANDS];
    for (size_t i = 0; i < N_COMMANDS; i++)
        names[i] = commands[i]->name;
    const char *near = kv_suggest(name, names, N_COMMANDS);
    if (near)
        fprintf(stderr, "kevo: unknown command '%s'; did you mean '%s'?\n\n", name, near);
    else
        fprintf(stderr, "kevo: unknown command '%s'\n\n", name);
    print_usage(stderr);
    return KV_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* a reader that stops reading (kevo archive list | head) is a normal end:
     * writes to stdout fail with EPIPE, and kv_cli_finish_stdout says nothing
     * (children reset their signals before exec: evaluator/group/group_spawn.c) */
    signal(SIGPIPE, SIG_IGN);
    return kv_cli_finish_stdout(dispatch(argc, argv));
}
