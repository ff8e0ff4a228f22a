/* sandbox.c — the confinement of a group's workers: probing what the kernel
 * offers, the group's directories, its network namespace (netns.c), the
 * Landlock rulesets (built here, in the supervisor, before any fork;
 * landlock.c) and the steps the child takes between fork and exec (sandbox.h
 * says which, and why in that order). */
#define _GNU_SOURCE /* pipe2, O_PATH, dl_iterate_phdr */
#include "evaluator/confine/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/env.h"
#include "common/fsutil.h"
#include "common/syscall_filter.h"
#include "evaluator/confine/landlock.h"
#include "evaluator/confine/netns.h"

#ifndef CLONE_NEWNS
#define CLONE_NEWNS 0x00020000
#endif
#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS 38
#endif

/* What the workers may read: the system's programs, libraries and
 * configuration (CUDA's and NCCL's included), and the kernel's views that
 * CUDA and NCCL read (/proc/driver/nvidia, /sys topology). */
static const char *const read_roots[] = {"/usr",  "/lib", "/lib64", "/lib32", "/libx32", "/bin",
                                         "/sbin", "/etc", "/opt",   "/proc",  "/sys"};
/* CUDA's driver opens a file under /proc for writing, with O_TRUNC, when it
 * starts (without both rights cudaSetDevice fails with "OS call failed",
 * seen on the H200 machines). The worker's own uid and Landlock's ptrace
 * rule keep it to the worker's own entries. */
#define LL_PROC (LL_READ | LL_WRITE_FILE | LL_TRUNCATE)
/* Device files the workers may open for writing and ioctl: the GPUs, the
 * driver's control and UVM files (all /dev/nvidia*), and the harmless ones. */
static const char *const device_files[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                           "/dev/urandom"};

#define MAX_RULES 96

typedef struct {
    char path[PATH_MAX];
    uint64_t access;
} rule;

struct kv_sandbox {
    kv_sandbox_opts o;
    kv_sandbox_support sup;
    int group, world;
    uint32_t uid;          /* the workers' uid when sup.root */
    long nproc;            /* RLIMIT_NPROC of a worker */
    char dir[PATH_MAX];    /* <tmp>/kevo-<pid>-g<G>-XXXXXX (mkdtemp) */
    char dump[PATH_MAX];   /* dir/dump, or "" (kevo eval --dump) */
    char worker[PATH_MAX]; /* dir/bin/<name> */
    char scratch[KV_SANDBOX_MAX_RANKS][PATH_MAX];
    char tmpfs_opts[128];
    int ruleset[KV_SANDBOX_MAX_RANKS]; /* -1 when unconfined; made anew for every start */
    uint64_t handled;                  /* the filesystem rights the rulesets handle */
    int netns;                         /* the group's network namespace; -1 without one */
    rule rules[MAX_RULES];             /* the rules every rank shares */
    int n_rules;
    int rules_lost; /* a path that did not fit: the start fails */
    char **env[KV_SANDBOX_MAX_RANKS];
};

/* ---- what the kernel offers ------------------------------------------------------------------ */

/* Whether a child may make a private mount namespace (as root, unless a
 * container forbids it): tried in a throw-away child. */
static int can_unshare_mounts(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(syscall(SYS_unshare, CLONE_NEWNS) == 0 ? 0 : 1);
    if (p < 0)
        return 0;
    int st;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR)
            return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void kv_sandbox_probe(kv_sandbox_support *s)
{
    memset(s, 0, sizeof *s);
    s->landlock_abi = kv_ll_abi();
    s->root = geteuid() == 0;
    s->mount_ns = s->root && can_unshare_mounts();
    s->net_ns = s->root && kv_netns_possible();
}

