/* protocol.h — messages between the supervisor and its workers: one JSON
 * object per line over a socketpair (the worker's fd 3; its stdout and
 * stderr go to a log file, so a candidate's printf cannot break the
 * protocol). docs/evaluator.md lists every message. The transport is
 * wire.c, the messages codec.c; both ends (the supervisor, kevo-worker and
 * the tests' fake worker) build and read every message through codec.c
 * only. Merging the workers' reports, kv_job_result_merge, is
 * protocol/job.h's (included here). */
#ifndef KEVO_EVALUATOR_PROTOCOL_H
#define KEVO_EVALUATOR_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/job.h"
#include "common/err.h"

#define KV_PROTO_FD 3
#define KV_PROTO_LINE_MAX (1 << 20)

/* A line reader over a non-blocking or blocking fd. */
typedef struct {
    int fd;
    char *buf;
    size_t len, cap;
    int eof;
} kv_line_reader;

void kv_line_reader_init(kv_line_reader *r, int fd);
void kv_line_reader_free(kv_line_reader *r);
/* Reads what is available (one read call). Returns 0, or -1 on a read error
 * or an over-long line; sets r->eof at end of file (ECONNRESET, a peer gone
 * with data of ours unread, counts as the end too). */
int kv_line_reader_fill(kv_line_reader *r, kv_err *err);
/* Takes the next complete line (malloc'ed, without the newline) or returns
 * NULL when none is complete yet. Bytes after the last newline at EOF are
 * a cut message: they stay in r->len and are never returned. */
char *kv_line_reader_next(kv_line_reader *r);

/* Writes one line (adds the newline), retrying on EINTR and short writes.
 * On a socket it never raises SIGPIPE (MSG_NOSIGNAL); on a non-blocking fd
 * it waits at most 2 s for room. On failure errno is kept: EPIPE or
 * ECONNRESET say the peer is gone. A line holding a newline is refused. */
int kv_proto_send(int fd, const char *line, kv_err *err);

/* Message encoding. Every message has "type". */
char *kv_proto_job_to_json(const kv_job *job); /* type "job" */
int kv_proto_job_from_json(const char *line, kv_job *job, kv_err *err);

/* A worker's report for a job: its verdict and its own figures per size. */
char *kv_proto_result_to_json(uint64_t job_id, int rank, const kv_job_result *r);
int kv_proto_result_from_json(const char *line, uint64_t *job_id, int *rank, kv_job_result *r,
                              kv_err *err);

/* The small messages: everything but "job" and "result". */
#define KV_PROTO_UID_BYTES 128 /* ncclUniqueId */
#define KV_PROTO_UID_HEX 256   /* ncclUniqueId in hex */
#define KV_PROTO_PHASE_MAX 64  /* a progress phase; longer ones are cut */

typedef enum {
    KV_MSG_HELLO,    /* worker: rank, pid, device */
    KV_MSG_UID,      /* rank 0: uid */
    KV_MSG_INIT,     /* supervisor: uid */
    KV_MSG_READY,    /* worker: rank */
    KV_MSG_JOB,      /* supervisor: kv_proto_job_to_json */
    KV_MSG_PROGRESS, /* worker: job, rank, phase */
    KV_MSG_RESULT,   /* worker: kv_proto_result_to_json */
    KV_MSG_EXIT,     /* supervisor: nothing else */
} kv_msg_type;

typedef struct {
    kv_msg_type type;
    int rank, pid, device;
    char uid[KV_PROTO_UID_HEX + 1];
    uint64_t job;
    char phase[KV_PROTO_PHASE_MAX];
} kv_proto_msg;

/* "hello", "uid", ...; "unknown" for values out of range. */
const char *kv_msg_type_name(kv_msg_type t);
/* The type of a line: 0, or -1 if it is not a JSON object whose "type" is
 * one of the above. */
int kv_proto_type(const char *line, kv_msg_type *type, kv_err *err);
/* Encodes or strictly decodes a small message (not "job" or "result"):
 * exactly the members its type has, each of the right type and range. */
