/* suggest.h — "did you mean" for unknown names (config keys, subcommands). */
#ifndef KEVO_SUGGEST_H
#define KEVO_SUGGEST_H

#include <stddef.h>

/* Edit distance (insertions, deletions, substitutions; case-sensitive). */
size_t kv_edit_distance(const char *a, const char *b);

/* The candidate nearest to word, or NULL when none is close enough to be a
 * plausible typo (distance > max(2, strlen(word) / 3)). */
const char *kv_suggest(const char *word, const char *const *candidates, size_t n);

#endif
