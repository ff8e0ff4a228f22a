/* cmd_schedule.c — kevo schedule: the schedule language of the collectives
 * (docs/schedules.md): list a collective's space, check a schedule, and
 * generate ABI 2 candidates from schedules (mutate/schedule.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "common/cell.h"
#include "common/fsutil.h"
#include "common/json_out.h"
#include "common/sha256.h"
#include "common/text.h"
#include "mutate/schedule.h"

static const char usage[] =
    "usage: kevo schedule list --problem P [--json]\n"
    "       kevo schedule check 'SCHEDULE'\n"
    "       kevo schedule gen --problem P 'SCHEDULE' [-o FILE.cu]\n"
    "       kevo schedule gen --problem P --random N [--seed S] [--nvls] -o DIR\n"
    "\n"
    "A schedule writes a collective's call as phases, each saying how it moves\n"
    "its data (docs/schedules.md):\n"
    "  'allreduce threads=512; rs xport=tma; ag dir=push'\n"
    "Fields left out take their defaults.\n"
    "\n"
    "  list    P's phase sequences, each field's values, the number of valid\n"
    "          schedules and the default schedule (--json: one JSON object)\n"
    "  check   prints the schedule's canonical form (every field) and the cell\n"
    "          it aims at; an invalid one: the error, naming the section, the\n"
    "          field and the invariant\n"
    "  gen     writes the candidate generated from SCHEDULE to FILE.cu (default\n"
    "          stdout); with --random, N random valid schedules of P, each to\n"
    "          DIR/<problem>_<hash8>.cu (hash8: of the canonical form)\n"
    "\n"
    "options:\n"
    "  --problem P   a collective: allreduce, allgather, reducescatter, alltoall,\n"
    "                broadcast or fp8_allgather\n"
    "  --random N    1..100000 schedules; --seed S their seed (default 1)\n"
    "  --nvls        random schedules may use nvls (never run where multicast\n"
    "                is forbidden)\n"
    "  -o PATH       the output file (gen) or folder (gen --random; created)\n"
    "\n"
    "Exit status: 0 ok, 1 an invalid schedule or a failure (the message on\n"
    "stderr), 2 usage error.\n";

static const struct option long_opts[] = {
    {"problem", required_argument, NULL, 'p'}, {"json", no_argument, NULL, 'j'},
    {"random", required_argument, NULL, 'r'},  {"seed", required_argument, NULL, 's'},
    {"nvls", no_argument, NULL, 'n'},          {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
};

typedef struct {
    const char *problem, *out, *text;
    int json, nvls, random_given;
    long long random, seed;
} args;

/* "kevo schedule: <message>" and the usage; KV_EXIT_USAGE. */
#define usage_error(...) kv_cli_usage("schedule", usage, __VA_ARGS__)

/* Options and at most one positional SCHEDULE after the action. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->seed = 1;
    optind = 1;
    opterr = 0;
    int c;
    /* argv[0] is the action: getopt starts after it */
    while ((c = getopt_long(argc, argv, ":o:", long_opts, NULL)) != -1) {
        switch (c) {
        case 'p': a->problem = optarg; break;
        case 'j': a->json = 1; break;
        case 'n': a->nvls = 1; break;
        case 'o': a->out = optarg; break;
        case 'r':
            a->random_given = 1;
            if (kv_cli_parse_int(optarg, 1, 100000, &a->random) != 0)
                return usage_error("--random '%s': expected 1..100000", optarg);
            break;
        case 's':
            if (kv_cli_parse_int(optarg, 0, 0x7fffffffffffffffLL, &a->seed) != 0)
                return usage_error("--seed '%s': expected a number >= 0", optarg);
            break;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        a->text = argv[optind++];
    char shown[256];
    if (optind < argc)
        return usage_error("unexpected argument '%s' (one schedule, quoted)",
                           KV_TERM(shown, argv[optind]));
    return 0;
}

static int coll_of(const args *a, kv_sched_coll *c)
{
    if (!a->problem)
        return usage_error("%s", "missing --problem P");
    int x = kv_sched_coll_parse(a->problem);
    if (x < 0) {
        char shown[256];
        return usage_error("problem '%s' has no schedules (allreduce, allgather, reducescatter, "
                           "alltoall, broadcast, fp8_allgather)",
                           KV_TERM(shown, a->problem));
    }
    *c = (kv_sched_coll)x;
    return 0;
}

/* ---- list ------------------------------------------------------------------- */

static void seq_text(kv_sched_coll c, int j, char *buf, size_t cap)
{
    kv_sched_kind kinds[KV_SCHED_MAX_PHASES];
    int n = kv_sched_sequence(c, j, kinds);
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " " : "", kv_sched_kind_name(kinds[i]));
}

