/* source.h — normalised-source hashing: the identity of a candidate.
 *
 * Two sources that differ only in comments or whitespace compile to the same
 * program, so dedup (archive, search) keys on the hash of the normalised text:
 * comments removed, each run of whitespace collapsed to one newline if it held
 * one (line ends matter to the preprocessor) and to one space otherwise,
 * leading and trailing whitespace dropped; string and character literals are
 * kept intact. */
#ifndef KEVO_SOURCE_H
#define KEVO_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/sha256.h"

/* Writes the normalised form of src[0..n) into a new malloc'ed buffer
 * (*out, *out_len; NUL-terminated). Returns 0, or -1 on allocation failure. */
int kv_source_normalise(const char *src, size_t n, char **out, size_t *out_len);

/* SHA-256 of the normalised source. Returns 0, or -1 on allocation failure
 * or when libcrypto fails. */
int kv_source_hash(const char *src, size_t n, uint8_t out[KV_SHA256_LEN]);

#endif
