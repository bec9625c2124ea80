// _GNU_SOURCE only here, never in the header: see csupport.h.
#define _GNU_SOURCE
#include "csupport.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <malloc.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

const unsigned long long cs_cgroup2_magic = CGROUP2_SUPER_MAGIC;
const unsigned long long cs_cgroup1_magic = CGROUP_SUPER_MAGIC;
const unsigned long long cs_tmpfs_magic = TMPFS_MAGIC;

// MARK: - Spawn

struct spawn_args {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int has_ids;
    uid_t uid;
    gid_t gid;
    const gid_t *groups;
    int ngroups;
    int inherit_fd;
    int output_fd;
    const int *cgroup_fds;
    int ncgroup_fds;
    volatile int error; // written by the child, which shares our memory (CLONE_VM)
    int report_fd;      // -1; under ThreadSanitizer (spawn_forked), where the child writes its errno instead
    // With a slot set (see "Descriptor slots" below): the child shares our descriptor table (CLONE_FILES) and
    // makes its own first, keeping only descriptors below `table_limit`; every one in [3, table_limit) but
    // `keep[0..<nkeep]` is then closed.
    int table_limit;    // 0: the child has a copy of the whole table (plain clone)
    const int *keep;
    int nkeep;
    volatile int unshare_failed; // set by the child: this kernel has no CLOSE_RANGE_UNSHARE
    int hold_fd;        // -1; else the child's end of a held spawn's socket (cs_spawn_held)
};

// ThreadSanitizer intercepts clone() and handles every call as a fork: a CLONE_VM clone fails one of
// its internal checks and aborts the process (docs/PLATFORM.md, "Spawning"). Its builds alone fork
// instead (spawn_forked); every other build takes the clone path below.
#if defined(__SANITIZE_THREAD__)
#define CS_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CS_THREAD_SANITIZER 1
#endif
#endif

// Sets the whole mask through the raw syscall: glibc's pthread_sigmask silently leaves its
// internal signals (SIGCANCEL, SIGSETXID) unblocked, and no handler may run in the child
// while it borrows the parent's memory.
static int raw_sigmask(const sigset_t *set, sigset_t *old) {
    return (int)syscall(SYS_rt_sigprocmask, SIG_SETMASK, set, old, _NSIG / 8);
}

// The soft descriptor limit the daemon had before cs_raise_nofile_limit raised it; children get it back. 0: unchanged.
static rlim_t child_nofile_soft;

// Closes every descriptor from `first` on but `keep1` and `keep2` (-1: none), in the child before execve.
static void close_from(int first, int keep1, int keep2) {
    int keep[2] = { keep1 < keep2 ? keep1 : keep2, keep1 < keep2 ? keep2 : keep1 };
    unsigned from = (unsigned)first;
    for (int i = 0; i < 2; i++) {
        if (keep[i] < first) continue;
        if ((unsigned)keep[i] > from) (void)syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
        from = (unsigned)keep[i] + 1;
    }
    if (syscall(SYS_close_range, from, ~0U, 0) < 0) {
        struct rlimit rl;
        long max = (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) ? (long)rl.rlim_cur : 65536;
        for (long fd = first; fd < max; fd++) {
            if (fd != keep1 && fd != keep2) (void)close((int)fd);
        }
    }
}

