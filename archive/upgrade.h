/* upgrade.h — converting a run's archive of an older schema to this kevo's
 * (docs/archive.md, "Upgrading an archive"). */
#ifndef KEVO_UPGRADE_H
#define KEVO_UPGRADE_H

#include <limits.h>
#include <stdint.h>

#include "common/err.h"

/* What kv_archive_upgrade did. */
typedef struct {
    uint32_t from_version; /* the schema the archive had */
    int upgraded;          /* 0: it already had this kevo's schema; nothing was done */
    uint64_t records;      /* copied, over every database (the check walked as many) */
    uint64_t sources;      /* code records re-encoded, each decoded and compared */
    uint64_t source_bytes; /* their raw length */
    uint64_t old_bytes;    /* the size of the old file and of the new one */
    uint64_t new_bytes;
    char aside[PATH_MAX];      /* where the old archive is kept ("archive.mdb.v1-<UTC>") */
    char lock_aside[PATH_MAX]; /* and its lock file; "" if there was none */
} kv_upgrade_info;

/* Converts <run_dir>/archive.mdb to this kevo's schema. Holds the run's
 * writer lock; refused while any process has the archive open. Every
 * record is copied unchanged into a new file next to the archive
 * (archive.mdb.upgrade), except the sources, which are decoded and stored
 * with zstd (each one compared byte for byte with what it was), and the
 * schema version; the dictionary goes into meta. The new file is then
 * fsynced and walked in full (every record decoded), and only then is the
 * old file linked as archive.mdb.v<N>-<UTC> (never deleted) and the new one
 * renamed over archive.mdb. A failure at any point before that rename
 * leaves archive.mdb as it was and removes the new file. 0 with *info, or
 * -1 with err. */
int kv_archive_upgrade(const char *run_dir, kv_upgrade_info *info, kv_err *err);

#endif
