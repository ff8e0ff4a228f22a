/* store.c — an evaluation report into the archive (store.h). */
#include "search/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static void fill_result(kv_program *p, const kv_eval_report *r)
{
    p->verdict = r->verdict;
    p->n_sizes = 0;
    for (int i = 0; i < r->n_sizes && p->n_sizes < KV_MAX_SIZES; i++) {
        const kv_eval_size *s = &r->sizes[i];
        kv_size_result *d = &p->sizes[p->n_sizes++];
        snprintf(d->name, sizeof d->name, "%s", s->name);
        d->ref_us = s->ref.median;
        d->cand_us = s->cand.median;
        d->cand_p10_us = s->cand.p10;
        d->cand_p90_us = s->cand.p90;
        d->roofline_us = s->roofline_us;
        d->ok = s->ok;
        d->timing = !s->timed            ? KV_SIZE_TIMING_UNKNOWN
                    : s->graph_calls > 0 ? KV_SIZE_TIMING_GRAPH
                                         : KV_SIZE_TIMING_CALL;
    }
    p->speedup = r->verdict == KV_VERDICT_OK ? r->speedup : 0;
    p->roofline = r->roofline;
    /* the archive keeps cells by name (elite keys, program records) */
    kv_eval_cell_name(r, p->cell);
    p->evaluated_ns = kv_wall_ns();
}

int kv_store_evaluation(kv_archive *a, const kv_store_what *w, const char *src, size_t len,
                        const kv_eval_report *r, kv_store_outcome *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "%s", w->problem);
    snprintf(p.op, sizeof p.op, "%s", w->op);
    snprintf(p.model, sizeof p.model, "%s", w->model ? w->model : "");
    p.island = w->island;
    p.n_parents = 0;
    for (int i = 0; i < w->n_parents && i < KV_MAX_PARENTS; i++)
        p.parents[p.n_parents++] = w->parents[i];
    p.created_ns = kv_wall_ns();

    kv_txn *t = NULL;
    if (kv_write_begin(a, &t, err) != 0)
        return -1;
    if (kv_add_program(t, &p, src, len, &out->program_id, &out->existed, err) != 0)
        goto fail;
    p.id = out->program_id;
    fill_result(&p, r);
    p.protocol = w->screen || w->stage == KV_STAGE_SCREEN ? KV_PROTOCOL_SCREEN : KV_PROTOCOL_FULL;
    p.evidence = kv_eval_report_json(r); /* owned by p until kv_program_clear */
    if (kv_set_result(t, &p, err) != 0)
        goto fail;

    kv_attempt at;
    memset(&at, 0, sizeof at);
    at.time_ns = p.evaluated_ns;
    snprintf(at.problem, sizeof at.problem, "%s", w->problem);
    at.island = w->island;
    at.stage = w->stage;
    at.verdict = r->verdict;
    at.program_id = out->program_id;
    at.parent_id = w->n_parents > 0 ? w->parents[0] : 0;
    snprintf(at.op, sizeof at.op, "%s", w->op);
    snprintf(at.model, sizeof at.model, "%s", p.model);
    at.speedup = p.speedup;
    at.wall_s = r->wall_s;
    at.gpu_s = r->job.gpu_s;
    at.detail = r->verdict == KV_VERDICT_OK ? (char *)w->next : (char *)r->message; /* not freed */
    if (kv_add_attempt(t, &at, NULL, err) != 0)
        goto fail;

    if (r->verdict == KV_VERDICT_OK && p.cell[0]) {
        int lo = w->offer_own_island ? w->island : 0;
        int hi = w->offer_own_island ? w->island + 1 : w->n_islands;
        for (int i = lo >= 0 ? lo : hi; i < hi; i++) {
            kv_elite e;
            memset(&e, 0, sizeof e);
            snprintf(e.problem, sizeof e.problem, "%s", w->problem);
            e.island = i;
            snprintf(e.cell, sizeof e.cell, "%s", p.cell);
            e.program_id = out->program_id;
            e.fitness = w->fitness > 0 ? w->fitness : p.speedup;
            e.since_ns = p.evaluated_ns;
            int accepted = 0;
            if (kv_offer_elite(t, &e, &accepted, NULL, err) != 0)
                goto fail;
            out->elites_taken += accepted;
        }
    }
    if (w->state && kv_put_state(t, w->state, err) != 0)
        goto fail;
    kv_program_clear(&p);
    return kv_txn_commit(t, err);
fail:
    kv_program_clear(&p);
    kv_txn_abort(t);
    return -1;
}