// Runs in the child, on its own stack but in the parent's memory, until execve.
// Only async-signal-safe calls. The credential changes are raw syscalls on purpose: glibc's
// setuid/setgid/setgroups in a multithreaded process broadcast the change to every thread in
// its thread list, and that list is the parent's.
static int spawn_child(void *p) {
    struct spawn_args *a = p;
    int hold = -1; // the hold socket, once placed (see below)

    if (a->table_limit > 0) {
        // Our own descriptor table, holding only the low part of the parent's (the standard descriptors and
        // the slots): CLOSE_RANGE_UNSHARE copies just the descriptors below the range when the range reaches
        // the end of the table (Linux 5.9+). Nothing before this line may touch a descriptor: the table is
        // still the parent's. If it fails, the spawn fails and the parent takes the plain path from then on.
        if (syscall(SYS_close_range, (unsigned)a->table_limit, ~0U, CLOSE_RANGE_UNSHARE) < 0) {
            a->unshare_failed = 1;
            goto fail;
        }
        // The rest of [3, table_limit) goes, one close_range per run between kept descriptors.
        int run = 3;
        for (int fd = 3; fd <= a->table_limit; fd++) {
            int kept = fd == a->table_limit;
            for (int i = 0; i < a->nkeep; i++) kept |= a->keep[i] == fd;
            if (!kept) continue;
            if (fd > run) (void)syscall(SYS_close_range, (unsigned)run, (unsigned)(fd - 1), 0);
            run = fd + 1;
        }
    }

    if (setsid() < 0) goto fail;

    // execve resets caught signals but keeps ignored ones (SIG_IGN); reset all. SIGKILL, SIGSTOP
    // and glibc's internal signals refuse with EINVAL, which is fine.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < _NSIG; sig++) (void)sigaction(sig, &dfl, NULL);
    // Except SIGPIPE, which stays ignored: an app's output may be a pipe to the daemon, and when the daemon
    // dies the next write must fail with EPIPE, not kill an app the next daemon is about to re-adopt.
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &ign, NULL);

    // Join the cgroups before execve, so the program never runs outside them.
    for (int i = 0; i < a->ncgroup_fds; i++) {
        if (write(a->cgroup_fds[i], "0", 1) != 1) goto fail;
    }

    // stdin is /dev/null, never the daemon's own stdin, which may be a terminal or a pipe of whoever started
    // it. The new descriptor takes the lowest free number, so it
    // is none of the descriptors placed below.
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) goto fail;
    if (null_fd != 0) {
        if (dup2(null_fd, 0) < 0) goto fail;
        close(null_fd);
    } else if (fcntl(0, F_SETFD, 0) < 0) {
        goto fail;
    }

    // A hold socket on 0 to 3 would be overwritten by the descriptors placed there below: it moves above them.
    hold = a->hold_fd;
    if (hold >= 0 && hold <= 3) {
        hold = fcntl(hold, F_DUPFD_CLOEXEC, 4);
        if (hold < 0) goto fail;
    }

    // stdout and stderr first: the descriptor moved to 3 below is never 1 or 2.
    if (a->output_fd >= 0) {
        if (dup2(a->output_fd, 1) < 0 || dup2(a->output_fd, 2) < 0) goto fail;
    }

    int first_to_close = 3;
    if (a->inherit_fd >= 0) {
        if (a->inherit_fd == 3) {
            // dup2(3, 3) would be a no-op that leaves FD_CLOEXEC set.
            int flags = fcntl(3, F_GETFD);
            if (flags < 0 || fcntl(3, F_SETFD, flags & ~FD_CLOEXEC) < 0) goto fail;
        } else if (dup2(a->inherit_fd, 3) < 0) {
            goto fail;
        }
        first_to_close = 4;
    }
    // Everything else goes, but the report pipe of a forked spawn and the hold socket (both close-on-exec: execve
    // closes them).
    close_from(first_to_close, a->report_fd, hold);

    if (a->cwd && chdir(a->cwd) < 0) goto fail;

    // The limit the daemon started with, not the one it raised for itself: a program using select() breaks on
    // descriptors past FD_SETSIZE (docs/PLATFORM.md, "Spawning").
    if (child_nofile_soft > 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > child_nofile_soft) {
            rl.rlim_cur = child_nofile_soft;
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
    }

    if (a->has_ids) {
        if (syscall(SYS_setgroups, (size_t)a->ngroups, a->groups) < 0) goto fail;
        if (syscall(SYS_setresgid, a->gid, a->gid, a->gid) < 0) goto fail;
        if (syscall(SYS_setresuid, a->uid, a->uid, a->uid) < 0) goto fail;
    }

    sigset_t empty;
    sigemptyset(&empty);
    if (raw_sigmask(&empty, NULL) < 0) goto fail;

    // A held spawn: the daemon learns the pid and lets the program run once the process is where it belongs. The
    // wait comes after the signal mask is emptied, so that a stop's SIGTERM ends a held child as it would the app.
    // An end of file means the daemon closed its end without a word (it died, or gave the launch up): the child
    // ends too rather than run, since it would run outside its place, in the daemon's own cgroup, unwatched.
    if (hold >= 0) {
        struct cs_hold_report held = { .pid = (int)syscall(SYS_getpid), .error = 0 };
        if (send(hold, &held, sizeof held, MSG_NOSIGNAL) != (ssize_t)sizeof held) goto fail;
        char go = 0;
        ssize_t n;
        do { n = read(hold, &go, 1); } while (n < 0 && errno == EINTR);
        if (n != 1) _exit(CS_HOLD_DROPPED_STATUS);
    }

    execve(a->path, a->argv, a->envp);
