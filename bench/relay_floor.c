// relay_floor: the physical floor of lifecycled's two round trips with the same processes and messages, in C,
// without JSON, logs, priorities or a model: what is left is the kernel's socket and wake-up costs.
//
//   relay_floor [--pin CPU] [--work DIR] switch K
//       Four processes, as in an app switch through the daemon: this one (the controller), a relay (the daemon's
//       stand-in) and two clients. K times, alternating the target: the controller sends a request line; the relay
//       sends two lifecycle-sized lines to the app losing focus and two to the one gaining it, each waiting for its
//       ack line, then replies. 10 one-way messages per switch, as the daemon's (request, 4 callbacks, 4 acks, reply).
//   relay_floor [--pin CPU] [--work DIR] suspend K PID
//       Two processes: the controller sends a request, the relay kill()s PID's process group (SIGSTOP) and replies;
//       the controller waits for the reply and polls /proc until PID is in state T; then the same with SIGCONT.
//   --pin CPU   every process of the floor on that one CPU (sched_setaffinity before the forks, inherited), and in
//               suspend mode PID too (its own affinity is put back at the end). Without it the scheduler places
//               them: on a VM a wake-up across vCPUs can cost several times one on the same CPU, so the harness
//               measures both and takes the faster (bench/bench.py), as for the ping-pong floor.
//   --work DIR  the floor with the kernel work the daemon must do per transition, done the cheapest way:
//               each transition writes a 512-byte state file in DIR (as the daemon: written under NAME.json.tmp,
//               kept open, then swapped with NAME.json; DIR on tmpfs, as the daemon's runtime directory) and the oom_score_adj of the process
//               (each kernel file through a descriptor kept open: one pwrite); a foreground/background
//               change also writes the app's CPU weight (v1 cpu.shares, else cgroup2 cpu.weight) of a cgroup of
//               its own, made for the run under the cpu hierarchy (skipped, said on stderr, where none can be made).
//               switch: 4 transitions per switch (the losing app to inactive and background, the gaining one to
//               inactive and active), so 4 state files, 2 weights and 2 oom_score_adj, each written when the ack
//               that completes its transition comes in. suspend: oom_score_adj 900, SIGSTOP, /proc polled until T
//               (the confirmation), the reply, then the state file; resume: oom_score_adj 500, SIGCONT, the reply,
//               the state file. The CPU weight is not written on suspend/resume: a suspended app keeps its
//               background weight (a stopped process runs no code).
// Prints, in microseconds:
//   switch   <median> <min> <max>            or      suspend <median> <min> <max> / resume <median> <min> <max>
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void report(const char *label, double *samples, int k) {
    qsort(samples, k, sizeof(double), compare);
    printf("%-8s %9.0f %9.0f %9.0f\n", label, samples[k / 2], samples[0], samples[k - 1]);
}

/* One line each way is far below the socket buffer: one write, one read. */
static void put(int fd, const char *line) {
    size_t length = strlen(line);
    if (write(fd, line, length) != (ssize_t) length) exit(1);
}

/* Each read waits in poll() first, as bench/client.c and the daemon (epoll) do: a process blocked in read() on an
   AF_UNIX stream is woken for nothing when its peer reads what it sent (the "writable" wake-up reaches read()'s
   wait, which does not filter it), two extra context switches per ack here. Waiting in poll is the cheaper way,
   so the floor uses it. */
static void get(int fd, char *buffer, size_t size) {
    struct pollfd wait = {.fd = fd, .events = POLLIN};
    if (poll(&wait, 1, -1) < 0) exit(1);
    ssize_t n = read(fd, buffer, size - 1);
    if (n <= 0) exit(0);
    buffer[n] = 0;
}

static char state(pid_t pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int f = open(path, O_RDONLY);
    if (f < 0) return 0;
    ssize_t n = read(f, text, sizeof text - 1);
    close(f);
    if (n <= 0) return 0;
    text[n] = 0;
    char *paren = strrchr(text, ')');
    return paren && paren[1] ? paren[2] : 0;
}

/* --work: the state file of one app, written as the daemon writes its own: the whole content under NAME.json.tmp,
   through a descriptor kept open since the previous save, then the two names swapped (renameat2 with
   RENAME_EXCHANGE), so that a crash leaves either the old file or the new one under NAME.json. The first save of a
   name makes NAME.json.tmp and renames it over NAME.json. Names relative to the directory (opened once). */
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
static const char *workDir;
static int workDirFD = -1;
static char stateText[512];
static struct { char app[16]; int current, spare; } saved[4];

