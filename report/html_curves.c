/* html_curves.c — the report's SVG charts, drawn from events.jsonl
 * (html_events.c): a problem's anytime curves (id="anytime-<problem>": best
 * speedup against evaluations and against wall time, per island, the best
 * seed as a reference line), the run's verdicts over time (id="verdicts")
 * and its budgets spent over time (in the run section). Wall time is the
 * run's active time (kv_rp_active): a resumed run's axis has no gap, and a
 * thin dashed line marks each resume. */
#include "html_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 600
#define H 260
#define ML 50 /* margins: left, right, top, bottom */
#define MR 150
#define MT 14
#define MB 36

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

/* A nice step for about n ticks over [0, max]. */
static double tick_step(double max, int n)
{
    double raw = max / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* A chart: x and y of the data times xs and ys are the axes' units, which
 * run from 0 to xmax and ymax. */
typedef struct {
    FILE *f;
    double xmax, ymax;
    double xs, ys;
} plot;

/* Where a value in the axes' units lies, and where a datum does. */
static double ax(const plot *p, double u)
{
    return ML + (W - ML - MR) * (u / p->xmax);
}
static double ay(const plot *p, double u)
{
    return H - MB - (H - MT - MB) * (u / p->ymax);
}
static double px(const plot *p, double x)
{
    return ax(p, x * p->xs);
}
static double py(const plot *p, double y)
{
    return ay(p, y * p->ys);
}

/* The unit of a wall-time axis spanning span seconds: 60 or 3600. */
static double time_unit(double span)
{
    return span > 2 * 3600 ? 3600 : 60;
}
static const char *time_label(double unit)
{
    return unit == 60 ? "wall time (minutes)" : "wall time (hours)";
}

static void plot_begin(plot *p, const char *title, const char *xlabel, const char *ylabel)
{
    FILE *f = p->f;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" role=\"img\" data-xmax=\"%g\"><title>%s</title>\n",
            W, H, W, H, p->xmax, title);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n",
            ML, H - MB, W - MR, H - MB, ML, MT, ML, H - MB);
    double sx = tick_step(p->xmax, 5), sy = tick_step(p->ymax, 5);
    for (double x = 0; x <= p->xmax * 1.0001; x += sx)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>", ax(p, x),
                H - MB + 14, x);
    for (double y = 0; y <= p->ymax * 1.0001; y += sy)
        fprintf(f,
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>"
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>",
                ML - 4, ay(p, y) + 4, y, ML + 1, ay(p, y), W - MR, ay(p, y));
    fprintf(f,
            "\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>"
            "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" "
            "text-anchor=\"middle\">%s</text>\n",
            (ML + W - MR) / 2, H - 6, xlabel, (MT + H - MB) / 2, (MT + H - MB) / 2, ylabel);
}

static void legend(const plot *p, int i, const char *color, const char *dash, const char *label)
{
    int y = MT + 10 + 16 * i;
    fprintf(p->f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
            "stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\">%s</text>\n",
            W - MR + 8, y, W - MR + 28, y, color, dash, W - MR + 32, y + 4, label);
}

/* A thin dashed line at each resume of a chart whose x is active seconds. */
static void resume_marks(const plot *p, const kv_rp_events *ev)
{
    for (size_t i = 1; i < ev->n_procs; i++)
        fprintf(p->f,
                "<line class=\"resume\" data-t=\"%.1f\" x1=\"%.1f\" y1=\"%d\" "
                "x2=\"%.1f\" y2=\"%d\" stroke=\"#888\" stroke-width=\"0.75\" "
                "stroke-dasharray=\"2,2\"><title>resumed</title></line>\n",
                ev->procs[i].active, px(p, ev->procs[i].active), MT, px(p, ev->procs[i].active),
                H - MB);
}

/* ---- anytime curves -------------------------------------------------------------- */

typedef struct {
    double *x, *y; /* step points: the best so far where it rose */
    size_t n, cap;
    double best;
} series;

