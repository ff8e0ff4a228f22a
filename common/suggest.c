/* suggest.c — edit distance and "did you mean" suggestions. */
#include "common/suggest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Levenshtein distance with one row of the dynamic-programming table, sized
 * by the shorter string. Names are short, so a stack row nearly always does;
 * if a heap row cannot be had the answer is SIZE_MAX ("not similar"). */
size_t kv_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la < lb) {
        const char *t = a;
        a = b;
        b = t;
        size_t tl = la;
        la = lb;
        lb = tl;
    }
    if (lb == 0)
        return la;

    size_t stack_row[128];
    size_t *row = stack_row;
    if (lb + 1 > sizeof stack_row / sizeof stack_row[0]) {
        row = malloc((lb + 1) * sizeof *row);
        if (!row)
            return SIZE_MAX;
    }

    /* row[j] = distance between a[0..i) and b[0..j). */
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0]; /* value of row[j-1] from the previous i */
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    if (row != stack_row)
        free(row);
    return d;
}

const char *kv_suggest(const char *word, const char *const *candidates, size_t n)
{
    size_t limit = strlen(word) / 3;
    if (limit < 2)
        limit = 2;

    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i])
            continue;
        size_t d = kv_edit_distance(word, candidates[i]);
        if (d <= limit && d < best_d) { /* strict: ties keep the earlier one */
            best = candidates[i];
            best_d = d;
        }
    }
    return best;
}
