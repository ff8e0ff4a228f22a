/* archive_print.c — what kevo archive prints of report/views.h's data: the
 * behaviour grid as a table, programs' fields as CSV, attempts as lines
 * (archive_print.h). */
#include "archive_print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/text.h"

/* ---- grids -------------------------------------------------------------------- */

static int utf8_locale(void)
{
    const char *vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return strstr(v, "UTF-8") || strstr(v, "utf-8") || strstr(v, "UTF8") ||
                   strstr(v, "utf8");
    }
    return 0;
}

const char *kv_grid_empty_glyph(FILE *out)
{
    return isatty(fileno(out)) && utf8_locale() ? "\xc2\xb7" : "-";
}

/* Display width of UTF-8 text: code points, not bytes. */
static int text_width(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* s, then spaces to width; text as wide as a column or wider still gets
 * one space after it (a column is never glued to the next) */
static void put_padded(FILE *out, const char *s, int width)
{
    fputs(s, out);
    int w = text_width(s);
    if (width > 0 && w >= width)
        fputc(' ', out);
    for (; w < width; w++)
        fputc(' ', out);
}

#define GRID_LABEL_W 7
#define GRID_CELL_W 20

static void cell_text(const kv_grid_cell *c, const char *empty, char *out, size_t cap)
{
    if (!c->occupied) {
        snprintf(out, cap, "%s", empty);
        return;
    }
    char sp[32];
    kv_fmt_speedup(isnan(c->speedup) ? c->fitness : c->speedup, sp, sizeof sp);
    snprintf(out, cap, "%s #%" PRIu64 "%s", sp, c->program_id, c->reference ? " reference" : "");
}

void kv_grid_print(FILE *out, const kv_grid *g, const char *indent, const char *empty)
{
    fputs(indent, out);
    put_padded(out, "", GRID_LABEL_W);
    for (int f = 0; f < KV_FUSION_COUNT; f++)
        put_padded(out, kv_fusion_name((kv_fusion)f), f + 1 < KV_FUSION_COUNT ? GRID_CELL_W : 0);
    fputc('\n', out);
    for (int t = 0; t < KV_TRANSPORT_COUNT; t++) {
        fputs(indent, out);
        put_padded(out, kv_transport_name((kv_transport)t), GRID_LABEL_W);
        for (int f = 0; f < KV_FUSION_COUNT; f++) {
            char text[64];
            cell_text(&g->cell[kv_cell_index((kv_transport)t, (kv_fusion)f)], empty, text,
                      sizeof text);
            put_padded(out, text, f + 1 < KV_FUSION_COUNT ? GRID_CELL_W : 0);
        }
        fputc('\n', out);
    }
}

/* ---- CSV --------------------------------------------------------------------------- */

/* A field as RFC 4180 quotes it. */
static void csv_quoted(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

int kv_csv_field(FILE *out, const char *s)
{
    if (!s)
        return 0;
    size_t n = strlen(s);
    char *shown = malloc(4 * n + 1); /* an escape is at most 4 bytes per byte */
    if (!shown)
        return -1;
    csv_quoted(out, kv_text_for_terminal(s, shown, 4 * n + 1, KV_TEXT_ONE_LINE));
    free(shown);
    return 0;
}

int kv_csv_source(FILE *out, const char *src)
{
    size_t n = strlen(src);
    if (kv_text_is_inert(src, n)) {
        fputs("text,", out);
        csv_quoted(out, src);
        return 0;
    }
    char *b64 = kv_base64(src, n);
    if (!b64)
        return -1;
    fprintf(out, "base64,%s", b64);
    free(b64);
    return 0;
}

/* ---- attempts --------------------------------------------------------------------- */

void kv_attempt_print_header(FILE *out)
{
    fprintf(out, "%7s  %-20s  %-16s %6s  %-9s  %-14s %8s %8s %8s %9s %9s  %s\n", "seq", "time",
            "problem", "island", "stage", "verdict", "program", "speedup", "wall_s", "tokens",
            "cost", "detail");
}

void kv_attempt_print(FILE *out, const kv_attempt *a)
{
    char time[64], prog[32], sp[32], detail[256], shown[1024], problem[4 * KV_NAME_MAX];
    kv_fmt_time(a->time_ns, time, sizeof time);
    if (a->program_id)
        snprintf(prog, sizeof prog, "#%" PRIu64, a->program_id);
    else
        snprintf(prog, sizeof prog, "-");
    kv_fmt_speedup(a->verdict == KV_VERDICT_OK ? a->speedup : 0, sp, sizeof sp);
    kv_first_line(a->detail, detail, sizeof detail);
    fprintf(
        out, "%7" PRIu64 "  %-20s  %-16s %6d  %-9s  %-14s %8s %8s %8.1f %9" PRIu64 " %9.4f%s%s\n",
        a->seq, time, a->problem[0] ? KV_TERM(problem, a->problem) : "-", (int)a->island,
        kv_stage_name(a->stage), kv_verdict_name(a->verdict), prog, sp, a->wall_s,
        a->tokens_in + a->tokens_out, a->cost_usd, detail[0] ? "  " : "", KV_TERM(shown, detail));
}
