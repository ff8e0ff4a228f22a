/* eval_report.h — printing an evaluation or baseline report for people. */
#ifndef KEVO_CLI_EVAL_REPORT_H
#define KEVO_CLI_EVAL_REPORT_H

#include <stdio.h>

#include "evaluator/evaluator.h"

void kv_cli_print_report(FILE *out, const char *problem, const char *what, int world,
                         const kv_eval_report *r);

#endif
