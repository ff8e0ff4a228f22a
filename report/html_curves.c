/* html_curves.c — the report's SVG charts, drawn from the `result` events:
 * a problem's anytime curves (id="anytime-<problem>": best speedup against
 * evaluations and against wall time, per island, the best seed as a
 * reference line) and the run's verdicts over time (id="verdicts"). */
#include "html_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 560
#define H 260
#define ML 50 /* margins: left, right, top, bottom */
#define MR 120
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

typedef struct {
    FILE *f;
    double xmax, ymax;
} plot;

static double px(const plot *p, double x) { return ML + (W - ML - MR) * (x / p->xmax); }
static double py(const plot *p, double y) { return H - MB - (H - MT - MB) * (y / p->ymax); }

static void plot_begin(plot *p, const char *title, const char *xlabel, const char *ylabel)
{
    FILE *f = p->f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\"><title>%s</title>\n", W, H, W, H, title);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n",
            ML, H - MB, W - MR, H - MB, ML, MT, ML, H - MB);
    double sx = tick_step(p->xmax, 5), sy = tick_step(p->ymax, 5);
    for (double x = 0; x <= p->xmax * 1.0001; x += sx)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>", px(p, x),
                H - MB + 14, x);
    for (double y = 0; y <= p->ymax * 1.0001; y += sy)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>"
                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>",
                ML - 4, py(p, y) + 4, y, ML + 1, py(p, y), W - MR, py(p, y));
    fprintf(f, "\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>"
               "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" "
               "text-anchor=\"middle\">%s</text>\n",
            (ML + W - MR) / 2, H - 6, xlabel, (MT + H - MB) / 2, (MT + H - MB) / 2, ylabel);
}

static void legend(const plot *p, int i, const char *color, const char *dash, const char *label)
{
    int y = MT + 10 + 16 * i;
    fprintf(p->f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                  "stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\">%s</text>\n",
            W - MR + 8, y, W - MR + 28, y, color, dash, W - MR + 32, y + 4, label);
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

static void series_draw(const plot *p, const series *s, const char *color, double xend)
{
    if (s->n == 0)
        return;
    fprintf(p->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
            color);
    for (size_t i = 0; i < s->n; i++) {
        if (i > 0)
            fprintf(p->f, "%.1f,%.1f ", px(p, s->x[i]), py(p, s->y[i - 1]));
        fprintf(p->f, "%.1f,%.1f ", px(p, s->x[i]), py(p, s->y[i]));
    }
    fprintf(p->f, "%.1f,%.1f\"/>\n", px(p, xend), py(p, s->y[s->n - 1]));
}

/* One chart: by = 0 evaluations, 1 wall time. */
static void anytime_chart(FILE *f, series *isl, int n_isl, double seed, double xmax,
                          double ymax, int by, const char *xlabel)
{
    plot p = {f, xmax > 0 ? xmax : 1, ymax > 0 ? ymax : 1};
    plot_begin(&p, by ? "best speedup against wall time" : "best speedup against evaluations",
               xlabel, "best speedup");
    int li = 0;
    if (seed > 0) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
                   "stroke-dasharray=\"5,4\"/>\n", ML, py(&p, seed), W - MR, py(&p, seed));
        char label[48];
        snprintf(label, sizeof label, "best seed %.2fx", seed);
        legend(&p, li++, "#000", " stroke-dasharray=\"5,4\"", label);
    }
    for (int i = 0; i < n_isl; i++) {
        if (isl[2 * i + by].n == 0)
            continue;
        const char *color = palette[i % N_PALETTE];
        series_draw(&p, &isl[2 * i + by], color, p.xmax);
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
                            : "<p>No events.jsonl in the run directory.</p>\n", f);
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
        if (e->t > tmax)
            tmax = e->t;
    }
    /* series 2i: island i against evaluations; 2i + 1: against wall time */
    series *isl = calloc((size_t)(n_isl ? 2 * n_isl : 1), sizeof *isl);
    if (!isl)
        return kv_err_set(err, "out of memory");
    int rc = 0;
    double tscale = tmax > 2 * 3600 ? 3600 : 60;
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
                series_add(&s[1], e->t / tscale, e->speedup))
                rc = kv_err_set(err, "out of memory");
        }
    }
    if (rc == 0) {
        anytime_chart(f, isl, n_isl, seed, emax, ymax * 1.1, 0, "evaluations");
        anytime_chart(f, isl, n_isl, seed, tmax / tscale, ymax * 1.1, 1,
                      tscale == 60 ? "wall time (minutes)" : "wall time (hours)");
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
                            : "<p>No events.jsonl in the run directory.</p>\n", f);
        fputs("</section>\n", f);
        return 0;
    }
    uint32_t bins[N_BINS][KV_VERDICT_COUNT];
    uint64_t total[KV_VERDICT_COUNT] = {0};
    memset(bins, 0, sizeof bins);
    double span = r->ev.t_end > 0 ? r->ev.t_end : 1;
    for (size_t i = 0; i < r->ev.n; i++) {
        const kv_rp_result *e = &r->ev.v[i];
        int b = (int)(e->t / span * N_BINS);
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
        fprintf(f, "<p>GPU busy: %.0f%% (results held a GPU group %.2f h of %.2f group-hours "
                   "the processes had).</p>\n",
                100 * r->ev.group_s / r->ev.capacity_s, r->ev.group_s / 3600,
                r->ev.capacity_s / 3600);
    else
        fputs("<p>GPU busy: unknown (no start event with its GPU groups).</p>\n", f);
    double tscale = span > 2 * 3600 ? 3600 : 60;
    plot p = {f, span / tscale, most * 1.1};
    plot_begin(&p, "verdicts over time", tscale == 60 ? "wall time (minutes)" : "wall time (hours)",
               "results per bin");
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