static int list_json(kv_sched_coll c, uint64_t size, uint64_t size_nvls, const char *def,
                     const char *cell)
{
    cJSON *o = cJSON_CreateObject(), *seqs = cJSON_CreateArray(), *fields = cJSON_CreateObject();
    int ok = o && seqs && fields;
    ok = ok && cJSON_AddStringToObject(o, "problem", kv_sched_coll_name(c)) != NULL;
    for (int j = 0; ok && j < kv_sched_n_sequences(c); j++) {
        char t[64];
        seq_text(c, j, t, sizeof t);
        cJSON *s = cJSON_CreateString(t);
        ok = s && cJSON_AddItemToArray(seqs, s);
    }
    for (int f = 0; ok && f < KV_SF_COUNT; f++) {
        cJSON *vals = cJSON_CreateArray();
        ok = vals && cJSON_AddItemToObject(fields, kv_sched_field_name((kv_sched_field)f), vals);
        for (int v = 0; ok && v < kv_sched_field_n_values((kv_sched_field)f); v++) {
            char t[24];
            kv_sched_field_text((kv_sched_field)f, v, t, sizeof t);
            cJSON *s = cJSON_CreateString(t);
            ok = s && cJSON_AddItemToArray(vals, s);
        }
    }
    ok = ok && cJSON_AddItemToObject(o, "phase_sequences", seqs);
    if (ok)
        seqs = NULL;
    ok = ok && cJSON_AddItemToObject(o, "fields", fields);
    if (ok)
        fields = NULL;
    ok = ok && cJSON_AddNumberToObject(o, "space_size", (double)size) &&
         cJSON_AddNumberToObject(o, "space_size_nvls", (double)size_nvls) &&
         cJSON_AddStringToObject(o, "default", def) &&
         cJSON_AddStringToObject(o, "default_cell", cell);
    char *text = ok ? kv_json_print(o, 1, NULL) : NULL;
    cJSON_Delete(seqs);
    cJSON_Delete(fields);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "kevo: out of memory\n");
        return KV_EXIT_FAIL;
    }
    printf("%s\n", text);
    free(text);
    return KV_EXIT_OK;
}

static int do_list(const args *a)
{
    kv_sched_coll c = KV_SC_ALLREDUCE;
    int rc = coll_of(a, &c);
    if (rc)
        return rc;
    char shown[256];
    if (a->text)
        return usage_error("'list' takes no schedule (got '%s')", KV_TERM(shown, a->text));
    kv_schedule d;
    char def[KV_SCHED_TEXT_MAX], cell[KV_CELL_NAME_MAX];
    kv_sched_default(c, &d);
    kv_sched_format(&d, def, sizeof def);
    kv_cell_name(kv_sched_cell(&d), cell);
    uint64_t size = kv_sched_space_size(c, 0), size_nvls = kv_sched_space_size(c, 1);
    if (a->json)
        return list_json(c, size, size_nvls, def, cell);
    printf("%s\n\nphase sequences:\n", kv_sched_coll_name(c));
    for (int j = 0; j < kv_sched_n_sequences(c); j++) {
        char t[64];
        seq_text(c, j, t, sizeof t);
        printf("  %s\n", t);
    }
    printf("\nfields (head: threads..ll_max; each phase: algo..fuse):\n");
    for (int f = 0; f < KV_SF_COUNT; f++) {
        printf("  %-9s", kv_sched_field_name((kv_sched_field)f));
        for (int v = 0; v < kv_sched_field_n_values((kv_sched_field)f); v++) {
            char t[24];
            kv_sched_field_text((kv_sched_field)f, v, t, sizeof t);
            printf(" %s", t);
        }
        printf("\n");
    }
    printf("\nvalid schedules: %llu (%llu with nvls)\n", (unsigned long long)size,
           (unsigned long long)size_nvls);
    printf("default (%s):\n  %s\n", cell, def);
    return KV_EXIT_OK;
}

/* ---- check ------------------------------------------------------------------ */