static void save_state(const char *app) {
    int slot = 0;
    while (slot < 3 && saved[slot].app[0] && strcmp(saved[slot].app, app) != 0) slot++;
    if (!saved[slot].app[0]) {
        snprintf(saved[slot].app, sizeof saved[slot].app, "%s", app);
        saved[slot].current = saved[slot].spare = -1;
    }
    char name[256], temporary[300];
    snprintf(name, sizeof name, "%s.json", app);
    snprintf(temporary, sizeof temporary, "%s.tmp", name);
    int f = saved[slot].spare;
    if (f < 0) f = openat(workDirFD, temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0 || pwrite(f, stateText, sizeof stateText, 0) != (ssize_t) sizeof stateText) { perror("relay_floor: state file"); exit(1); }
    if (saved[slot].current < 0) {
        if (renameat(workDirFD, temporary, workDirFD, name) != 0) { perror("relay_floor: rename"); exit(1); }
    } else if (syscall(SYS_renameat2, workDirFD, temporary, workDirFD, name, RENAME_EXCHANGE) != 0) {
        perror("relay_floor: exchange"); exit(1);
    }
    saved[slot].spare = saved[slot].current;
    saved[slot].current = f;
}

/* One small write to a kernel file, the cheapest way: through a descriptor kept open, one pwrite at offset 0
   (opened at the first write of each file). */
static struct { char path[160]; int fd; } kept[8];

static void write_file(const char *path, const char *text) {
    if (!path) return;
    int slot = 0;
    while (slot < 8 && kept[slot].path[0] && strcmp(kept[slot].path, path) != 0) slot++;
    if (slot == 8) slot = 0;  /* never more than 4 files here */
    if (strcmp(kept[slot].path, path) != 0) {
        int f = open(path, O_WRONLY | O_CLOEXEC);
        if (f < 0) return;  /* a process gone meanwhile */
        if (kept[slot].path[0]) close(kept[slot].fd);
        snprintf(kept[slot].path, sizeof kept[slot].path, "%s", path);
        kept[slot].fd = f;
    }
    if (pwrite(kept[slot].fd, text, strlen(text), 0) < 0) {}
}

static void set_oom(pid_t pid, const char *value) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/oom_score_adj", pid);
    write_file(path, value);
}

/* A cgroup of the run's own under the cpu hierarchy, with `pid` in it; its weight file (v1 cpu.shares, else cgroup2
   cpu.weight), or NULL where none can be made (not root, no cpu controller). The directory goes in `made`. */
static char *cpu_group(const char *name, pid_t pid, char *made, size_t size) {
    static const char *parents[][2] = {
        {"/sys/fs/cgroup/cpu", "cpu.shares"}, {"/sys/fs/cgroup/cpu,cpuacct", "cpu.shares"}, {"/sys/fs/cgroup", "cpu.weight"},
    };
    for (size_t i = 0; i < sizeof parents / sizeof parents[0]; i++) {
        char file[4096], procs[4096], pidText[32];
        snprintf(made, size, "%s/%s-%d", parents[i][0], name, getpid());
        if (mkdir(made, 0755) != 0) continue;
        snprintf(file, sizeof file, "%s/%s", made, parents[i][1]);
        snprintf(procs, sizeof procs, "%s/cgroup.procs", made);
        snprintf(pidText, sizeof pidText, "%d", pid);
        int f = open(procs, O_WRONLY);
        int moved = f >= 0 && write(f, pidText, strlen(pidText)) > 0;
        if (f >= 0) close(f);
        if (moved && access(file, W_OK) == 0) return strdup(file);
        rmdir(made);
    }
    made[0] = 0;
    return NULL;
}

static pid_t spawn_client(int fd) {
    pid_t pid = fork();
    if (pid == 0) {
        char buffer[256];
        for (;;) {
            get(fd, buffer, sizeof buffer);
            put(fd, "{\"type\":\"ack\",\"id\":12}\n");
        }
    }
    return pid;
}

