/* snapshot.h — hot snapshots of a run's archive, and putting one back.
 *
 * A snapshot is LMDB's compacting copy of the archive (mdb_env_copyfd2 with
 * MDB_CP_COMPACT), taken from the writer's own handle while it writes: a
 * consistent picture of the last commit, whatever is written meanwhile. It
 * lands in <run_dir>/snapshots/archive-<UTC>.mdb (e.g.
 * archive-20261126T104500Z.mdb): written to a temporary name, fsynced,
 * opened and its programs counted, and only then renamed into place (and
 * the directory fsynced), so that a name always holds a whole, verified
 * copy. A snapshot taken in the same second as the previous one replaces it.
 * docs/archive.md describes snapshots, damage and restoring. */
#ifndef KEVO_SNAPSHOT_H
#define KEVO_SNAPSHOT_H

#include <limits.h>
#include <stdint.h>

#include "archive/archive.h"
#include "common/err.h"

#define KV_SNAPSHOT_DIR "snapshots" /* inside the run directory */

typedef struct {
    char path[PATH_MAX];
    int64_t taken_ns;  /* from its name: UTC, whole seconds */
    uint64_t programs; /* counted when it was verified */
    uint64_t bytes;    /* its size */
    double seconds;    /* kv_snapshot_take: copy, fsync, verification and rotation */
} kv_snapshot_info;

/* Takes a snapshot of the archive a (a writer's handle, no write transaction
 * needed; one may be open) and then deletes all but the newest keep (>= 1)
 * snapshots of the run directory (and temporary files left by a killed
 * snapshot). Refused when the writer's check found the archive changed by
 * another process (the snapshots already there are kept: they are what a
 * restore needs). Blocks while LMDB copies; the map cannot grow meanwhile
 * (a growth waits). info may be NULL. 0, or -1 with err naming the file and
 * the step; on failure the temporary file is removed and no snapshot is
 * deleted. */
int kv_snapshot_take(kv_archive *a, int keep, kv_snapshot_info *info, kv_err *err);

/* A snapshot taken on a thread of its own, so that the caller's loop goes on
 * while LMDB copies (docs/archive.md has the figures). One at a time per
 * archive; the archive must stay open until kv_snapshot_finish returned. */
typedef struct kv_snapshot_job kv_snapshot_job;
/* Starts one (same checks and refusals as kv_snapshot_take): 0 with *out
 * set, or -1 with err (nothing started). */
int kv_snapshot_start(kv_archive *a, int keep, kv_snapshot_job **out, kv_err *err);
/* 1 when the job is done (kv_snapshot_finish will not block), else 0. */
int kv_snapshot_done(const kv_snapshot_job *j);
/* Waits for the job, frees it and returns its result as kv_snapshot_take
 * would (info may be NULL). */
int kv_snapshot_finish(kv_snapshot_job *j, kv_snapshot_info *info, kv_err *err);

/* Walks the snapshot (or archive) file at path in a child process first
 * (kv_archive_walk, quick: a damaged page is named, never crashed on here;
 * fork: not for a thread of a process that runs others),
 * then opens it read-only without touching it (no lock file is made), runs
 * kv_archive_open's checks, and counts the programs: the counters must agree
 * with the programs database. 0 with info
 * filled (taken_ns from the name when it is a snapshot's, else 0), or -1
 * with err. */
int kv_snapshot_verify(const char *path, kv_snapshot_info *info, kv_err *err);

/* The newest snapshot of run_dir that verifies: 0, KV_NOTFOUND when there is
 * none (err then says how many were tried and why the newest failed, or that
 * there are none), or -1 when the directory cannot be read. */
int kv_snapshot_newest(const char *run_dir, kv_snapshot_info *info, kv_err *err);

/* What kv_archive_restore did. */
typedef struct {
    kv_snapshot_info from;     /* the snapshot put in place */
    char aside[PATH_MAX];      /* where the archive it replaced went; "" if there was none */
    char lock_aside[PATH_MAX]; /* and its lock file; "" if there was none */
    uint64_t programs;         /* what <run_dir>/archive.mdb holds now */
} kv_restore_info;

/* Puts a snapshot back as <run_dir>/archive.mdb: the one at snapshot, which
 * must verify, or with snapshot NULL the newest that verifies. Refused when
 * any process has the archive open (LMDB's lock file is locked: a run or a
 * reader; stop it first). The snapshot is copied to a temporary file and
 * fsynced; then the archive and its lock file are moved aside as
 * archive.mdb.damaged-<UTC> and archive.mdb-lock.damaged-<UTC> (never
 * deleted), and the copy renamed into place; the result is opened and its
 * programs counted. 0 with *info filled, or -1 with err: a failure before the
 * move leaves the directory as it was. */
int kv_archive_restore(const char *run_dir, const char *snapshot, kv_restore_info *info,
                       kv_err *err);

#endif
