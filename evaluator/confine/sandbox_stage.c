/* sandbox_stage.c — the group's inbox: copies of what a job names (the
 * reference's and the candidate's shared objects, the problem's inputs hook,
 * the problem's folder), so that confined workers read these and never the
 * compile cache or the problems' own folders, which may lie where their uid
 * cannot go (root's home) or next to what they must not see. */
#include "evaluator/confine/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/sha256.h"

#define MAX_SO_BYTES ((size_t)1 << 30)      /* a shared object */
#define MAX_PROBLEM_FILE ((size_t)16 << 20) /* a file of a problem's folder */

int kv_sandbox_copy_file(const char *src, const char *dst, int mode, size_t max_bytes, kv_err *err)
{
    kv_atomic_file af;
    if (kv_atomic_open(&af, dst, err) != 0)
        return -1;
    if (kv_copy_into(src, &af, max_bytes, err) != 0) {
        kv_atomic_abandon(&af);
        return -1;
    }
    if (fchmod(fileno(af.f), (mode_t)mode) != 0) {
        kv_err_errno(err, errno, "chmod %s", af.tmp);
        kv_atomic_abandon(&af);
        return -1;
    }
    return kv_atomic_commit(&af, err);
}

/* <inbox>/<prefix><16 hex digits of the source path's hash><suffix> */
static int inbox_name(const kv_sandbox *sb, const char *prefix, const char *src, const char *suffix,
                      char *out, size_t cap, kv_err *err)
{
    uint8_t h[32];
    if (kv_sha256(src, strlen(src), h) != 0)
        return kv_err_set(err, "inbox name of %s: SHA-256 (libcrypto) failed", src);
    if ((size_t)snprintf(out, cap, "%s/inbox/%s%02x%02x%02x%02x%02x%02x%02x%02x%s",
                         kv_sandbox_dir(sb), prefix, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                         suffix) >= cap)
        return kv_err_set(err, "inbox path for %s: too long", src);
    return 0;
}

/* A shared object copied once: the compile cache's entries never change. */
static int stage_once(const kv_sandbox *sb, char *path, kv_err *err)
{
    char dst[PATH_MAX];
    if (!path[0] || access(path, F_OK) != 0)
        return 0; /* nothing to copy: the worker says what it could not open */
    if (inbox_name(sb, "so-", path, ".so", dst, sizeof dst, err) != 0)
        return -1;
    if (access(dst, F_OK) != 0 && kv_sandbox_copy_file(path, dst, 0644, MAX_SO_BYTES, err) != 0)
        return -1;
    snprintf(path, PATH_MAX, "%s", dst);
    return 0;
}

/* The regular files of a problem's folder (problem.json, reference.cu,
 * inputs.cu), copied once per group into <inbox>/problem-<hash>/<name>: a
 * problem's folder bears its name. */
static int stage_problem(const kv_sandbox *sb, char *dir, kv_err *err)
{
    char parent[PATH_MAX], dst[PATH_MAX];
    if (access(dir, F_OK) != 0)
        return 0; /* nothing to copy: the worker says what it could not open */
    const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    if (inbox_name(sb, "problem-", dir, "", parent, sizeof parent, err) != 0 ||
        kv_path_join(dst, sizeof dst, parent, name, err) != 0)
        return -1;
    if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return kv_err_errno(err, errno, "mkdir %s", parent);
    if (chmod(parent, 0755) != 0)
        return kv_err_errno(err, errno, "chmod %s", parent);
    if (access(dst, F_OK) == 0) {
        snprintf(dir, PATH_MAX, "%s", dst);
        return 0;
    }
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", dst) >= sizeof tmp)
        return kv_err_set(err, "inbox path for %s: too long", dir);
    (void)kv_rm_rf(tmp);
    if (mkdir(tmp, 0755) != 0 || chmod(tmp, 0755) != 0)
        return kv_err_errno(err, errno, "mkdir %s", tmp);
    DIR *d = opendir(dir);
    if (!d) {
        kv_err_errno(err, errno, "opendir %s", dir);
        (void)kv_rm_rf(tmp);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char from[PATH_MAX], to[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.' || kv_path_join(from, sizeof from, dir, de->d_name, err) != 0 ||
            stat(from, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (kv_path_join(to, sizeof to, tmp, de->d_name, err) != 0 ||
            kv_sandbox_copy_file(from, to, 0644, MAX_PROBLEM_FILE, err) != 0)
            rc = -1;
    }
    closedir(d);
    if (rc == 0 && rename(tmp, dst) != 0)
        rc = kv_err_errno(err, errno, "rename %s", tmp);
    if (rc != 0) {
        (void)kv_rm_rf(tmp);
        return -1;
    }
    snprintf(dir, PATH_MAX, "%s", dst);
    return 0;
}

static int candidate_copy(const kv_sandbox *sb, const kv_job *job, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/inbox/job-%" PRIu64 ".so", kv_sandbox_dir(sb), job->id) <
                   cap
               ? 0
               : -1;
}

/* The job pointed at the group's dump/, emptied of an earlier job's dump. */
static int stage_dump(const kv_sandbox *sb, kv_job *job, kv_err *err)
{
    const char *dump = kv_sandbox_dump_dir(sb);
    if (!dump[0])
        return kv_err_set(err, "a dump into %s, but the group was made without a dump folder",
                          job->dump_dir);
    if (kv_rm_contents(dump) != 0)
        return kv_err_errno(err, errno, "emptying the dump folder %s", dump);
    snprintf(job->dump_dir, sizeof job->dump_dir, "%s", dump);
    return 0;
}

int kv_sandbox_take_dump(kv_sandbox *sb, const char *dest, kv_err *err)
{
    const char *dump = kv_sandbox_dump_dir(sb);
    if (!dump[0])
        return kv_err_set(err, "no dump folder in this group");
    int rc = kv_copy_tree(dump, dest, err);
    if (rc != 0)
        kv_err_prefix(err, "copying the dump to %s", dest);
    if (kv_rm_contents(dump) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "emptying the dump folder %s", dump);
    return rc;
}

int kv_sandbox_stage_job(kv_sandbox *sb, kv_job *job, kv_err *err)
{
    if (job->dump_dir[0] && stage_dump(sb, job, err) != 0)
        return kv_err_prefix(err, "staging job %" PRIu64 " for the workers", job->id);
    if (stage_problem(sb, job->problem_dir, err) != 0 ||
        stage_once(sb, job->reference_so, err) != 0 || stage_once(sb, job->inputs_so, err) != 0)
        return kv_err_prefix(err, "staging job %" PRIu64 " for the workers", job->id);
    if (job->candidate_so[0] && access(job->candidate_so, F_OK) == 0) {
        char dst[PATH_MAX];
        if (candidate_copy(sb, job, dst, sizeof dst) != 0)
            return kv_err_set(err, "staging job %" PRIu64 ": path too long", job->id);
        if (kv_sandbox_copy_file(job->candidate_so, dst, 0644, MAX_SO_BYTES, err) != 0)
            return kv_err_prefix(err, "staging job %" PRIu64 " for the workers", job->id);
        snprintf(job->candidate_so, sizeof job->candidate_so, "%s", dst);
    }
    return 0;
}

void kv_sandbox_unstage_job(kv_sandbox *sb, const kv_job *staged)
{
    char dst[PATH_MAX];
    if (staged->candidate_so[0] && candidate_copy(sb, staged, dst, sizeof dst) == 0)
        (void)unlink(dst);
}