void kv_sandbox_describe(const kv_sandbox_support *s, int allow_unconfined, char *out, size_t cap)
{
    if (s->landlock_abi > 0)
        snprintf(out, cap, "confined: Landlock ABI %d (%s); %s; scratch %s; %s", s->landlock_abi,
                 s->landlock_abi >= 6 ? "files, truncation, device ioctls, signals"
                                      : "files only: signals to the search are NOT scoped "
                                        "(ABI < 6)",
                 s->root ? "as root, workers run under their own uid with no capabilities"
                         : "workers run under kevo's uid",
                 s->mount_ns ? "a private tmpfs of bounded size"
                             : "a plain folder (its total size is NOT bounded, only each file)",
                 !kv_syscall_filter_supported()
                     ? "system calls NOT filtered (no seccomp numbers for this architecture)"
                     : "ptrace, /proc/self/mem, exec and other dangerous system calls refused");
    else
        snprintf(out, cap,
                 "NOT CONFINED: this kernel offers no Landlock, so candidate code could write "
                 "the archive and the disk; %s",
                 allow_unconfined ? "evaluation.allow_unconfined is set, so workers start anyway"
                                  : "workers refuse to start (evaluation.allow_unconfined would "
                                    "allow it)");
}

void kv_sandbox_describe_network(const kv_sandbox_support *s, char *out, size_t cap)
{
    if (s->net_ns)
        snprintf(out, cap,
                 "each group's workers in a network namespace of their own, with "
                 "only loopback: nothing outside the group can be reached");
    else
        snprintf(out, cap,
                 "NOT ISOLATED: %s, so candidate code can connect anywhere the "
                 "machine can (run kevo as root for a network namespace per group)",
                 s->root ? "this system refuses a new network namespace"
                         : "kevo does not run as root");
}

/* ---- rules ----------------------------------------------------------------------------------- */

static void add_rule(kv_sandbox *sb, const char *path, uint64_t access)
{
    for (int i = 0; i < sb->n_rules; i++)
        if (strcmp(sb->rules[i].path, path) == 0) {
            sb->rules[i].access |= access;
            return;
        }
    if (sb->n_rules < MAX_RULES && strlen(path) < PATH_MAX && path[0] == '/') {
        snprintf(sb->rules[sb->n_rules].path, PATH_MAX, "%s", path);
        sb->rules[sb->n_rules++].access = access;
    } else {
        sb->rules_lost++; /* never silently: a missing rule would deny what CUDA needs */
    }
}

static void add_dir_of(kv_sandbox *sb, const char *file, uint64_t access)
{
    char d[PATH_MAX];
    if (!file || file[0] != '/' || strlen(file) >= sizeof d)
        return;
    snprintf(d, sizeof d, "%s", file);
    char *slash = strrchr(d, '/');
    if (slash == d)
        return; /* "/" itself is never a rule */
    *slash = '\0';
    add_rule(sb, d, access);
}

/* Folders of the shared objects this process has loaded: the libraries the
 * worker links come from the same places (a private prefix of LMDB and
 * cJSON on a GPU machine, say). */
static int add_loaded_library(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    add_dir_of(data, info->dlpi_name, LL_READ);
    return 0;
}

static void add_path_list(kv_sandbox *sb, const char *list)
{
    if (!list)
        return;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
        if (d[0] == '/' && strcmp(d, "/") != 0)
            add_rule(sb, d, LL_READ);
}