char *kv_proto_msg_to_json(const kv_proto_msg *m);
int kv_proto_msg_from_json(const char *line, kv_proto_msg *m, kv_err *err);

/* Encodes a small message and sends it with kv_proto_send. Returns 0, or -1
 * when it cannot be encoded (out of memory, or m is a job or a result) or
 * sent (errno as kv_proto_send leaves it). */
int kv_proto_send_msg(int fd, const kv_proto_msg *m, kv_err *err);

/* Strictly decodes a line a worker reads: an "init", a "job" or an "exit"
 * from the supervisor, in one parse. m->type says which; a job fills job
 * (and only m->type of m), init and exit fill m (job untouched). Any other
 * type, like any malformed message, is -1 with err naming the member, e.g.
 * "job message: $.trials: missing" or "message: $.type: a worker does not
 * receive \"ready\"". */
int kv_proto_worker_in_from_json(const char *line, kv_proto_msg *m, kv_job *job, kv_err *err);

/* The uid member and the NCCL unique id's bytes: to_hex writes 256
 * lower-case hex digits and a NUL; from_hex reads exactly 256 hex digits
 * (either case), else returns -1 with err saying what is wrong. */
void kv_proto_uid_to_hex(const unsigned char id[KV_PROTO_UID_BYTES],
                         char hex[KV_PROTO_UID_HEX + 1]);
int kv_proto_uid_from_hex(const char *hex, unsigned char id[KV_PROTO_UID_BYTES], kv_err *err);

/* A result's graph_json member: the launch graph of one captured candidate
 * call, {"captured":true,"nodes":[{"type":"kernel","name":"..."},...]}, or
 * why it could not be captured, {"captured":false,"error":"..."}; strings
 * escaped, always a whole JSON document within cap bytes (cap >= 64).
 * graph_begin starts an empty node list; graph_add appends one node (name
 * cut to 40 bytes; NULL for none) and returns 0, or -1 when it does not fit
 * (out unchanged). */
void kv_proto_graph_failed(char *out, size_t cap, const char *error);
void kv_proto_graph_begin(char *out, size_t cap);
int kv_proto_graph_add(char *out, size_t cap, const char *type, const char *name);

/* The node report `kevo-worker --doctor` prints on stdout (one JSON
 * object, formatted; read by kv_topology_parse and `kevo doctor`). */
#define KV_PROTO_MAX_GPUS 64

typedef struct {
    int device;           /* the peer's index */
    int access;           /* cudaDeviceCanAccessPeer */
    int native_atomics;   /* cudaDevP2PAttrNativeAtomicSupported (NVLink) */
    int performance_rank; /* cudaDevP2PAttrPerformanceRank */
} kv_proto_peer;

typedef struct {
    int index;
    char name[256];
    int cc_major, cc_minor, sms;
    uint64_t memory_bytes;
    int l2_bytes;
    int n_peers;
    kv_proto_peer peers[KV_PROTO_MAX_GPUS - 1];
} kv_proto_gpu;

typedef struct {
    char error[256]; /* why no GPU was counted; "" (no "error" member) when none */
    int cuda_driver, cuda_runtime, nccl; /* versions as CUDA and NCCL number them */
    char nvls_enable[64];                /* NCCL_NVLS_ENABLE as the worker saw it; "" unset */
    int n_gpus;
    kv_proto_gpu gpus[KV_PROTO_MAX_GPUS];
} kv_proto_doctor;

/* Encodes a report (formatted, several lines); NULL when out of memory. */
char *kv_proto_doctor_to_json(const kv_proto_doctor *d);
/* Strictly decodes one, as the small messages are; -1 with err naming the
 * member ("doctor report: $.devices[0].sms: missing"), d then holding what
 * was read before the error. d is large (about 80 KB): callers keep it on
 * the heap. */
int kv_proto_doctor_from_json(const char *text, kv_proto_doctor *d, kv_err *err);

#endif
