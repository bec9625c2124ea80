#pragma once
// Plain wrappers over the Linux calls that Swift's Glibc module lacks (it is built without
// _GNU_SOURCE), and the spawn path, which must not run Swift code in the child.
// Do not define _GNU_SOURCE here: it changes fd_set and bind() and breaks the Swift build.
// Unless said otherwise, functions return 0 (or a descriptor) on success, -1 with errno on failure.

#include <sys/types.h>
// getxattr and setxattr (systemd marks a delegated cgroup with an extended attribute).
#include <sys/xattr.h>

/// Starts `path` in a new session and process group (pgid == sid == pid), with every signal
/// disposition at its default except SIGPIPE, ignored, and an empty signal mask.
/// - `cwd` may be NULL (stay in the caller's directory).
/// - `has_ids`: when nonzero, the child drops to `uid`/`gid` with `groups` as supplementary groups.
/// - `inherit_fd`: -1 for none, else it becomes fd 3 in the child. Every other fd above 2 is closed.
/// - `cgroup_procs_fds`: open cgroup.procs files (v2 and v1) the child joins before execve.
/// - stdin is always /dev/null.
/// - `output_fd`: -1 to inherit stdout and stderr, else it becomes both (a journal stream, or a pipe).
/// Returns 0 and sets *out_pid, or returns an errno value (the child that failed has been reaped).
/// The child shares the caller's descriptor table until it has made its own small copy (see "Descriptor slots"
/// in csupport.c): the first spawn reserves 25 low descriptors (copies of /dev/null) for that.
/// Thread-safe; spawns from several threads run side by side.
int cs_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
             int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, pid_t *out_pid);

/// cs_spawn on a worker thread (one per CPU, at most 4, started at the first submit), so that the children of many
/// launches set themselves up side by side. The job copies the strings; the descriptors must stay open until
/// cs_spawn_finish, which waits for the job, frees it, and returns as cs_spawn does. Every submitted job must be
/// finished exactly once. Returns NULL with errno (ENOMEM).
typedef struct cs_spawn_job cs_spawn_job;
cs_spawn_job *cs_spawn_submit(const char *path, char *const argv[], char *const envp[], const char *cwd,
                              int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                              int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd);
int cs_spawn_finish(cs_spawn_job *job, pid_t *out_pid);

/// What a held spawn's child (or, when there is no child, its thread) sends on the hold socket: its pid with error 0
/// once it is set up and waits; else the errno of its failure (pid 0: no child was made).
struct cs_hold_report {
    int pid;
    int error;
};
/// The exit status of a held child whose hold socket closed without a release.
#define CS_HOLD_DROPPED_STATUS 126

/// cs_spawn, held before execve: the child does all its set-up, sends a cs_hold_report with its pid on `hold_fd` (its
/// end of a SOCK_SEQPACKET socketpair, close-on-exec) and waits there until one byte comes (then it execs) or the
/// other end closes (then it exits with CS_HOLD_DROPPED_STATUS). A failure is a report too, from the child (then it
/// exits with 127) or, when no child was made, from the spawn's thread. The child is the caller's to reap in every
/// case. Runs on a thread of its own, with copies of the descriptors: the caller may close its own on return.
/// Returns 0, or an errno value when the spawn could not be started (nothing was reported then).
int cs_spawn_held(const char *path, char *const argv[], char *const envp[], const char *cwd,
                  int has_ids, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                  int inherit_fd, const int *cgroup_procs_fds, int ncgroup_fds, int output_fd, int hold_fd);

/// socketpair(AF_UNIX, SOCK_SEQPACKET), close-on-exec.
int cs_seqpacket_pair_cloexec(int fds[2]);

/// 1 when spawns use descriptor slots (after a first spawn, on Linux 5.9+), else 0.
int cs_spawn_uses_slots(void);

/// Raises the soft RLIMIT_NOFILE to the hard one (a daemon holds two descriptors per running app; systemd gives
/// services 1024:524288 and expects them to raise it themselves). Children spawned afterwards get the soft limit
/// back. *before and *after: the soft limit before and after.
int cs_raise_nofile_limit(unsigned long long *before, unsigned long long *after);

int cs_pidfd_open(pid_t pid);

/// renameat2(2) with RENAME_EXCHANGE: `from` and `to` (both relative to `dirfd`) trade places in one step, both
/// names staying. EINVAL where the file system cannot, ENOSYS on a kernel before 3.15.
int cs_rename_exchange(int dirfd, const char *from, const char *to);

/// process_madvise(2) over `count` ranges (`starts[i]`, `lengths[i]`) of the process behind `pidfd`, with `advice`
/// (MADV_PAGEOUT: 21). Returns the bytes advised, or -1 with errno (ENOSYS: a kernel before 5.10).
long cs_process_madvise(int pidfd, const unsigned long *starts, const unsigned long *lengths, unsigned count, int advice);

/// eventfd(2), close-on-exec: in semaphore mode when `semaphore` is nonzero (each read takes one), nonblocking when
/// `nonblocking` is.
int cs_eventfd(int semaphore, int nonblocking);

/// Starts a detached thread running `run(argument)` with a stack of `stack_size` bytes and every signal blocked
/// (the daemon takes its signals through a signalfd on the loop's thread). Returns 0 or pthread_create's error.
int cs_start_detached_thread(void *(*run)(void *), void *argument, size_t stack_size);

/// Gives the calling thread alone the least share of the CPU: nice 19 through setpriority on its thread id (Linux
/// keeps the nice value per thread).
int cs_lower_thread_priority(void);

/// Names the calling thread (prctl PR_SET_NAME, at most 15 bytes kept): ps, top and /proc/PID/task/TID/comm show it.
int cs_set_thread_name(const char *name);

// mallopt(M_MMAP_THRESHOLD, bytes): <malloc.h> is not in Swift's Glibc module. Returns mallopt's result (1 on success).
int cs_set_mmap_threshold(int bytes);
int cs_pipe_cloexec(int fds[2]);
int cs_socketpair_cloexec(int fds[2]);
int cs_accept_cloexec_nonblock(int fd);
int cs_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
int cs_set_nonblocking(int fd);

/// The f_type of statfs(path) in *magic.
int cs_statfs_magic(const char *path, unsigned long long *magic);
/// 1 if `path` is on a cgroup2 (resp. tmpfs) filesystem, 0 if not, -1 with errno.
int cs_is_cgroup2(const char *path);
int cs_is_tmpfs(const char *path);
extern const unsigned long long cs_cgroup2_magic;
extern const unsigned long long cs_cgroup1_magic;
extern const unsigned long long cs_tmpfs_magic;

/// Adds `signals` to the calling thread's mask. Returns 0 or an errno value.
int cs_block_signals(const int *signals, int n);
int cs_set_child_subreaper(void);
