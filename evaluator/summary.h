/* summary.h — what an evaluation found, typed, for those who show it (the
 * LLM prompt's feedback on a parent): the verdict, the evaluator's message
 * (a compiler's errors, a mismatch location), the compiler's resource report
 * and the cell. Made from a report, or decoded from the evidence the archive
 * keeps with a program (kv_eval_report_json's text): kv_eval_summary_decode
 * is the one place that reads that text back. */
#ifndef KEVO_EVALUATOR_SUMMARY_H
#define KEVO_EVALUATOR_SUMMARY_H

#include "evaluator/evaluate.h"

typedef struct {
    kv_verdict verdict;
    char message[KV_JOB_MSG_MAX];  /* "" when there is none */
    int cell;                      /* kv_cell index (common/cell.h); -1: not classified */
    char *compile_report;          /* ptxas' resource report; owned; NULL: none */
} kv_eval_summary;

/* The summary of a report just made. 0, or -1 (out of memory). */
int kv_eval_summary_of(const kv_eval_report *r, kv_eval_summary *out, kv_err *err);
/* The summary of stored evidence (NULL: an empty summary, verdict
 * KV_VERDICT_OK, no cell). 0, or -1 when the text is not the evidence's JSON;
 * *out then holds nothing to free. */
int kv_eval_summary_decode(const char *evidence, kv_eval_summary *out, kv_err *err);
void kv_eval_summary_free(kv_eval_summary *s);

#endif