static int series_add(series *s, double x, double y)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        double *nx = realloc(s->x, cap * sizeof *nx);
        if (!nx)
            return -1;
        s->x = nx;
        double *ny = realloc(s->y, cap * sizeof *ny);
        if (!ny)
            return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return 0;
}

/* s as a polyline running on to xend: as steps (the value holds until the
 * next point) or straight between points. With name, the data themselves
 * follow as data-series="name" data-values="x,y ...". */
static void series_draw(const plot *p, const series *s, const char *color, double xend, int steps,
                        const char *name)
{
    if (s->n == 0)
        return;
    fprintf(p->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (size_t i = 0; i < s->n; i++) {
        if (i > 0 && steps)
            fprintf(p->f, "%.1f,%.1f ", px(p, s->x[i]), py(p, s->y[i - 1]));
        fprintf(p->f, "%.1f,%.1f ", px(p, s->x[i]), py(p, s->y[i]));
    }
    fprintf(p->f, "%.1f,%.1f\"", px(p, xend), py(p, s->y[s->n - 1]));
    if (name) {
        fprintf(p->f, " data-series=\"%s\" data-values=\"", name);
        for (size_t i = 0; i < s->n; i++)
            fprintf(p->f, "%s%.1f,%.6g", i ? " " : "", s->x[i], s->y[i]);
        fputc('"', p->f);
    }
    fputs("/>\n", p->f);
}

/* One chart: by = 0 evaluations, 1 wall time. */
static void anytime_chart(FILE *f, const kv_rp_events *ev, series *isl, int n_isl, double seed,
                          double xmax, double xs, double ymax, int by, const char *xlabel)
{
    plot p = {f, xmax > 0 ? xmax : 1, ymax > 0 ? ymax : 1, xs, 1};
    plot_begin(&p, by ? "best speedup against wall time" : "best speedup against evaluations",
               xlabel, "best speedup");
    if (by)
        resume_marks(&p, ev);
    int li = 0;
    if (seed > 0) {
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
                "stroke-dasharray=\"5,4\"/>\n",
                ML, py(&p, seed), W - MR, py(&p, seed));
        char label[48];
        snprintf(label, sizeof label, "best seed %.2fx", seed);
        legend(&p, li++, "#000", " stroke-dasharray=\"5,4\"", label);
    }
    for (int i = 0; i < n_isl; i++) {
        if (isl[2 * i + by].n == 0)
            continue;
        const char *color = palette[i % N_PALETTE];
        series_draw(&p, &isl[2 * i + by], color, p.xmax / p.xs, 1, NULL);
        char label[48];
        snprintf(label, sizeof label, "island %d %.2fx", i, isl[2 * i + by].best);
        if (li < 14)
            legend(&p, li++, color, "", label);
    }
    fputs("</svg>\n", f);
}