fail:
    a->error = errno ? errno : EINVAL;
    if (a->report_fd >= 0) {
        int e = a->error;
        (void)write(a->report_fd, &e, sizeof e);
    }
    // Not while the descriptor table is still the daemon's (the unshare failed): the spawn is tried again. Before
    // the hold socket was moved, it is where the daemon placed it.
    if (hold < 0) hold = a->hold_fd;
    if (hold >= 0 && !a->unshare_failed) {
        struct cs_hold_report failed = { .pid = (int)syscall(SYS_getpid), .error = a->error };
        (void)send(hold, &failed, sizeof failed, MSG_NOSIGNAL);
    }
    _exit(127);
}

#ifdef CS_THREAD_SANITIZER
// The spawn under ThreadSanitizer: fork (which it handles), then the same child; the child's errno
// comes back through a close-on-exec pipe, which execve closes on success. Used in its test builds only.
static pid_t spawn_forked(struct spawn_args *a) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) < 0) return -1;
    // Above 3, so that the fd the child moves to 3 cannot be it.
    if (report[1] <= 3) {
        int moved = fcntl(report[1], F_DUPFD_CLOEXEC, 10);
        if (moved < 0) { int e = errno; close(report[0]); close(report[1]); errno = e; return -1; }
        close(report[1]);
        report[1] = moved;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(report[0]);
        close(report[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(report[0]);
        a->report_fd = report[1];
        spawn_child(a);
        _exit(127);
    }
    close(report[1]);
    int e = 0;
    ssize_t n;
    do { n = read(report[0], &e, sizeof e); } while (n < 0 && errno == EINTR);
    close(report[0]);
    a->error = n == (ssize_t)sizeof e ? e : 0;
    return pid;
}
#endif

// MARK: Descriptor slots
//
// A clone without CLONE_FILES copies the daemon's whole descriptor table (a reference taken on every open
// file) for a child that then closes all but a few: with a pidfd and an output pipe per app, a spawn's cost
// would grow with the number of apps running (docs/PLATFORM.md, "Spawning"). Instead the child shares
// the table (CLONE_FILES) and its first act makes its own copy of the low part alone (CLOSE_RANGE_UNSHARE).
// For that, the descriptors it needs are first placed in "slots": a few of the daemon's lowest descriptor
// numbers, reserved at the first spawn as copies of /dev/null, which the spawn points at the real files for
// the duration of the clone and back at /dev/null afterwards. A set of slots serves one spawn at a time
// (several sets, for spawns from several threads); with none free, or before Linux 5.9, the plain path.

#define CS_SLOT_SETS 4
#define CS_SLOTS_PER_SET 6

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static int slot_state;            // 0: not tried yet, 1: reserved, -1: not used (reservation or unshare failed)
static int slot_null = -1;        // /dev/null, the slots' resting value
static int slot_fds[CS_SLOT_SETS][CS_SLOTS_PER_SET];
static int slot_busy[CS_SLOT_SETS];
static int slot_limit;            // 1 + the highest slot or slot_null: the child keeps the table below it

// Under slot_lock.
static int slots_reserve(void) {
    slot_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (slot_null < 0) return -1;
    int highest = slot_null;
    for (int set = 0; set < CS_SLOT_SETS; set++) {
        for (int i = 0; i < CS_SLOTS_PER_SET; i++) {
            int fd = fcntl(slot_null, F_DUPFD_CLOEXEC, 3);
            if (fd < 0) return -1; // the ones reserved so far stay, unused (a few copies of /dev/null)
            slot_fds[set][i] = fd;
            if (fd > highest) highest = fd;
        }
    }
    slot_limit = highest + 1;
    return 0;
}

// Valgrind aborts the process on a clone() with CLONE_FILES (docs/PLATFORM.md, "Spawning"), so under it, which
// its preload library in LD_PRELOAD announces, the slots are not used and a spawn copies the table.
static int under_valgrind(void) {
    const char *preload = getenv("LD_PRELOAD");
    return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

static int slot_set_acquire(void) {
    int set = -1;
    pthread_mutex_lock(&slot_lock);
    if (slot_state == 0) slot_state = !under_valgrind() && slots_reserve() == 0 ? 1 : -1;
    if (slot_state == 1) {
        for (int i = 0; i < CS_SLOT_SETS && set < 0; i++) {
            if (!slot_busy[i]) { slot_busy[i] = 1; set = i; }
        }
    }
    pthread_mutex_unlock(&slot_lock);
    return set;
}

// Points the first `used` slots of `set` back at /dev/null (dropping our extra reference to the files they
// held) and frees the set; with `disable`, no spawn uses slots from now on.
static void slot_set_release(int set, int used, int disable) {
    for (int i = 0; i < used; i++) {
        while (dup3(slot_null, slot_fds[set][i], O_CLOEXEC) < 0 && errno == EINTR) {}
    }
    pthread_mutex_lock(&slot_lock);
    slot_busy[set] = 0;
    if (disable) slot_state = -1;
    pthread_mutex_unlock(&slot_lock);
}

int cs_spawn_uses_slots(void) {
    pthread_mutex_lock(&slot_lock);
    int state = slot_state;
    pthread_mutex_unlock(&slot_lock);
    return state == 1;
}

// Moves `*fd` (when >= 0) into the next slot of `set`.
static int slot_place(int set, int *used, int *fd) {
    if (*fd < 0) return 0;
    int slot = slot_fds[set][*used];
    if (dup3(*fd, slot, O_CLOEXEC) < 0) return -1;
    (*used)++;
    *fd = slot;
    return 0;
}

// MARK: Spawn

static pid_t spawn_clone(struct spawn_args *a, void *stack_top, int extra_flags) {
#ifdef CS_THREAD_SANITIZER
    (void)stack_top;
    (void)extra_flags;
    return spawn_forked(a);
#else
    // CLONE_VFORK: we resume once the child has called execve or _exit.
    return clone(spawn_child, stack_top, CLONE_VM | CLONE_VFORK | extra_flags | SIGCHLD, a);
#endif
}

// cs_spawn, and with `hold_fd` (not -1) a held spawn's (cs_spawn_held): the child that reported its pid there is the
// caller's to reap, whatever became of it, and *out_pid is set even on failure (-1: there is no child).
static int spawn_run(const char *path, char *const argv[], char *const envp[], const char *cwd,
                     int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                     int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, int hold_fd,
                     pid_t *out_pid) {
    // clone(CLONE_VM | CLONE_VFORK) rather than vfork(): the child gets its own stack, so it cannot clobber
    // the frame of the parent it shares memory with.
    const size_t stack_size = 64 * 1024;
    void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return errno;

    sigset_t all, old;
    sigfillset(&all);
    if (raw_sigmask(&all, &old) < 0) {
        int e = errno;
        munmap(stack, stack_size);
        return e;
    }

    struct spawn_args a = {
        .path = path, .argv = argv, .envp = envp, .cwd = cwd,
        .has_ids = has_ids, .uid = uid, .gid = gid, .groups = groups, .ngroups = ngroups,
        .inherit_fd = inherit_fd, .output_fd = output_fd, .cgroup_fds = cgroup_procs_fds, .ncgroup_fds = ncgroup_fds,
        .error = 0, .report_fd = -1, .table_limit = 0, .keep = NULL, .nkeep = 0, .unshare_failed = 0,
        .hold_fd = hold_fd,
    };
    pid_t pid = -1;
    int err = 0;
    int slotted = 0;
#ifndef CS_THREAD_SANITIZER
    int slot_cgroup_fds[CS_SLOTS_PER_SET];
    int set = (2 + (hold_fd >= 0) + ncgroup_fds <= CS_SLOTS_PER_SET) ? slot_set_acquire() : -1;
    if (set >= 0) {
        int used = 0, ok = 1;
        ok = ok && slot_place(set, &used, &a.inherit_fd) == 0;
        ok = ok && slot_place(set, &used, &a.output_fd) == 0;
        ok = ok && slot_place(set, &used, &a.hold_fd) == 0;
        for (int i = 0; ok && i < ncgroup_fds; i++) {
            slot_cgroup_fds[i] = cgroup_procs_fds[i];
            ok = slot_place(set, &used, &slot_cgroup_fds[i]) == 0;
        }
        if (ok) {
            a.cgroup_fds = slot_cgroup_fds;
            a.table_limit = slot_limit;
            a.keep = slot_fds[set];
            a.nkeep = used;
            pid = spawn_clone(&a, (char *)stack + stack_size, CLONE_FILES);
            err = pid < 0 ? errno : a.error;
            slotted = !a.unshare_failed;
        }
        slot_set_release(set, used, ok && a.unshare_failed);
        if (!slotted && pid > 0) {
            // The child could not make its own table: it has _exit'ed without touching a descriptor.
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        }
        if (!slotted) {
            pid = -1;
            a.inherit_fd = inherit_fd;
            a.output_fd = output_fd;
            a.hold_fd = hold_fd;
            a.cgroup_fds = cgroup_procs_fds;
            a.table_limit = 0;
            a.keep = NULL;
            a.nkeep = 0;
            a.error = 0;
        }
    }
#endif
    if (!slotted) {
        pid = spawn_clone(&a, (char *)stack + stack_size, 0);
        err = pid < 0 ? errno : a.error;
    }
    if (pid > 0 && err != 0 && hold_fd < 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }

    raw_sigmask(&old, NULL);
    munmap(stack, stack_size);
    if (err == 0 || hold_fd >= 0) *out_pid = pid;
    return err;
}

int cs_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
             int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, pid_t *out_pid) {
    return spawn_run(path, argv, envp, cwd, has_ids, uid, gid, groups, ngroups, inherit_fd, cgroup_procs_fds,
                     ncgroup_fds, output_fd, -1, out_pid);
}

// MARK: Spawns on worker threads

// cs_spawn blocks its thread until the child has exec'd (CLONE_VFORK), and a child's set-up before execve
// (joining its cgroups, its own session, the signal dispositions, the exec itself) is most of a launch's cost. The
// daemon hands a launch of many apps to a few worker threads, so that those children run on every CPU while the
// event loop prepares the next apps. Each job owns copies of its strings; its descriptors stay the caller's, open
// until cs_spawn_finish.

struct cs_spawn_job {
    struct cs_spawn_job *next;
    char *path;
    char **argv;
    char **envp;
    char *cwd;
    int has_ids;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    int ngroups;
    int inherit_fd;
    int *cgroup_fds;
    int ncgroup_fds;
    int output_fd;
    int hold_fd; // a held spawn's (cs_spawn_held); -1 on the workers
    int done;
    int error;
    pid_t pid;
};

#define CS_POOL_MAX_THREADS 4

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER;
static struct cs_spawn_job *pool_head, *pool_tail;
static int pool_threads; // started so far; -1: none could be started (jobs run in cs_spawn_finish)

static void job_run(struct cs_spawn_job *job) {
    pid_t pid = 0;
    int error = cs_spawn(job->path, job->argv, job->envp, job->cwd, job->has_ids, job->uid, job->gid,
                         job->groups, job->ngroups, job->inherit_fd, job->cgroup_fds, job->ncgroup_fds,
                         job->output_fd, &pid);
    pthread_mutex_lock(&pool_lock);
    job->error = error;
    job->pid = error == 0 ? pid : 0;
    job->done = 1;
    pthread_cond_broadcast(&pool_done);
    pthread_mutex_unlock(&pool_lock);
}

static void *pool_worker(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&pool_lock);
        while (pool_head == NULL) pthread_cond_wait(&pool_work, &pool_lock);
        struct cs_spawn_job *job = pool_head;
        pool_head = job->next;
        if (pool_head == NULL) pool_tail = NULL;
        pthread_mutex_unlock(&pool_lock);
        job_run(job);
    }
    return NULL;
}

