// _GNU_SOURCE only here, never in the header: see csupport.h.
#define _GNU_SOURCE
#include "csupport.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
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
};

// ThreadSanitizer intercepts clone() and handles every call as a fork: a CLONE_VM clone fails its
// internal check (tsan_rtl.cpp "((!thr->slot)) != (0)") and aborts the process. Its builds alone fork
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

// Runs in the child, on its own stack but in the parent's memory, until execve.
// Only async-signal-safe calls. The credential changes are raw syscalls on purpose: glibc's
// setuid/setgid/setgroups in a multithreaded process broadcast the change to every thread in
// its thread list, and that list is the parent's.
static int spawn_child(void *p) {
    struct spawn_args *a = p;

    if (setsid() < 0) goto fail;

    // execve resets caught signals but keeps ignored ones (SIG_IGN); reset all. SIGKILL, SIGSTOP
    // and glibc's internal signals refuse with EINVAL, which is fine.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < _NSIG; sig++) (void)sigaction(sig, &dfl, NULL);
    // Except SIGPIPE, ignored as systemd does for services (IgnoreSIGPIPE=yes): an app's output may be a
    // pipe to the daemon, and when the daemon dies (a crash, kill -9) the next write must fail with EPIPE,
    // not kill an app the next daemon is about to re-adopt.
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &ign, NULL);

    // Join the cgroups before execve, so the program never runs outside them.
    for (int i = 0; i < a->ncgroup_fds; i++) {
        if (write(a->cgroup_fds[i], "0", 1) != 1) goto fail;
    }

    // stdin is /dev/null, as systemd gives services (StandardInput=null): never the daemon's own stdin, which
    // may be a terminal or a pipe of whoever started it. The new descriptor takes the lowest free number, so it
    // is none of the descriptors placed below.
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) goto fail;
    if (null_fd != 0) {
        if (dup2(null_fd, 0) < 0) goto fail;
        close(null_fd);
    } else if (fcntl(0, F_SETFD, 0) < 0) {
        goto fail;
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
    // Everything else goes, but the report pipe of a forked spawn (close-on-exec: execve closes it).
    unsigned keep = a->report_fd >= first_to_close ? (unsigned)a->report_fd : ~0U;
    if (keep != ~0U && keep > (unsigned)first_to_close) (void)syscall(SYS_close_range, (unsigned)first_to_close, keep - 1, 0);
    if (syscall(SYS_close_range, keep == ~0U ? (unsigned)first_to_close : keep + 1, ~0U, 0) < 0) {
        struct rlimit rl;
        long max = (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) ? (long)rl.rlim_cur : 65536;
        for (long fd = first_to_close; fd < max; fd++) {
            if (fd != a->report_fd) (void)close((int)fd);
        }
    }

    if (a->cwd && chdir(a->cwd) < 0) goto fail;

    if (a->has_ids) {
        if (syscall(SYS_setgroups, (size_t)a->ngroups, a->groups) < 0) goto fail;
        if (syscall(SYS_setresgid, a->gid, a->gid, a->gid) < 0) goto fail;
        if (syscall(SYS_setresuid, a->uid, a->uid, a->uid) < 0) goto fail;
    }

    sigset_t empty;
    sigemptyset(&empty);
    if (raw_sigmask(&empty, NULL) < 0) goto fail;

    execve(a->path, a->argv, a->envp);
fail:
    a->error = errno ? errno : EINVAL;
    if (a->report_fd >= 0) {
        int e = a->error;
        (void)write(a->report_fd, &e, sizeof e);
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

int cs_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
             int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, pid_t *out_pid) {
    // clone(CLONE_VM | CLONE_VFORK) like glibc's posix_spawn, rather than vfork(): the child gets
    // its own stack, so it cannot clobber the frame of the parent it shares memory with.
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
        .error = 0, .report_fd = -1,
    };
#ifdef CS_THREAD_SANITIZER
    pid_t pid = spawn_forked(&a);
#else
    // CLONE_VFORK: we resume once the child has called execve or _exit.
    pid_t pid = clone(spawn_child, (char *)stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
#endif
    int err = pid < 0 ? errno : a.error;
    if (pid > 0 && err != 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }

    raw_sigmask(&old, NULL);
    munmap(stack, stack_size);
    if (err == 0) *out_pid = pid;
    return err;
}

// MARK: - Descriptors and sockets

int cs_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int cs_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int cs_socketpair_cloexec(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
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