static void collect_rules(kv_sandbox *sb, const char *bin, const char *inbox)
{
    for (size_t i = 0; i < sizeof read_roots / sizeof read_roots[0]; i++)
        add_rule(sb, read_roots[i], LL_READ);
    add_rule(sb, "/proc", LL_PROC);
    dl_iterate_phdr(add_loaded_library, sb);
    add_path_list(sb, getenv("LD_LIBRARY_PATH"));
    add_rule(sb, bin, LL_READ);
    add_rule(sb, inbox, LL_READ);
    add_rule(sb, "/dev", LL_READ_FILE | LL_READ_DIR);
    for (size_t i = 0; i < sizeof device_files / sizeof device_files[0]; i++)
        add_rule(sb, device_files[i], LL_DEVICE);
    glob_t g;
    if (glob("/dev/nvidia*", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            add_rule(sb, g.gl_pathv[i], LL_DEVICE | LL_READ_DIR);
        globfree(&g);
    }
    /* NCCL shares its proxies' operation pools between the ranks through
     * files in /dev/shm */
    add_rule(sb, "/dev/shm", LL_READ_WRITE);
    if (sb->dump[0])
        add_rule(sb, sb->dump, LL_READ_WRITE);
}

/* Fails when a rule would let the workers reach private_dir. */
static int check_private(const kv_sandbox *sb, kv_err *err)
{
    char priv[PATH_MAX];
    if (!sb->o.private_dir[0])
        return 0;
    if (!realpath(sb->o.private_dir, priv))
        return kv_err_errno(err, errno, "%s", sb->o.private_dir);
    for (int i = 0; i < sb->n_rules; i++) {
        char rp[PATH_MAX];
        if (!realpath(sb->rules[i].path, rp))
            continue;
        size_t n = strlen(rp);
        if (strncmp(priv, rp, n) == 0 && (priv[n] == '/' || priv[n] == '\0'))
            return kv_err_set(err,
                              "%s lies inside %s, which the workers may %s: candidate code could "
                              "reach it; put the run directory elsewhere",
                              priv, rp, sb->rules[i].access & LL_WRITE_FILE ? "write" : "read");
    }
    return 0;
}

/* Rank r's ruleset, made anew before every start of the rank: the child
 * adds a rule for its own tmpfs (the root of a mount made after the fork:
 * Landlock does not carry a rule on the folder beneath a mount over to the
 * mount), and a fresh ruleset keeps those from piling up. */
static int build_ruleset(kv_sandbox *sb, int rank, kv_err *err)
{
    int abi = sb->sup.landlock_abi;
    if (sb->ruleset[rank] >= 0) {
        close(sb->ruleset[rank]);
        sb->ruleset[rank] = -1;
    }
    sb->handled = kv_ll_handled_fs(abi);
    int fd = kv_ll_ruleset(abi, 1, err);
    if (fd < 0)
        return -1;
    sb->ruleset[rank] = fd;
    for (int i = 0; i < sb->n_rules; i++)
        if (kv_ll_allow(fd, sb->rules[i].path, sb->rules[i].access, sb->handled, err) != 0)
            return -1;
    return kv_ll_allow(fd, sb->scratch[rank], LL_READ_WRITE, sb->handled, err);
}

/* ---- the group's directory and environment ---------------------------------------------------- */

/* Tasks (threads count) that run under our real uid now: RLIMIT_NPROC
 * counts them all, so a non-root worker's limit is that plus its share. */
static long tasks_of_uid(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%.20s/status", de->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        long real = -1, threads = 0;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "Uid:", 4) == 0)
                real = strtol(line + 4, NULL, 10);
            else if (strncmp(line, "Threads:", 8) == 0)
                threads = strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (real == (long)uid)
            n += threads;
    }
    closedir(d);
    return n;
}

/* A live process whose real uid is uid, or 0 when there is none (zombies
 * do not count). */
