/* schedule_prompt.h — the schedule language as the LLM mutator's prompt
 * shows it (docs/mutation.md, "The prompt"): a compact grammar of
 * docs/schedules.md (the text form, the fields and their values, the phase
 * sequences, the invariants), kept here once, and the reply form that
 * answers with a schedule. */
#ifndef KEVO_MUTATE_SCHEDULE_PROMPT_H
#define KEVO_MUTATE_SCHEDULE_PROMPT_H

/* The grammar, as Markdown (about 3,500 characters). */
const char *kv_sched_prompt_grammar(void);

/* The third reply form, for the system message: a ```schedule block. */
const char *kv_sched_prompt_reply_form(void);

/* The fence tag of a schedule answer: "schedule". */
#define KV_SCHED_REPLY_TAG "schedule"

#endif
