// suspend_floor: time suspending and resuming one process until /proc shows it, K times, and print
//   suspend  <median> <min> <max>
//   resume   <median> <min> <max>      (microseconds)
// "Suspended" is PID and its children all in state T (t), "resumed" none of them. (Not its whole process
// group: runsv and s6-supervise may share the group of the service they run.)
// Without commands it is the floor: kill(PID, SIGSTOP) / kill(PID, SIGCONT) from this process (to the
// process group when PID leads its own group, as lifecycled's apps do). With
// commands, it runs STOP_COMMAND (posix_spawn, waited for) instead, then polls /proc: a supervisor's
// own suspend and resume (lifectl suspend, s6-svc -p, sv pause, supervisorctl signal STOP, ...).
// Each wait is bounded to 10 s (exit 1).
//   usage: suspend_floor K PID [STOP_COMMAND [ARGS...] + CONT_COMMAND [ARGS...]]
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* The fields of /proc/PID/stat after the command name (from the state letter on), in `buffer`; NULL if gone. */
static const char *statFields(pid_t pid, char *buffer, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    ssize_t n = read(fd, buffer, size - 1);
    close(fd);
    if (n <= 0) return NULL;
    buffer[n] = 0;
    char *paren = strrchr(buffer, ')');
    return paren && paren[1] ? paren + 2 : NULL;
}

/* The state letter of one process, 0 if gone. */
static char state(pid_t pid) {
    char buffer[512];
    const char *fields = statFields(pid, buffer, sizeof buffer);
    return fields ? fields[0] : 0;
}

static pid_t members[4096];
static int memberCount;

static pid_t parent(pid_t pid) {
    char buffer[512];
    const char *fields = statFields(pid, buffer, sizeof buffer);
    return fields ? atoi(fields + 2) : 0;
}

/* PID and its children: found once (they do not change while stopped and continued). */
static void findMembers(pid_t root) {
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    memberCount = 0;
    members[memberCount++] = root;
    while ((entry = readdir(proc)) && memberCount < 4096) {
        pid_t pid = atoi(entry->d_name);
        if (pid > 0 && parent(pid) == root) members[memberCount++] = pid;
    }
    closedir(proc);
}

static int allStopped(void) {
    for (int i = 0; i < memberCount; i++) { char s = state(members[i]); if (s != 'T' && s != 't') return 0; }
    return 1;
}

static int noneStopped(void) {
    for (int i = 0; i < memberCount; i++) { char s = state(members[i]); if (s == 'T' || s == 't') return 0; }
    return 1;
}

static void run(char **command) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    if (posix_spawnp(&pid, command[0], &actions, NULL, command, environ) != 0) { perror("spawn"); exit(1); }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "%s failed\n", command[0]); exit(1); }
}

static void await(int (*done)(void), const char *what) {
    double limit = now() + 10e6;
    while (!done()) {
        if (now() > limit) { fprintf(stderr, "suspend_floor: not %s after 10 s\n", what); exit(1); }
        sched_yield();
    }
}

static void report(const char *label, double *samples, int k) {
    qsort(samples, k, sizeof(double), compare);
    printf("%-8s %9.0f %9.0f %9.0f\n", label, samples[k / 2], samples[0], samples[k - 1]);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: suspend_floor K PID [STOP_COMMAND [ARGS...] + CONT_COMMAND [ARGS...]]\n"); return 2; }
    int k = atoi(argv[1]);
    pid_t pid = atoi(argv[2]);
    pid_t pgid = getpgid(pid);
    if (pgid < 0) { perror("getpgid"); return 1; }
    pid_t target = pgid == pid ? -pgid : pid;
    char **stopCommand = NULL, **contCommand = NULL;
    if (argc > 3) {
        stopCommand = argv + 3;
        for (int i = 3; i < argc; i++)
            if (strcmp(argv[i], "+") == 0) { argv[i] = NULL; contCommand = argv + i + 1; break; }
        if (!contCommand || !contCommand[0]) { fprintf(stderr, "suspend_floor: no CONT_COMMAND after +\n"); return 2; }
    }
    findMembers(pid);
    double *suspend = calloc(k, sizeof(double)), *resume = calloc(k, sizeof(double));
    for (int i = 0; i < k; i++) {
        double start = now();
        if (stopCommand) run(stopCommand); else kill(target, SIGSTOP);
        await(allStopped, "stopped");
        double middle = now();
        if (contCommand) run(contCommand); else kill(target, SIGCONT);
        await(noneStopped, "continued");
        double end = now();
        suspend[i] = middle - start;
        resume[i] = end - middle;
    }
    report("suspend", suspend, k);
    report("resume", resume, k);
    return 0;
}