// Under pool_lock. Workers block every signal: the daemon takes its signals through a signalfd, from the
// thread that runs its loop.
static void pool_start(void) {
    if (pool_threads != 0) return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int wanted = cpus < 1 ? 1 : cpus > CS_POOL_MAX_THREADS ? CS_POOL_MAX_THREADS : (int)cpus;
    for (int i = 0; i < wanted; i++) {
        if (cs_start_detached_thread(pool_worker, NULL, 256 * 1024) != 0) break;
        pool_threads++;
    }
    if (pool_threads == 0) pool_threads = -1;
}

static char **copy_strv(char *const v[]) {
    size_t n = 0;
    while (v[n]) n++;
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(copy[i] = strdup(v[i]))) {
            for (size_t j = 0; j < i; j++) free(copy[j]);
            free(copy);
            return NULL;
        }
    }
    return copy;
}

static void free_strv(char **v) {
    if (!v) return;
    for (size_t i = 0; v[i]; i++) free(v[i]);
    free(v);
}

static void job_free(struct cs_spawn_job *job) {
    free(job->path);
    free_strv(job->argv);
    free_strv(job->envp);
    free(job->cwd);
    free(job->groups);
    free(job->cgroup_fds);
    free(job);
}

// Closes the descriptors a held spawn's job owns.
static void job_close_fds(struct cs_spawn_job *job) {
    if (job->inherit_fd >= 0) close(job->inherit_fd);
    if (job->output_fd >= 0) close(job->output_fd);
    if (job->hold_fd >= 0) close(job->hold_fd);
    for (int i = 0; i < job->ncgroup_fds; i++) {
        if (job->cgroup_fds[i] >= 0) close(job->cgroup_fds[i]);
    }
}

