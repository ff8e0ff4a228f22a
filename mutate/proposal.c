/* proposal.c — the one thing every mutator's output needs: freeing it. */
#include <stdlib.h>
#include <string.h>

#include "mutate/mutator.h"

void kv_proposal_free(kv_proposal *p)
{
    free(p->src);
    memset(p, 0, sizeof *p);
}
