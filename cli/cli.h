/* cli.h — what the kevo subcommands share: the command table, exit codes,
 * usage and error reporting. */
#ifndef KEVO_CLI_H
#define KEVO_CLI_H

#include <stdarg.h>

#include "common/err.h"

#define KV_EXIT_OK 0
#define KV_EXIT_FAIL 1  /* runtime error: one message naming what and where */
#define KV_EXIT_USAGE 2 /* unknown subcommand or flag, bad argument */

typedef struct {
    const char *name;
    const char *summary;
    const char *usage;                 /* full --help text */
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
} kv_command;

/* The subcommands (each in its own cmd_*.c). */
extern const kv_command kv_cmd_config;
extern const kv_command kv_cmd_archive;
extern const kv_command kv_cmd_problems;
extern const kv_command kv_cmd_eval;
extern const kv_command kv_cmd_baseline;
extern const kv_command kv_cmd_doctor;
extern const kv_command kv_cmd_seed;
extern const kv_command kv_cmd_run;
extern const kv_command kv_cmd_report;
extern const kv_command kv_cmd_export;
extern const kv_command kv_cmd_schedule;

/* kevo problems check (cmd_problems_check.c), run by kevo problems with argv[0]
 * "check". */
int kv_cli_problems_check(int argc, char **argv);

/* Prints "kevo <cmd>: <message>" and the usage to stderr; returns KV_EXIT_USAGE. */
int kv_cli_usage(const char *cmd, const char *usage, const char *fmt, ...) KV_PRINTF(3, 4);
/* kv_cli_usage with the message's arguments in ap, for a command's own
 * usage wrapper; ap is left for the caller to va_end. */
int kv_cli_vusage(const char *cmd, const char *usage, const char *fmt, va_list ap) KV_PRINTF(3, 0);
/* Prints "kevo: <message>" to stderr; returns KV_EXIT_FAIL. */
int kv_cli_fail(const kv_err *err);
/* 1 if argv[1..] asks for help (-h/--help) before any "--". */
int kv_cli_wants_help(int argc, char **argv);
/* Prints the help text to stdout; returns KV_EXIT_OK. */
int kv_cli_help(const char *usage);

/* Flushes stdout, remembering why the first failed flush failed: 0 or -1.
 * Commands call it where what they printed must come before a message on
 * stderr; main ends with kv_cli_finish_stdout, which flushes and closes
 * stdout and turns a failure into exit status 1 with "kevo: writing to
 * standard output: <reason>" (output.c). */
int kv_cli_flush_stdout(void);
int kv_cli_finish_stdout(int rc);
/* 1 when a write to stdout failed because its reader has gone (a closed
 * pipe: kevo archive list | head -1; main ignores SIGPIPE): a normal end,
 * on which kv_cli_finish_stdout says nothing and keeps rc, and a command
 * that stopped on the failed write ends with status 0. Else 0. */
int kv_cli_stdout_closed(void);

/* Strict number parsing for option values; 0 on success. */
int kv_cli_parse_int(const char *s, long long min, long long max, long long *out);

/* One argument of a subcommand that takes one run directory, as DIR or
 * --run DIR (restore, upgrade): argv[*i] when it is "--" (sets *dashdash),
 * "--run" (with the value after it, *i moved past it) or a positional DIR.
 * Returns 1 when it was one of those, 0 when it is another option (the
 * caller's own, or unknown), -1 with why (a usage message) when it is
 * wrong: a missing or empty value, a second run directory. */
int kv_cli_run_dir_arg(int argc, char **argv, int *i, int *dashdash, const char **run_dir,
                       char *why, size_t cap);

/* Default run directory for writers (kevo seed): $KEVO_RUN, else the
 * config default. Static storage or the environment's; never NULL. */
const char *kv_cli_default_run_dir(void);
/* Default run directory for readers (the archive's views, kevo export), when
 * no --run names one: $KEVO_RUN; else the config default when it holds an
 * archive; else the run beside it (under runs/) whose archive was modified
 * last, said on stderr ("kevo: reading runs/x (the most recent run; ...)");
 * else the config default, for the reader to report missing. Static storage
 * or the environment's; never NULL. */
const char *kv_cli_reader_run_dir(void);

#endif
