/* codec.h — archive records <-> bytes (field tags are listed in docs/archive.md). */
#ifndef KEVO_ARCHIVE_CODEC_H
#define KEVO_ARCHIVE_CODEC_H

#include "archive/record.h"
#include "archive/archive.h"

/* Encoders append one whole record to b; they return 0 or -1 (out of memory). */
int kv_encode_program(kv_buf *b, const kv_program *p);
int kv_encode_attempt(kv_buf *b, const kv_attempt *a);
int kv_encode_elite(kv_buf *b, const kv_elite *e);
int kv_encode_counters(kv_buf *b, const kv_counters *c);
int kv_encode_state(kv_buf *b, const kv_run_state *s);
int kv_encode_problem(kv_buf *b, const kv_problem_stats *s);

/* Decoders fill a zeroed struct; on failure they free what they took and
 * the error says which field is bad. */
int kv_decode_program(const void *data, size_t len, kv_program *p, kv_err *err);
int kv_decode_attempt(const void *data, size_t len, kv_attempt *a, kv_err *err);
int kv_decode_elite(const void *data, size_t len, kv_elite *e, kv_err *err);
int kv_decode_counters(const void *data, size_t len, kv_counters *c, kv_err *err);
int kv_decode_state(const void *data, size_t len, kv_run_state *s, kv_err *err);
int kv_decode_problem(const void *data, size_t len, kv_problem_stats *s, kv_err *err);

#endif