int kv_rp_anytime(kv_rp *r, const char *problem, kv_err *err)
{
    FILE *f = r->f;
    fputs("<section id=\"anytime-", f);
    kv_html_str(f, problem);
    fputs("\">\n<h3>Anytime curves</h3>\n", f);
    int pi = kv_rp_events_problem(&r->ev, problem);
    if (!r->ev.present || pi < 0) {
        fputs(r->ev.present ? "<p>No results of this problem in events.jsonl.</p>\n"
                            : "<p>No events.jsonl in the run directory.</p>\n",
              f);
        fputs("</section>\n", f);
        return 0;
    }
    int n_isl = 0;
    double seed = 0, ymax = 0, emax = 0, tmax = 0;
    for (size_t i = 0; i < r->ev.n; i++) {
        const kv_rp_result *e = &r->ev.v[i];
        if (e->problem != (uint32_t)pi)
            continue;
        if (e->island >= n_isl && e->island < 64)
            n_isl = e->island + 1;
        if ((double)e->evaluations > emax)
            emax = (double)e->evaluations;
        if (kv_rp_active(&r->ev, e->t) > tmax)
            tmax = kv_rp_active(&r->ev, e->t);
    }
    /* series 2i: island i against evaluations; 2i + 1: against wall time */
    series *isl = calloc((size_t)(n_isl ? 2 * n_isl : 1), sizeof *isl);
    if (!isl)
        return kv_err_set(err, "out of memory");
    int rc = 0;
    double tunit = time_unit(tmax);
    for (size_t i = 0; i < r->ev.n && rc == 0; i++) {
        const kv_rp_result *e = &r->ev.v[i];
        if (e->problem != (uint32_t)pi || e->verdict != KV_VERDICT_OK || !(e->speedup > 0))
            continue;
        if (e->speedup > ymax)
            ymax = e->speedup;
        if (e->seed && e->speedup > seed)
            seed = e->speedup;
        if (e->island < 0 || e->island >= n_isl)
            continue;
        series *s = &isl[2 * e->island];
        if (e->speedup > s->best) {
            s[0].best = s[1].best = e->speedup;
            if (series_add(&s[0], (double)e->evaluations, e->speedup) ||
                series_add(&s[1], kv_rp_active(&r->ev, e->t), e->speedup))
                rc = kv_err_set(err, "out of memory");
        }
    }
    if (rc == 0) {
        anytime_chart(f, &r->ev, isl, n_isl, seed, emax, 1, ymax * 1.1, 0, "evaluations");
        anytime_chart(f, &r->ev, isl, n_isl, seed, tmax / tunit, 1 / tunit, ymax * 1.1, 1,
                      time_label(tunit));
        fputs("</section>\n", f);
    }
    for (int i = 0; i < 2 * n_isl; i++) {
        free(isl[i].x);
        free(isl[i].y);
    }
    free(isl);
    return rc;
}

/* ---- verdicts over time ------------------------------------------------------------ */

#define N_BINS 40

int kv_rp_verdicts(kv_rp *r, kv_err *err)
{
    (void)err;
    FILE *f = r->f;
    fputs("<section id=\"verdicts\">\n<h2>Verdicts over time</h2>\n", f);
    if (!r->ev.present || r->ev.n == 0) {
        fputs(r->ev.present ? "<p>No results in events.jsonl yet.</p>\n"
                            : "<p>No events.jsonl in the run directory.</p>\n",
              f);
        fputs("</section>\n", f);
        return 0;
    }
    uint32_t bins[N_BINS][KV_VERDICT_COUNT];
    uint64_t total[KV_VERDICT_COUNT] = {0};
    memset(bins, 0, sizeof bins);
    double span = kv_rp_active(&r->ev, r->ev.t_end);
    span = span > 0 ? span : 1;
    for (size_t i = 0; i < r->ev.n; i++) {
        const kv_rp_result *e = &r->ev.v[i];
        int b = (int)(kv_rp_active(&r->ev, e->t) / span * N_BINS);
        b = b < 0 ? 0 : b >= N_BINS ? N_BINS - 1 : b;
        unsigned v = e->verdict < KV_VERDICT_COUNT ? e->verdict : KV_VERDICT_NONE;
        bins[b][v]++;
        total[v]++;
    }
    uint32_t most = 1;
    for (int b = 0; b < N_BINS; b++) {
        uint32_t s = 0;
        for (int v = 0; v < KV_VERDICT_COUNT; v++)
            s += bins[b][v];
        if (s > most)
            most = s;
    }
    double hours = span / 3600;
    fprintf(f, "<p>%zu results over %.2f h: %.1f evaluations per hour.</p>\n", r->ev.n, hours,
            (double)r->ev.n / hours);
    if (r->ev.capacity_s > 0)
        fprintf(f,
                "<p>GPU busy: %.0f%% (results held a GPU group %.2f h of %.2f group-hours "
                "the processes had).</p>\n",
                100 * r->ev.group_s / r->ev.capacity_s, r->ev.group_s / 3600,
                r->ev.capacity_s / 3600);
    else
        fputs("<p>GPU busy: unknown (no start event with its GPU groups).</p>\n", f);
    double tunit = time_unit(span);
    plot p = {f, span / tunit, most * 1.1, 1 / tunit, 1};
    plot_begin(&p, "verdicts over time", time_label(tunit), "results per bin");
    double bw = (double)(W - ML - MR) / N_BINS;
    for (int b = 0; b < N_BINS; b++) {
        double y0 = 0;
        for (int v = 0; v < KV_VERDICT_COUNT; v++) {
            if (!bins[b][v])
                continue;
            double y1 = y0 + bins[b][v];
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>",
                    ML + b * bw + 0.5, py(&p, y1), bw - 1, py(&p, y0) - py(&p, y1),
                    palette[v % N_PALETTE]);
            y0 = y1;
        }
    }
    fputs("\n", f);
    resume_marks(&p, &r->ev);
    int li = 0;
    for (int v = 0; v < KV_VERDICT_COUNT; v++)
        if (total[v])
            legend(&p, li++, palette[v % N_PALETTE], "", kv_verdict_name((kv_verdict)v));
    fputs("</svg>\n<table><tr><th class=\"l\">verdict</th><th>results</th><th>per hour</th></tr>\n",
          f);
    for (int v = 0; v < KV_VERDICT_COUNT; v++)
        if (total[v])
            fprintf(f, "<tr><td class=\"l\">%s</td><td>%llu</td><td>%.1f</td></tr>\n",
                    kv_verdict_name((kv_verdict)v), (unsigned long long)total[v],
                    (double)total[v] / hours);
    fputs("</table>\n</section>\n", f);
    return 0;
}

