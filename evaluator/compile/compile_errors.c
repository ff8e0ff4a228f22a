/* compile_errors.c — what a kernel writer sees of nvcc's output: the error
 * and warning lines with a little context (kv_compile_trim_errors), the
 * summary of a rejected source and the warnings of the ptxas report. */
#include "evaluator/compile/compile_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define TRIM_LINES 40
#define TAIL_LINES 20 /* when no error line explains a failure */

static int is_head_line(const char *s, size_t n)
{
    static const char *const heads[] = {
        "): error",     "): catastrophic error", "ptxas error",         "ptxas fatal",
        "nvlink error", "nvlink fatal",          "undefined reference", "error:",
        "fatal error",  "kevo-exec-failed",      "nvcc fatal",
    };
    char line[1024];
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, s, n);
    line[n] = '\0';
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        if (strstr(line, heads[i]))
            return 2; /* an error */
    if (strstr(line, "candidate.cu(") && strstr(line, "): warning"))
        return 1;
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Replaces every occurrence of from by to; NULL when out of memory. */
static char *replace_all(const char *text, const char *from, const char *to)
{
    kv_strbuf b = {0};
    size_t fl = from ? strlen(from) : 0;
    const char *s = text, *q;
    if (fl > 0 && strcmp(from, to) != 0) {
        while ((q = strstr(s, from)) != NULL) {
            kv_sb_put(&b, s, (size_t)(q - s));
            kv_sb_puts(&b, to);
            s = q + fl;
        }
    }
    kv_sb_puts(&b, s);
    return kv_sb_take(&b); /* NULL when out of memory */
}

char *kv_compile_trim_errors(const char *nvcc_stderr, const char *src_path, int max_lines)
{
    if (max_lines <= 0)
        max_lines = TRIM_LINES;
    char *text = replace_all(nvcc_stderr ? nvcc_stderr : "", src_path, "candidate.cu");
    if (!text)
        return NULL;
    kv_strbuf b = {0};
    int lines = 0, more = 0;
    const char *s = text;
    while (*s && !b.oom) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        const char *next = *e ? e + 1 : e;
        if (!is_head_line(s, (size_t)(e - s))) {
            s = next;
            continue;
        }
        if (lines >= max_lines) {
            more++;
            s = next;
            continue;
        }
        kv_sb_put(&b, s, (size_t)(e - s));
        kv_sb_put(&b, "\n", 1);
        lines++;
        /* up to two lines of context: the source line and the caret */
        s = next;
        for (int k = 0; k < 2 && *s && lines < max_lines; k++) {
            e = strchr(s, '\n');
            if (!e)
                e = s + strlen(s);
            if (is_blank(s, (size_t)(e - s)) || is_head_line(s, (size_t)(e - s)))
                break;
            kv_sb_put(&b, s, (size_t)(e - s));
            kv_sb_put(&b, "\n", 1);
            lines++;
            s = *e ? e + 1 : e;
        }
    }
    free(text);
    if (more > 0)
        kv_sb_printf(&b, "... (%d more error%s)\n", more, more == 1 ? "" : "s");
    return kv_sb_take(&b); /* NULL when out of memory */
}

/* The last max_lines lines of text (for failures no error line explains). */
static char *tail_lines(const char *text, int max_lines)
{
    size_t end = strlen(text), start;
    while (end > 0 && isspace((unsigned char)text[end - 1]))
        end--;
    int n = 0;
    for (start = end; start > 0; start--)
        if (text[start - 1] == '\n' && ++n >= max_lines)
            break;
    kv_strbuf b = {0};
    kv_sb_put(&b, text + start, end - start);
    kv_sb_put(&b, "\n", 1);
    return kv_sb_take(&b); /* NULL when out of memory */
}

/* ---- summaries of nvcc's output ------------------------------------------------- */

char *kv_compile_error_summary(const char *nvcc_out)
{
    char *errors = kv_compile_trim_errors(nvcc_out, "candidate.cu", TRIM_LINES);
    if (errors && !*errors) {
        free(errors);
        errors = tail_lines(nvcc_out, TAIL_LINES);
    }
    return errors;
}

char *kv_compile_warning_summary(const char *report)
{
    return kv_compile_trim_errors(report, "candidate.cu", TRIM_LINES);
}