// A job with copies of the strings and the caller's descriptor numbers, or NULL with errno.
static struct cs_spawn_job *spawn_job_make(const char *path, char *const argv[], char *const envp[], const char *cwd,
                                                int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                                                int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds,
                                                int output_fd) {
    struct cs_spawn_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    job->path = strdup(path);
    job->argv = copy_strv(argv);
    job->envp = copy_strv(envp);
    job->cwd = cwd ? strdup(cwd) : NULL;
    job->groups = malloc(sizeof(gid_t) * (size_t)(ngroups > 0 ? ngroups : 1));
    job->cgroup_fds = malloc(sizeof(int) * (size_t)(ncgroup_fds > 0 ? ncgroup_fds : 1));
    if (!job->path || !job->argv || !job->envp || (cwd && !job->cwd) || !job->groups || !job->cgroup_fds) {
        job_free(job);
        errno = ENOMEM;
        return NULL;
    }
    if (ngroups > 0) memcpy(job->groups, groups, sizeof(gid_t) * (size_t)ngroups);
    if (ncgroup_fds > 0) memcpy(job->cgroup_fds, cgroup_procs_fds, sizeof(int) * (size_t)ncgroup_fds);
    job->has_ids = has_ids;
    job->uid = uid;
    job->gid = gid;
    job->ngroups = ngroups;
    job->inherit_fd = inherit_fd;
    job->ncgroup_fds = ncgroup_fds;
    job->output_fd = output_fd;
    job->hold_fd = -1;
    return job;
}