int main(int argc, char **argv) {
    int pin = -1;
    while (argc > 2 && strncmp(argv[1], "--", 2) == 0) {
        if (strcmp(argv[1], "--pin") == 0) pin = atoi(argv[2]);
        else if (strcmp(argv[1], "--work") == 0) workDir = argv[2];
        else break;
        argv += 2;
        argc -= 2;
    }
    if (argc < 3) { fprintf(stderr, "usage: relay_floor [--pin CPU] [--work DIR] switch K | ... suspend K PID\n"); return 2; }
    if (workDir && (workDirFD = open(workDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) { perror(workDir); return 1; }
    int k = atoi(argv[2]);
    int suspendMode = strcmp(argv[1], "suspend") == 0;
    if (k < 1 || (suspendMode && argc != 4) || (!suspendMode && strcmp(argv[1], "switch") != 0)) return 2;
    int control[2], a[2], b[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, control) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, a) < 0
        || socketpair(AF_UNIX, SOCK_STREAM, 0, b) < 0) { perror("socketpair"); return 1; }
    pid_t children[3];
    int count = 0;
    pid_t target = suspendMode ? atoi(argv[3]) : 0;
    cpu_set_t targetMask;
    int targetPinned = 0;
    if (pin >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(pin, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) { perror("relay_floor: sched_setaffinity"); return 1; }
        if (suspendMode && sched_getaffinity(target, sizeof targetMask, &targetMask) == 0)
            targetPinned = sched_setaffinity(target, sizeof one, &one) == 0;
    }
    memset(stateText, ' ', sizeof stateText);
    memcpy(stateText, "{\"name\":\"app\",\"pid\":1,\"snapshot\":{\"state\":\"background\"}}", 52);
    stateText[sizeof stateText - 1] = '\n';
    if (!suspendMode) {
        children[count++] = spawn_client(a[1]);
        children[count++] = spawn_client(b[1]);
    }
    /* --work, switch: a weight file per client (in a cgroup of its own). */
    char groupA[4096] = "", groupB[4096] = "";
    char *weightA = NULL, *weightB = NULL;
    if (workDir && !suspendMode) {
        weightA = cpu_group("relay-floor-a", children[0], groupA, sizeof groupA);
        weightB = cpu_group("relay-floor-b", children[1], groupB, sizeof groupB);
        if (!weightA || !weightB) fprintf(stderr, "relay_floor: no cgroup with a CPU weight could be made; no weight written\n");
    }
    pid_t relay = fork();
    if (relay == 0) {
        char buffer[256];
        static const char *callbacks[] = {
            "{\"deadlineMs\":5000,\"id\":12,\"type\":\"willResignActive\"}\n",
            "{\"deadlineMs\":5000,\"id\":13,\"type\":\"didEnterBackground\"}\n",
            "{\"deadlineMs\":5000,\"id\":14,\"type\":\"willEnterForeground\"}\n",
            "{\"deadlineMs\":5000,\"id\":15,\"type\":\"didBecomeActive\"}\n",
        };
        pid_t group = suspendMode ? getpgid(target) : 0;
        pid_t signalled = group == target ? -group : target;
        for (;;) {
            get(control[1], buffer, sizeof buffer);
            if (suspendMode) {
                int stop = buffer[0] == 'S';
                if (workDir) set_oom(target, stop ? "900" : "500");
                kill(signalled, stop ? SIGSTOP : SIGCONT);
                /* Polled with sched_yield(): pinned to the target's CPU, a busy loop would keep it from running (and
                   so from stopping) until the scheduler's tick. */
                if (workDir && stop) while (state(target) != 'T' && state(target) != 't') sched_yield();
                put(control[1], "{\"ok\":true}\n");
                if (workDir) save_state("app");
                continue;
            }
            int toA = buffer[0] == 'A';
            int losing = toA ? b[0] : a[0], gaining = toA ? a[0] : b[0];
            pid_t losingPid = toA ? children[1] : children[0], gainingPid = toA ? children[0] : children[1];
            char *losingWeight = toA ? weightB : weightA, *gainingWeight = toA ? weightA : weightB;
            int v1 = weightA && strstr(weightA, "cpu.shares") != NULL;
            for (int i = 0; i < 4; i++) {
                int fd = i < 2 ? losing : gaining;
                put(fd, callbacks[i]);
                get(fd, buffer, sizeof buffer);
                if (!workDir) continue;
                /* The ack completes a transition: losing app inactive, then background (lower priority); gaining
                   app inactive (foreground priority), then active. Each is saved. */
                if (i == 1) { write_file(losingWeight, v1 ? "128" : "20"); set_oom(losingPid, "500"); }
                if (i == 2) { write_file(gainingWeight, v1 ? "1024" : "100"); set_oom(gainingPid, "0"); }
                save_state(i < 2 ? (toA ? "b" : "a") : (toA ? "a" : "b"));
            }
            put(control[1], "{\"apps\":[{\"name\":\"app1\",\"state\":\"active\"}],\"ok\":true}\n");
        }
    }
    children[count++] = relay;
    double *first = calloc(k, sizeof(double)), *second = calloc(k, sizeof(double));
    char buffer[256];
    for (int i = 0; i < k; i++) {
        if (suspendMode) {
            double start = now();
            put(control[0], "S\n");
            get(control[0], buffer, sizeof buffer);
            /* Pinned, the target shares this CPU: yield while polling, or a busy loop can keep it from running (and
               from stopping) until the scheduler's tick. */
            while (state(target) != 'T' && state(target) != 't') if (pin >= 0) sched_yield();
            double middle = now();
            put(control[0], "C\n");
            get(control[0], buffer, sizeof buffer);
            while (state(target) == 'T' || state(target) == 't') if (pin >= 0) sched_yield();
            first[i] = middle - start;
            second[i] = now() - middle;
        } else {
            double start = now();
            put(control[0], i % 2 ? "B\n" : "A\n");
            get(control[0], buffer, sizeof buffer);
            first[i] = now() - start;
        }
    }
    for (int i = 0; i < count; i++) kill(children[i], SIGKILL);
    for (int i = 0; i < count; i++) waitpid(children[i], NULL, 0);
    if (targetPinned) sched_setaffinity(target, sizeof targetMask, &targetMask);
    if (suspendMode && workDir) set_oom(target, "500");  /* as the daemon left it: in the background */
    for (char *group = groupA; group; group = group == groupA ? groupB : NULL)
        if (group[0]) rmdir(group);  /* its processes are reaped: empty */
    if (suspendMode) {
        report("suspend", first, k);
        report("resume", second, k);
    } else {
        report("switch", first, k);
    }
    return 0;
}
