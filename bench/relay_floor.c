// relay_floor: the physical floor of lifecycled's two round trips with the same processes and messages, in C,
// without JSON, logs, priorities or a model: what is left is the kernel's socket and wake-up costs.
//
//   relay_floor switch K
//       Four processes, as in an app switch through the daemon: this one (the controller), a relay (the daemon's
//       stand-in) and two clients. K times, alternating the target: the controller sends a request line; the relay
//       sends two lifecycle-sized lines to the app losing focus and two to the one gaining it, each waiting for its
//       ack line, then replies. 10 one-way messages per switch, as the daemon's (request, 4 callbacks, 4 acks, reply).
//   relay_floor suspend K PID
//       Two processes: the controller sends a request, the relay kill()s PID's process group (SIGSTOP) and replies;
//       the controller waits for the reply and polls /proc until PID is in state T; then the same with SIGCONT.
// Prints, in microseconds:
//   switch   <median> <min> <max>            or      suspend <median> <min> <max> / resume <median> <min> <max>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static void get(int fd, char *buffer, size_t size) {
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
    if (argc < 3) { fprintf(stderr, "usage: relay_floor switch K | relay_floor suspend K PID\n"); return 2; }
    int k = atoi(argv[2]);
    int suspendMode = strcmp(argv[1], "suspend") == 0;
    if (k < 1 || (suspendMode && argc != 4) || (!suspendMode && strcmp(argv[1], "switch") != 0)) return 2;
    int control[2], a[2], b[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, control) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, a) < 0
        || socketpair(AF_UNIX, SOCK_STREAM, 0, b) < 0) { perror("socketpair"); return 1; }
    pid_t children[3];
    int count = 0;
    pid_t target = suspendMode ? atoi(argv[3]) : 0;
    if (!suspendMode) {
        children[count++] = spawn_client(a[1]);
        children[count++] = spawn_client(b[1]);
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
                kill(signalled, buffer[0] == 'S' ? SIGSTOP : SIGCONT);
                put(control[1], "{\"ok\":true}\n");
                continue;
            }
            int losing = buffer[0] == 'A' ? b[0] : a[0], gaining = buffer[0] == 'A' ? a[0] : b[0];
            for (int i = 0; i < 4; i++) {
                int fd = i < 2 ? losing : gaining;
                put(fd, callbacks[i]);
                get(fd, buffer, sizeof buffer);
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
            while (state(target) != 'T' && state(target) != 't') {}
            double middle = now();
            put(control[0], "C\n");
            get(control[0], buffer, sizeof buffer);
            while (state(target) == 'T' || state(target) == 't') {}
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
    if (suspendMode) {
        report("suspend", first, k);
        report("resume", second, k);
    } else {
        report("switch", first, k);
    }
    return 0;
}