cs_spawn_job *cs_spawn_submit(const char *path, char *const argv[], char *const envp[], const char *cwd,
                              int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                              int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd) {
    struct cs_spawn_job *job = spawn_job_make(path, argv, envp, cwd, has_ids, uid, gid, groups, ngroups,
                                                   inherit_fd, cgroup_procs_fds, ncgroup_fds, output_fd);
    if (!job) return NULL;
    pthread_mutex_lock(&pool_lock);
    pool_start();
    if (pool_threads > 0) {
        if (pool_tail) pool_tail->next = job; else pool_head = job;
        pool_tail = job;
        pthread_cond_signal(&pool_work);
    }
    pthread_mutex_unlock(&pool_lock);
    return job;
}

int cs_spawn_finish(cs_spawn_job *job, pid_t *out_pid) {
    pthread_mutex_lock(&pool_lock);
    int queued = pool_threads > 0;
    if (queued) {
        while (!job->done) pthread_cond_wait(&pool_done, &pool_lock);
    }
    pthread_mutex_unlock(&pool_lock);
    if (!queued) job_run(job); // no worker could be started: the spawn runs here, as cs_spawn would
    int error = job->error;
    if (error == 0) *out_pid = job->pid;
    job_free(job);
    return error;
}


// MARK: Held spawns

// A held spawn's thread: it waits in clone() (CLONE_VFORK) for as long as the child is held, which is why a held
// spawn has a thread of its own rather than a worker: nothing else ever waits behind it. It owns copies of the
// descriptors (made by cs_spawn_held), so that the caller may close its own at any time.
static void *held_main(void *p) {
    struct cs_spawn_job *job = p;
    (void)cs_set_thread_name("held spawn");
    pid_t pid = -1;
    int error = spawn_run(job->path, job->argv, job->envp, job->cwd, job->has_ids, job->uid, job->gid, job->groups,
                          job->ngroups, job->inherit_fd, job->cgroup_fds, job->ncgroup_fds, job->output_fd,
                          job->hold_fd, &pid);
    if (error != 0 && pid <= 0) {
        // No child to say so: the report comes from here.
        struct cs_hold_report failed = { .pid = 0, .error = error };
        (void)send(job->hold_fd, &failed, sizeof failed, MSG_NOSIGNAL);
    }
    job_close_fds(job);
    job_free(job);
    return NULL;
}

