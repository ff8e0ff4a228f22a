/* mutator.c — what every mutator and the search share: freeing a proposal
 * or a finished request, and the LLM budgets' test. */
#include <stdlib.h>
#include <string.h>

#include "mutate/mutator.h"

void kv_proposal_free(kv_proposal *p)
{
    free(p->src);
    memset(p, 0, sizeof *p);
}

void kv_mut_done_free(kv_mut_done *d)
{
    kv_proposal_free(&d->prop);
    memset(d, 0, sizeof *d);
}

const char *kv_mut_budget_over(const kv_mut_budget *b, uint64_t tokens, double usd, int strict)
{
    uint64_t t = b->tokens_spent + tokens;
    double u = b->usd_spent + usd;
    if (b->tokens_limit > 0 && (strict ? t > (uint64_t)b->tokens_limit
                                       : t >= (uint64_t)b->tokens_limit))
        return "LLM token budget spent";
    if (b->usd_limit > 0 && (strict ? u > b->usd_limit : u >= b->usd_limit))
        return "LLM cost budget spent";
    return NULL;
}
