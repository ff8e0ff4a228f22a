/* cli_fixture.h — what the tests of the kevo command line share
 * (tests/integration/test_cli*.c): kevo run as a real process with its
 * output captured, and the fixture archive built through the archive API
 * with the values the views must show, computed from its tables. */
#ifndef KEVO_TESTS_CLI_FIXTURE_H
#define KEVO_TESTS_CLI_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "archive/archive.h"
#include "common/cell.h"
#include "test.h"

/* Set by cli_test_start: the kevo binary ($KEVO_BIN), a folder for captured
 * output, and the run directory holding the fixture archive. */
extern const char *bin;
extern char scratch[256];
extern char run_dir[256];

/* KEVO_BIN read, scratch and run_dir made (named after tag, removed at exit)
 * and the fixture built in run_dir: 0; 77 (skipped) without KEVO_BIN; 1 when
 * the fixture cannot be built (said on stderr). */
int cli_test_start(const char *tag);

/* ---- running kevo ---------------------------------------------------------------- */

typedef struct {
    int status; /* exit code; 128 + signal when killed */
    char *out;  /* malloc'ed, never NULL after a run */
    char *err;
} result;

/* Frees r's texts and zeroes it. */
void result_free(result *r);

/* Runs kevo with argv (argv[0] is bin; NULL-terminated); KEVO_RUN is set to
 * env_run (or unset when NULL), LC_ALL unset. Fills r (free it with
 * result_free). */
void kevo_spawn(result *r, const char *env_run, const char *const *argv);

/* The checks below are static inline so that they count in the calling
 * test's counters (test.h). */

/* kevo_spawn with the NULL-terminated arguments; a sanitizer report on its
 * stderr is a failed check (leaks on error paths too: their exit code can
 * equal ours). */
static inline void kevo_env(result *r, const char *env_run, const char *first, ...)
{
    const char *argv[48];
    int argc = 0;
    argv[argc++] = bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 47; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    kevo_spawn(r, env_run, argv);
    KV_CHECKF(strstr(r->err, "Sanitizer") == NULL && strstr(r->err, "runtime error:") == NULL,
              "kevo %s: %s", argc > 2 ? argv[2] : "", r->err);
}

#define kevo(r, ...) kevo_env((r), NULL, __VA_ARGS__, (const char *)NULL)

#define CHECK_STATUS(r, want)                                                               \
    KV_CHECKF((r).status == (want), "exit %d, want %d\nstdout: %s\nstderr: %s", (r).status, \
              (want), (r).out, (r).err)

/* A pointer, so that KV_CHECK_STR_CONTAINS does not test an array's address. */
const char *str(const char *s);

/* No byte a terminal acts on in kevo's stdout or stderr: control
 * characters but LF, DEL, and 0x9B (CSI; it is no UTF-8 alone). */
static inline void check_inert(const result *r, const char *what)
{
    const char *texts[2] = {str(r->out), str(r->err)};
    for (int k = 0; k < 2; k++) {
        for (const unsigned char *p = (const unsigned char *)texts[k]; *p; p++)
            KV_CHECKF((*p >= 0x20 && *p != 0x7f) || *p == '\n', "a raw byte 0x%02x in kevo %s's %s",
                      *p, what, k ? "stderr" : "stdout");
        KV_CHECK(strchr(texts[k], 0x9b) == NULL);
    }
}

/* The number of newlines in s. */
int count_lines(const char *s);

/* The line of text that starts with prefix, found after the first occurrence
 * of section (or anywhere when section is NULL), copied into out: 0, or -1
 * when there is none. */
int find_line(const char *text, const char *section, const char *prefix, char *out, size_t cap);

/* ---- the fixture ----------------------------------------------------------------- */

typedef struct {
    const char *problem;
    int island;
    const char *op;
    const char *model;
    uint64_t parents[2];
    kv_verdict verdict;
    double speedup;
    const char *cell; /* also the elite cell when ok and elite is set */
    int elite;
} fx_program;

/* Extra attempts, so that every verdict appears at least once. */
typedef struct {
    const char *problem;
    kv_stage stage;
    kv_verdict verdict;
    const char *detail;
} fx_attempt;

#define N_FX 10
#define N_EXTRA 8
#define N_ATTEMPTS (N_FX + N_EXTRA)

/* The fixture's programs (ids assigned in order from 1) and extra attempts. */
extern const fx_program fx[N_FX];
extern const fx_attempt fx_extra[N_EXTRA];
extern const int64_t T0; /* the first program's time: 2026-01-01T00:00:00Z */

/* The source of fixture program id. */
void fx_source(int id, char *buf, size_t cap);

/* Writes the fixture archive into dir (created): 0, or -1 said on stderr. */
int build_fixture(const char *dir);

/* Whether fixture program i holds its cell: offered, and no other offer to
 * the same problem, island and cell has a greater fitness (or an equal one
 * and was offered first). */
int fx_is_elite(int i);

/* Expected values, computed from the fixture tables (not by kevo's code). */
typedef struct {
    int programs, attempts, ok;
    int best_id;
    double best;
    int coverage;
    double qd;
    int cell_id[KV_CELL_COUNT];
    double cell_fit[KV_CELL_COUNT];
} expect;

/* The index of a cell name in the grid's order, or -1. */
int cell_index_of(const char *name);

/* What the views must show of problem (island: -1 for all) into *e. */
void expected(const char *problem, int island, expect *e);

/* ---- CSV ------------------------------------------------------------------------- */

typedef struct {
    char *field[32];
    int n;
} csv_row;

/* A strict RFC 4180 reader; returns the number of rows (at most max), -1 on
 * malformed input. Free the fields with csv_free. */
int csv_parse(const char *s, csv_row *rows, int max);
void csv_free(csv_row *rows, int n);

#endif