int cs_spawn_held(const char *path, char *const argv[], char *const envp[], const char *cwd,
                  int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                  int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, int hold_fd) {
    struct cs_spawn_job *job = spawn_job_make(path, argv, envp, cwd, has_ids, uid, gid, groups, ngroups,
                                                   inherit_fd, cgroup_procs_fds, ncgroup_fds, output_fd);
    if (!job) return errno;
    job->inherit_fd = job->output_fd = job->hold_fd = -1;
    for (int i = 0; i < ncgroup_fds; i++) job->cgroup_fds[i] = -1;
    int ok = (inherit_fd < 0 || (job->inherit_fd = fcntl(inherit_fd, F_DUPFD_CLOEXEC, 3)) >= 0)
        && (output_fd < 0 || (job->output_fd = fcntl(output_fd, F_DUPFD_CLOEXEC, 3)) >= 0)
        && (job->hold_fd = fcntl(hold_fd, F_DUPFD_CLOEXEC, 3)) >= 0;
    for (int i = 0; ok && i < ncgroup_fds; i++) ok = (job->cgroup_fds[i] = fcntl(cgroup_procs_fds[i], F_DUPFD_CLOEXEC, 3)) >= 0;
    int error = ok ? cs_start_detached_thread(held_main, job, 256 * 1024) : errno;
    if (error != 0) {
        job_close_fds(job);
        job_free(job);
    }
    return error;
}

// MARK: - Descriptors and sockets

int cs_raise_nofile_limit(unsigned long long *before, unsigned long long *after) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -1;
    *before = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t soft = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) return -1;
        child_nofile_soft = soft;
    }
    *after = rl.rlim_cur;
    return 0;
}

int cs_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int cs_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int cs_rename_exchange(int dirfd, const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, dirfd, from, dirfd, to, RENAME_EXCHANGE);
}

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

long cs_process_madvise(int pidfd, const unsigned long *starts, const unsigned long *lengths, unsigned count, int advice) {
    struct iovec vec[64];
    if (count > 64) { errno = EINVAL; return -1; }
    for (unsigned i = 0; i < count; i++) {
        vec[i].iov_base = (void *)starts[i];
        vec[i].iov_len = lengths[i];
    }
    return syscall(SYS_process_madvise, pidfd, vec, (size_t)count, advice, 0U);
}

int cs_eventfd(int semaphore, int nonblocking) {
    return eventfd(0, EFD_CLOEXEC | (semaphore ? EFD_SEMAPHORE : 0) | (nonblocking ? EFD_NONBLOCK : 0));
}

int cs_start_detached_thread(void *(*run)(void *), void *argument, size_t stack_size) {
    // The new thread inherits the mask in force at its creation.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, stack_size);
    pthread_t thread;
    int error = pthread_create(&thread, &attributes, run, argument);
    pthread_attr_destroy(&attributes);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return error;
}

int cs_lower_thread_priority(void) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

int cs_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

int cs_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int cs_socketpair_cloexec(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
}

int cs_seqpacket_pair_cloexec(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
}

int cs_accept_cloexec_nonblock(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int cs_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int cs_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    if (flags & O_NONBLOCK) return 0;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// MARK: - Filesystems

int cs_statfs_magic(const char *path, unsigned long long *magic) {
    struct statfs st;
    if (statfs(path, &st) < 0) return -1;
    *magic = (unsigned long long)st.f_type;
    return 0;
}

static int has_magic(const char *path, unsigned long long expected) {
    unsigned long long magic;
    if (cs_statfs_magic(path, &magic) < 0) return -1;
    return magic == expected;
}

int cs_is_cgroup2(const char *path) { return has_magic(path, CGROUP2_SUPER_MAGIC); }
int cs_is_tmpfs(const char *path) { return has_magic(path, TMPFS_MAGIC); }

// MARK: - Signals and process attributes

int cs_block_signals(const int *signals, int n) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < n; i++) {
        if (sigaddset(&set, signals[i]) < 0) return errno;
    }
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int cs_set_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}
