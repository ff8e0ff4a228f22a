/* mutator.c — what every mutator and the search share: freeing a proposal
 * or a finished request, the list of finished requests, and the LLM
 * budgets' test. */
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

struct kv_mut_done_node {
    kv_mut_done d;
    kv_mut_done_node *next;
};

void kv_mut_done_list_init(kv_mut_done_list *l)
{
    l->head = NULL;
    l->tail = &l->head;
    l->n = 0;
}

int kv_mut_done_list_push(kv_mut_done_list *l, kv_mut_done *d)
{
    kv_mut_done_node *n = calloc(1, sizeof *n);
    if (!n)
        return -1;
    n->d = *d;
    memset(d, 0, sizeof *d);
    *l->tail = n;
    l->tail = &n->next;
    l->n++;
    return 0;
}

int kv_mut_done_list_take(kv_mut_done_list *l, kv_mut_done *out)
{
    kv_mut_done_node *n = l->head;
    if (!n)
        return KV_NOTFOUND;
    l->head = n->next;
    if (!l->head)
        l->tail = &l->head;
    l->n--;
    *out = n->d; /* the proposal's source goes with it */
    free(n);
    return 0;
}

void kv_mut_done_list_free(kv_mut_done_list *l)
{
    while (l->head) {
        kv_mut_done_node *n = l->head;
        l->head = n->next;
        kv_mut_done_free(&n->d);
        free(n);
    }
    kv_mut_done_list_init(l);
}

const char *kv_mut_budget_over(const kv_mut_budget *b, uint64_t tokens, double usd, int strict)
{
    uint64_t t = b->tokens_spent + tokens;
    double u = b->usd_spent + usd;
    if (b->tokens_limit > 0 &&
        (strict ? t > (uint64_t)b->tokens_limit : t >= (uint64_t)b->tokens_limit))
        return "LLM token budget spent";
    if (b->usd_limit > 0 && (strict ? u > b->usd_limit : u >= b->usd_limit))
        return "LLM cost budget spent";
    return NULL;
}
