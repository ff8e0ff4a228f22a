/* reply.h — an LLM's reply turned into a candidate source, strictly.
 *
 * A reply is used in one of two forms (docs/mutation.md):
 *   - exactly one fenced code block (```cuda, ```cu, ```cpp, ```c++, ```c or
 *     ```) holding the whole file;
 *   - one or more edit blocks
 *         <<<<<<< SEARCH
 *         text that occurs exactly once in the current source
 *         =======
 *         its replacement
 *         >>>>>>> REPLACE
 *     applied in order (each against the result of the ones before), either
 *     bare or inside fences; when a reply has edit blocks, they are what is
 *     used, and everything around them (prose, fences) is ignored.
 *   - exactly one fenced block tagged ```schedule (and no code block) holding
 *     a schedule of the parent's collective (docs/schedules.md): it is
 *     parsed (kv_sched_parse) and the candidate generated from it
 *     (kv_sched_generate); a schedule that does not parse, is for another
 *     collective, or cannot be generated is refused with the parser's or
 *     the generator's message.
 * Anything else (no code, two whole files, an edit whose SEARCH text is
 * missing or occurs more than once, a block left open) is refused with the
 * reason, which the search records as the proposal's attempt. */
#ifndef KEVO_MUTATE_REPLY_H
#define KEVO_MUTATE_REPLY_H

#include <stddef.h>

/* 0: *out (malloc'ed, NUL-terminated) is the new source; 1: the reply cannot
 * be used, `why` says why; -1: out of memory. CRLF line ends in the reply
 * are read as LF. */
int kv_reply_apply(const char *parent, size_t parent_len, const char *reply, char **out,
                   size_t *out_len, char *why, size_t why_cap);

typedef enum { KV_REPLY_CODE, KV_REPLY_EDITS, KV_REPLY_SCHEDULE } kv_reply_kind;

/* kv_reply_apply, also saying which form the reply had (*kind; set on
 * refusal too, to the form that was tried). */
int kv_reply_use(const char *parent, size_t parent_len, const char *reply, char **out,
                 size_t *out_len, kv_reply_kind *kind, char *why, size_t why_cap);

#endif