static pid_t live_pid_of_uid(uid_t uid)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *de;
    while (d && !found && (de = readdir(d)) != NULL) {
        char path[64];
        struct stat st;
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%.20s", de->d_name);
        if (stat(path, &st) != 0 || st.st_uid != uid)
            continue;
        char stat_path[80], line[512];
        snprintf(stat_path, sizeof stat_path, "%s/stat", path);
        FILE *f = fopen(stat_path, "re");
        const char *state = NULL;
        if (f && fgets(line, sizeof line, f) && (state = strrchr(line, ')')) != NULL)
            state += 2; /* "pid (comm) S ..." */
        if (f)
            fclose(f);
        if (!state || (*state != 'Z' && *state != 'X'))
            found = (pid_t)atoi(de->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

/* The workers of a kevo that has just died (PDEATHSIG) take a moment to go:
 * wait up to 2 s for the uid to be free before calling it busy. */
static pid_t pid_of_uid(uid_t uid)
{
    pid_t p = 0;
    for (int i = 0; i < 200 && (p = live_pid_of_uid(uid)) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return p;
}

static void free_env(kv_sandbox *sb, int rank)
{
    kv_env_free(sb->env[rank]);
    sb->env[rank] = NULL;
}

/* The allow-listed part of our environment as it is now (common/env.h: no
 * secret of the user's; a restart sees what changed since the group was
 * made), with HOME and TMPDIR in the rank's scratch, and NCCL told to use
 * the only interface its namespace has. */
static int make_env(kv_sandbox *sb, int rank)
{
    free_env(sb, rank);
    char home[PATH_MAX + 8], tmp[PATH_MAX + 8];
    snprintf(home, sizeof home, "HOME=%s", sb->scratch[rank]);
    snprintf(tmp, sizeof tmp, "TMPDIR=%s", sb->scratch[rank]);
    const char *extra[] = {home, tmp, sb->netns >= 0 ? "NCCL_SOCKET_IFNAME=lo" : NULL, NULL};
    sb->env[rank] = kv_env_allowed_copy(extra);
    return sb->env[rank] ? 0 : -1;
}

/* As the workers' uid, in a throw-away child: can it execute the copy of
 * the worker (every folder above it must let that uid in)? */
static int uid_can_exec(uint32_t uid, const char *path)
{
    pid_t p = fork();
    if (p == 0) {
        if (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, uid, uid, uid) != 0 ||
            syscall(SYS_setresuid, uid, uid, uid) != 0)
            _exit(2);
        _exit(access(path, X_OK) == 0 ? 0 : 1);
    }
    if (p < 0)
        return -1;
    int st;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int kv_sandbox_new(const kv_sandbox_opts *o, int group, int world, const char *worker_path,
                   kv_sandbox **out, kv_err *err)
{
    *out = NULL;
    if (world < 1 || world > KV_SANDBOX_MAX_RANKS)
        return kv_err_set(err, "sandbox: world %d out of range", world);
    kv_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return kv_err_set(err, "sandbox: out of memory");
    sb->o = *o;
    if (!sb->o.scratch_bytes)
        sb->o.scratch_bytes = KV_SANDBOX_DEFAULT_SCRATCH;
    if (sb->o.nproc <= 0)
        sb->o.nproc = KV_SANDBOX_DEFAULT_NPROC;
    if (!sb->o.worker_uid)
        sb->o.worker_uid = KV_SANDBOX_DEFAULT_UID;
    sb->group = group;
    sb->world = world;
    for (int r = 0; r < KV_SANDBOX_MAX_RANKS; r++)
        sb->ruleset[r] = -1;
    sb->netns = -1;
    kv_sandbox_probe(&sb->sup);
    sb->uid = sb->o.worker_uid + (uint32_t)group;
    sb->nproc = sb->sup.root ? sb->o.nproc : tasks_of_uid(getuid()) + sb->o.nproc;
    if (!sb->sup.landlock_abi && !o->allow_unconfined) {
        char why[512];
        kv_sandbox_describe(&sb->sup, 0, why, sizeof why);
        free(sb);
        return kv_err_set(err, "group %d: %s", group, why);
    }

    const char *tmp = getenv("TMPDIR");
    char bin[PATH_MAX], inbox[PATH_MAX];
    const char *name = strrchr(worker_path, '/');
    name = name ? name + 1 : worker_path;
    if ((size_t)snprintf(sb->dir, sizeof sb->dir, "%s/kevo-%d-g%d-XXXXXX",
                         tmp && *tmp ? tmp : "/tmp", (int)getpid(), group) >= sizeof sb->dir) {
        free(sb);
        return kv_err_set(err, "sandbox of group %d: path too long", group);
    }
    char made[PATH_MAX];
    memcpy(made, sb->dir, sizeof made);
    /* a name of our own, which no one can have made first: the folder is
     * ours to fill and, as root, to remove */
    if (!mkdtemp(sb->dir)) {
        int e = errno;
        free(sb);
        return kv_err_errno(err, e, "sandbox of group %d: mkdtemp %s", group, made);
    }
    int too_long =
        (size_t)snprintf(bin, sizeof bin, "%s/bin", sb->dir) >= sizeof bin ||
        (size_t)snprintf(inbox, sizeof inbox, "%s/inbox", sb->dir) >= sizeof inbox ||
        (size_t)snprintf(sb->worker, sizeof sb->worker, "%s/%s", bin, name) >= sizeof sb->worker ||
        (sb->o.dump &&
         (size_t)snprintf(sb->dump, sizeof sb->dump, "%s/dump", sb->dir) >= sizeof sb->dump);
    for (int r = 0; r < world && !too_long; r++)
        too_long = (size_t)snprintf(sb->scratch[r], PATH_MAX, "%s/r%d", sb->dir, r) >= PATH_MAX;
    if (too_long) {
        (void)rmdir(sb->dir); /* just made, empty */
        free(sb);
        return kv_err_set(err, "sandbox of group %d: path too long", group);
    }
    snprintf(sb->tmpfs_opts, sizeof sb->tmpfs_opts,
             "size=%zu,nr_inodes=16384,mode=0700,uid=%u,gid=%u", sb->o.scratch_bytes,
             sb->sup.root ? sb->uid : (uint32_t)getuid(),
             sb->sup.root ? sb->uid : (uint32_t)getgid());
    *out = sb; /* from here on, kv_sandbox_free undoes what was done */
    pid_t busy;
    /* the kill of the whole uid must reach only this group's processes */
    if (sb->sup.root && (busy = pid_of_uid(sb->uid)) > 0) {
        kv_err_set(err,
                   "group %d: uid %u, the workers', already runs processes (pid %d): another "
                   "kevo, or what one left behind; end them, or give this run another "
                   "evaluation.worker_uid",
                   group, sb->uid, (int)busy);
        goto fail;
    }
    if (chmod(sb->dir, 0755) != 0 || mkdir(bin, 0755) != 0 || mkdir(inbox, 0755) != 0 ||
        chmod(bin, 0755) != 0 || chmod(inbox, 0755) != 0) {
        int e = errno;
        kv_err_errno(err, e, "sandbox of group %d: mkdir %s", group, sb->dir);
        goto fail;
    }
    if (kv_sandbox_copy_file(worker_path, sb->worker, 0755, (size_t)1 << 31, err) != 0) {
        kv_err_prefix(err, "sandbox of group %d: the worker binary", group);
        goto fail;
    }
    if (sb->sup.root && uid_can_exec(sb->uid, sb->worker) != 0) {
        kv_err_set(err,
                   "sandbox of group %d: the workers' uid %u cannot execute %s: every folder "
                   "above it must let other users in (set TMPDIR to such a folder)",
                   group, sb->uid, sb->worker);
        goto fail;
    }
    /* before the environments: theirs name the namespace's interface */
    if (sb->sup.net_ns && (sb->netns = kv_netns_new(err)) < 0) {
        kv_err_prefix(err, "sandbox of group %d", group);
        goto fail;
    }
    for (int r = 0; r < world; r++)
        if (kv_sandbox_prepare_rank(sb, r, err) != 0) {
            kv_err_prefix(err, "sandbox of group %d", group);
            goto fail;
        }
    /* the workers write a dump there; kv_sandbox_take_dump copies it out, so
     * that no folder of the user's is ever given to them */
    if (sb->dump[0] &&
        (mkdir(sb->dump, 0700) != 0 || (sb->sup.root && chown(sb->dump, sb->uid, sb->uid) != 0))) {
        kv_err_errno(err, errno, "sandbox of group %d: the dump folder %s", group, sb->dump);
        goto fail;
    }
    if (sb->sup.landlock_abi) {
        collect_rules(sb, bin, inbox);
        if (sb->rules_lost) {
            kv_err_set(err,
                       "sandbox of group %d: %d Landlock rules beyond the %d kevo keeps "
                       "(LD_LIBRARY_PATH too long?)",
                       group, sb->rules_lost, MAX_RULES);
            goto fail;
        }
        if (check_private(sb, err) != 0) {
            kv_err_prefix(err, "group %d", group);
            goto fail;
        }
        for (int r = 0; r < world; r++)
            if (build_ruleset(sb, r, err) != 0) {
                kv_err_prefix(err, "sandbox of group %d, rank %d", group, r);
                goto fail;
            }
    }
    return 0;
fail:
    kv_sandbox_free(sb);
    *out = NULL;
    return -1;
}

void kv_sandbox_free(kv_sandbox *sb)
{
    if (!sb)
        return;
    for (int r = 0; r < KV_SANDBOX_MAX_RANKS; r++) {
        if (sb->ruleset[r] >= 0)
            close(sb->ruleset[r]);
        free_env(sb, r);
    }
    if (sb->netns >= 0)
        close(sb->netns);
    if (sb->dir[0])
        (void)kv_rm_rf(sb->dir);
    free(sb);
}

const char *kv_sandbox_worker_path(const kv_sandbox *sb)
{
    return sb->worker;
}

const char *kv_sandbox_dir(const kv_sandbox *sb)
{
    return sb->dir;
}

const char *kv_sandbox_dump_dir(const kv_sandbox *sb)
{
    return sb->dump;
}

int kv_sandbox_confined(const kv_sandbox *sb)
{
    return sb->sup.landlock_abi > 0;
}

char *const *kv_sandbox_envp(const kv_sandbox *sb, int rank)
{
    return sb->env[rank];
}

int kv_sandbox_prepare_rank(kv_sandbox *sb, int rank, kv_err *err)
{
    const char *d = sb->scratch[rank];
    if (mkdir(d, 0700) != 0 && errno != EEXIST)
        return kv_err_errno(err, errno, "mkdir %s", d);
    /* emptied, never made anew: a non-root worker's Landlock rule holds its inode */
    if (kv_rm_contents(d) != 0)
        return kv_err_errno(err, errno, "emptying the scratch %s", d);
    if (sb->sup.root && chown(d, sb->uid, sb->uid) != 0)
        return kv_err_errno(err, errno, "chown %s to uid %u", d, sb->uid);
    if (chmod(d, 0700) != 0)
        return kv_err_errno(err, errno, "chmod %s", d);
    if (make_env(sb, rank) != 0)
        return kv_err_set(err, "environment of rank %d: out of memory", rank);
    if (sb->sup.landlock_abi && sb->n_rules && build_ruleset(sb, rank, err) != 0)
        return kv_err_prefix(err, "rank %d", rank);
    return 0;
}

/* ---- in the child ---------------------------------------------------------------------------- */

int kv_sandbox_enter(const kv_sandbox *sb, int rank, const char **what)
{
    const char *scratch = sb->scratch[rank];
    if (sb->sup.mount_ns) {
        *what = "a private tmpfs for the scratch";
        if (syscall(SYS_unshare, CLONE_NEWNS) != 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("kevo-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV, sb->tmpfs_opts) != 0)
            return errno;
        if (sb->ruleset[rank] >= 0) {
            *what = "a Landlock rule for the scratch";
            int fd = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                return errno;
            int e = kv_ll_allow_fd(sb->ruleset[rank], fd, LL_READ_WRITE & sb->handled);
            close(fd);
            if (e != 0)
                return e;
        }
    }
    struct rlimit none = {0, 0};
    /* a dump (kevo eval --dump) writes whole tensors: up to the largest size's */
    rlim_t largest = sb->dump[0] ? (rlim_t)16 << 30 : (rlim_t)sb->o.scratch_bytes;
    struct rlimit fsize = {largest, largest};
    struct rlimit nproc = {(rlim_t)sb->nproc, (rlim_t)sb->nproc};
    *what = "setrlimit";
    if (setrlimit(RLIMIT_CORE, &none) != 0 || setrlimit(RLIMIT_FSIZE, &fsize) != 0 ||
        setrlimit(RLIMIT_NPROC, &nproc) != 0)
        return errno;
    /* while we may: joining a namespace takes CAP_SYS_ADMIN */
    if (sb->netns >= 0) {
        *what = "joining the group's network namespace";
        int e = kv_netns_enter(sb->netns);
        if (e != 0)
            return e;
    }
    if (sb->sup.root) {
        /* raw system calls: they change this thread only, which after fork
         * is the whole process; a uid other than 0 holds no capabilities */
        *what = "switching to the workers' uid";
        if (syscall(SYS_setgroups, 0, NULL) != 0 ||
            syscall(SYS_setresgid, sb->uid, sb->uid, sb->uid) != 0 ||
            syscall(SYS_setresuid, sb->uid, sb->uid, sb->uid) != 0)
            return errno;
    }
    *what = "chdir to the scratch";
    if (chdir(scratch) != 0)
        return errno;
    *what = "prctl(PR_SET_NO_NEW_PRIVS)";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return errno;
    *what = "landlock_restrict_self";
    int e = sb->ruleset[rank] >= 0 ? kv_ll_restrict(sb->ruleset[rank]) : 0;
    if (e != 0)
        return e;
    /* last: it refuses mount and unshare, which the steps above make; exec
     * stays allowed (the worker refuses it on itself once it is up) */
    *what = "the system-call filter";
    e = kv_syscall_filter_install(KV_FILTER_SANDBOX);
    return e == ENOSYS ? 0 : e; /* an architecture without numbers: said by describe */
}

void kv_sandbox_kill_all(const kv_sandbox *sb)
{
    if (!sb || !sb->sup.root)
        return;
    pid_t p = fork();
    if (p == 0) {
        /* kill(-1) reaches every process this uid may signal, not itself */
        if (syscall(SYS_setresuid, sb->uid, sb->uid, sb->uid) == 0)
            kill(-1, SIGKILL);
        _exit(0);
    }
    if (p > 0)
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
            ;
}