static int do_check(const args *a)
{
    if (!a->text)
        return usage_error("%s", "'check' needs a SCHEDULE (quoted)");
    if (a->problem || a->json || a->out || a->random_given || a->nvls)
        return usage_error("%s", "'check' takes only a SCHEDULE");
    kv_schedule s;
    kv_err err = {{0}};
    if (kv_sched_parse(a->text, &s, &err) != 0)
        return kv_cli_fail(&err);
    char text[KV_SCHED_TEXT_MAX], cell[KV_CELL_NAME_MAX];
    kv_sched_format(&s, text, sizeof text);
    kv_cell_name(kv_sched_cell(&s), cell);
    printf("%s\ncell: %s\n", text, cell);
    return KV_EXIT_OK;
}

/* ---- gen -------------------------------------------------------------------- */

static int generate_to(const kv_schedule *s, const char *path, kv_err *err)
{
    char *src = NULL;
    size_t len = 0;
    if (kv_sched_generate(s, &src, &len, err) != 0)
        return -1;
    int rc = 0;
    if (path)
        rc = kv_write_file_atomic(path, src, len, err);
    else if (fwrite(src, 1, len, stdout) != len)
        rc = kv_err_set(err, "writing the candidate to standard output failed");
    free(src);
    return rc;
}

static int do_gen(const args *a)
{
    kv_sched_coll c = KV_SC_ALLREDUCE;
    int rc = coll_of(a, &c);
    if (rc)
        return rc;
    kv_err err = {{0}};
    if (!a->random_given) {
        if (!a->text)
            return usage_error("%s", "'gen' needs a SCHEDULE (quoted) or --random N");
        if (a->nvls)
            return usage_error("%s", "--nvls is for --random");
        kv_schedule s;
        if (kv_sched_parse(a->text, &s, &err) != 0)
            return kv_cli_fail(&err);
        if (s.coll != c) {
            kv_err_set(&err, "the schedule is %s's, not %s's", kv_sched_coll_name(s.coll),
                       kv_sched_coll_name(c));
            return kv_cli_fail(&err);
        }
        if (generate_to(&s, a->out, &err) != 0)
            return kv_cli_fail(&err);
        return KV_EXIT_OK;
    }
    char shown[256];
    if (a->text)
        return usage_error("'gen --random' takes no schedule (got '%s')", KV_TERM(shown, a->text));
    if (!a->out)
        return usage_error("%s", "'gen --random' needs -o DIR");
    if (kv_mkdir_p(a->out, 0755, &err) != 0)
        return kv_cli_fail(&err);
    kv_rng rng;
    kv_rng_seed(&rng, (uint64_t)a->seed);
    for (long long k = 0; k < a->random; k++) {
        kv_schedule s;
        char text[KV_SCHED_TEXT_MAX], hex[KV_SHA256_HEX_LEN], path[4096];
        uint8_t digest[KV_SHA256_LEN];
        kv_sched_random(c, a->nvls, &rng, &s);
        kv_sched_format(&s, text, sizeof text);
        if (kv_sha256(text, strlen(text), digest) != 0) {
            kv_err_set(&err, "hashing a schedule failed");
            return kv_cli_fail(&err);
        }
        kv_sha256_hex(digest, hex);
        snprintf(path, sizeof path, "%s/%s_%.8s.cu", a->out, kv_sched_coll_name(c), hex);
        if (generate_to(&s, path, &err) != 0)
            return kv_cli_fail(&err);
        printf("%s  %s\n", path, text);
    }
    return KV_EXIT_OK;
}

static int run(int argc, char **argv)
{
    if (kv_cli_wants_help(argc, argv))
        return kv_cli_help(usage);
    if (argc < 2)
        return kv_cli_usage("schedule", usage, "missing action (list, check or gen)");
    const char *action = argv[1];
    args a;
    int rc = parse_args(argc - 1, argv + 1, &a);
    if (rc)
        return rc;
    if (strcmp(action, "list") == 0)
        return do_list(&a);
    if (strcmp(action, "check") == 0)
        return do_check(&a);
    if (strcmp(action, "gen") == 0)
        return do_gen(&a);
    char shown[256];
    return kv_cli_usage("schedule", usage, "unknown action '%s' (list, check or gen)",
                        KV_TERM(shown, action));
}

const kv_command kv_cmd_schedule = {
    .name = "schedule",
    .summary = "list, check or generate collective schedules",
    .usage = usage,
    .run = run,
};