/* ---- budgets over time ------------------------------------------------------------- */

enum { B_EVALUATIONS, B_WALL, B_TOKENS, B_COST, N_BUDGETS };

/* Each budget: its key under the configuration's "budget" (whose units its
 * data are in), how the page names it, in a title and in a legend. */
static const struct {
    const char *key, *name, *brief;
} budgets[N_BUDGETS] = {
    {"evaluations", "evaluations", "evaluations"},
    {"wall_hours", "wall time (hours)", "wall time"},
    {"llm_tokens", "LLM tokens", "tokens"},
    {"cost_usd", "LLM cost (USD)", "cost"},
};

/* The data of each budget: x active seconds, y spent so far. 0, or -1 when
 * out of memory. */
static int budget_series(const kv_rp_events *ev, series *b)
{
    for (size_t i = 0; i < ev->n; i++) {
        const kv_rp_result *e = &ev->v[i];
        series *s = &b[B_EVALUATIONS];
        if ((s->n == 0 || (double)e->evaluations > s->y[s->n - 1]) &&
            series_add(s, kv_rp_active(ev, e->t), (double)e->evaluations) != 0)
            return -1;
    }
    for (size_t i = 0; i < ev->n_procs; i++) {
        const kv_rp_proc *p = &ev->procs[i];
        double w0 = (p->wall_s >= 0 ? p->wall_s : p->active) / 3600, span = p->t_last - p->t;
        if (series_add(&b[B_WALL], p->active, w0) != 0 ||
            series_add(&b[B_WALL], p->active + span, w0 + span / 3600) != 0)
            return -1;
    }
    double tokens = 0, cost = 0;
    if (ev->n_calls > 0 &&
        (series_add(&b[B_TOKENS], 0, 0) != 0 || series_add(&b[B_COST], 0, 0) != 0))
        return -1;
    for (size_t i = 0; i < ev->n_calls; i++) {
        const kv_rp_call *c = &ev->calls[i];
        double x = kv_rp_active(ev, c->t);
        tokens += (double)c->tokens;
        cost += c->cost_usd;
        if (series_add(&b[B_TOKENS], x, tokens) != 0 || series_add(&b[B_COST], x, cost) != 0)
            return -1;
    }
    return 0;
}

/* The chart of the budgets with a limit, each as a percentage of it. */
static void limited_chart(FILE *f, const kv_rp_events *ev, const series *b, const double *limit,
                          double tunit)
{
    double top = 100, end = kv_rp_active(ev, ev->t_end);
    for (int k = 0; k < N_BUDGETS; k++)
        if (limit[k] > 0 && b[k].n > 0 && 100 * b[k].y[b[k].n - 1] / limit[k] > top)
            top = 100 * b[k].y[b[k].n - 1] / limit[k];
    plot p = {f, end > 0 ? end / tunit : 1, top * 1.1, 1 / tunit, 1};
    plot_begin(&p, "budgets spent against wall time", time_label(tunit), "% of the limit");
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
            "stroke-dasharray=\"5,4\"/>\n",
            ML, ay(&p, 100), W - MR, ay(&p, 100));
    resume_marks(&p, ev);
    int li = 0;
    for (int k = 0; k < N_BUDGETS; k++) {
        if (!(limit[k] > 0) || b[k].n == 0)
            continue;
        p.ys = 100 / limit[k];
        series_draw(&p, &b[k], palette[k], end, k != B_WALL, budgets[k].key);
        char label[64];
        snprintf(label, sizeof label, "%s %.0f%%", budgets[k].brief,
                 100 * b[k].y[b[k].n - 1] / limit[k]);
        legend(&p, li++, palette[k], "", label);
    }
    fputs("</svg>\n", f);
}

/* The chart of one budget without a limit, in its own units. */
static void unlimited_chart(FILE *f, const kv_rp_events *ev, const series *s, int k, double tunit)
{
    double end = kv_rp_active(ev, ev->t_end), top = s->y[s->n - 1];
    plot p = {f, end > 0 ? end / tunit : 1, top > 0 ? top * 1.1 : 1, 1 / tunit, 1};
    char title[96];
    snprintf(title, sizeof title, "%s spent against wall time (no limit)", budgets[k].name);
    plot_begin(&p, title, time_label(tunit), budgets[k].name);
    resume_marks(&p, ev);
    series_draw(&p, s, palette[k], end, k != B_WALL, budgets[k].key);
    char label[64];
    snprintf(label, sizeof label, "%s %.6g", budgets[k].brief, top);
    legend(&p, 0, palette[k], "", label);
    fputs("</svg>\n", f);
}

int kv_rp_budget_chart(kv_rp *r, kv_err *err)
{
    FILE *f = r->f;
    const kv_rp_events *ev = &r->ev;
    fputs("<section id=\"budgets\">\n<h3>Budgets spent over time</h3>\n", f);
    if (!ev->present || ev->lines == 0) {
        fputs(ev->present ? "<p>No events in events.jsonl yet.</p>\n"
                          : "<p>No events.jsonl in the run directory.</p>\n",
              f);
        fputs("</section>\n", f);
        return 0;
    }
    series b[N_BUDGETS];
    memset(b, 0, sizeof b);
    int rc = budget_series(ev, b);
    if (rc != 0) {
        rc = kv_err_set(err, "budgets over time: out of memory");
    } else {
        double limit[N_BUDGETS], tunit = time_unit(kv_rp_active(ev, ev->t_end));
        int any = 0;
        for (int k = 0; k < N_BUDGETS; k++) {
            limit[k] = kv_rp_budget(r->config, budgets[k].key);
            any |= limit[k] > 0 && b[k].n > 0;
        }
        if (ev->n_procs > 1)
            fprintf(f,
                    "<p>Wall time is the run's active time: %zu processes, the time "
                    "between them left out (dashed lines mark each resume).</p>\n",
                    ev->n_procs);
        if (any)
            limited_chart(f, ev, b, limit, tunit);
        for (int k = 0; k < N_BUDGETS; k++)
            if (!(limit[k] > 0) && k != B_WALL && b[k].n > 0)
                unlimited_chart(f, ev, &b[k], k, tunit);
        if (ev->n_calls == 0)
            fputs("<p>No LLM calls in events.jsonl: no tokens or cost spent.</p>\n", f);
        fputs("</section>\n", f);
    }
    for (int k = 0; k < N_BUDGETS; k++) {
        free(b[k].x);
        free(b[k].y);
    }
    return rc;
}
