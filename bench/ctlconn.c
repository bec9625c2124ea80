// ctlconn: the daemon's own share of control requests on ONE connection kept open (no process start-up,
// no connect/accept per request): what a long-lived controller (a UI, a shell, a test harness) pays, and
// the closest a client can get to the daemon's own work. Speaks the control protocol (one JSON request per
// line, one reply per line; docs/PROTOCOL.md, Sources/LifecycleProtocol/ControlMessages.swift).
//
//   ctlconn SOCKET K REQUEST [REQUEST...]
//       K times, each REQUEST in turn: write it, read its reply line. Prints the median, min and max of one
//       request (µs) and how many replies carried an "error":   <median> <min> <max> <errors>
//   ctlconn SOCKET K --suspend APP PID
//       K times: `suspend APP` until its reply has come AND every process of PID (it and its children) is in
//       state T in /proc; then `resume APP` until its reply has come and none is. Prints, in µs:
//         suspend        <median> <min> <max>     request → reply and stopped (what `lifectl suspend` waits for, and more)
//         resume         <median> <min> <max>
//         suspend-reply  <median> <min> <max>     request → reply alone
//         resume-reply   <median> <min> <max>
//         refused        <count>   requests the daemon refused (their pairs are left out; see docs/BENCHMARKS.md)
//   Every wait is bounded to 10 s (exit 1), or to CTLCONN_TIMEOUT seconds (under valgrind, say).
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

static int fd;
static char buffer[1 << 22];
static size_t used;  /* bytes after the last complete line */

static void send_line(const char *request) {
    char line[4096];
    int length = snprintf(line, sizeof line, "%s\n", request);
    if (write(fd, line, (size_t) length) != length) { perror("ctlconn: write"); exit(1); }
}

/* Whether a complete reply line is in, reading what is there (waiting at most `timeoutMs`). 1 if the
   line carried "error" is put in *error. The line is consumed. */
static int reply_ready(int timeoutMs, int *error) {
    for (;;) {
        char *end = memchr(buffer, '\n', used);
        if (end) {
            *end = 0;
            *error = strstr(buffer, "\"error\"") != NULL;
            size_t rest = used - (size_t) (end + 1 - buffer);
            memmove(buffer, end + 1, rest);
            used = rest;
            return 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeoutMs) <= 0) return 0;
        if (used == sizeof buffer) { fprintf(stderr, "ctlconn: reply too long\n"); exit(1); }
        ssize_t n = read(fd, buffer + used, sizeof buffer - used);
        if (n <= 0) { fprintf(stderr, "ctlconn: the daemon closed the connection\n"); exit(1); }
        used += (size_t) n;
    }
}

static pid_t members[1024];
static int memberCount;

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

/* PID and its children (from /proc/PID/task/PID/children), found once. */
static void find_members(pid_t pid) {
    members[memberCount++] = pid;
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    int f = open(path, O_RDONLY);
    if (f < 0) return;
    ssize_t n = read(f, text, sizeof text - 1);
    close(f);
    if (n <= 0) return;
    text[n] = 0;
    for (char *word = strtok(text, " \n"); word && memberCount < 1024; word = strtok(NULL, " \n"))
        members[memberCount++] = atoi(word);
}

static int all_stopped(void) {
    for (int i = 0; i < memberCount; i++) { char s = state(members[i]); if (s != 'T' && s != 't') return 0; }
    return 1;
}

static int none_stopped(void) {
    for (int i = 0; i < memberCount; i++) { char s = state(members[i]); if (s == 'T' || s == 't') return 0; }
    return 1;
}

static int refused;
static double limitSeconds = 10;

/* Sends `request`; returns the time until its reply (in *replyTime) and until `done()` holds as well, or -1
   when the daemon refused it (counted in `refused`, and the sample is left out). */
static double transition(const char *request, int (*done)(void), double *replyTime) {
    double start = now(), limit = start + limitSeconds * 1e6;
    send_line(request);
    int replied = 0, finished = 0, error = 0;
    *replyTime = 0;
    while (!(replied && finished)) {
        if (now() > limit) { fprintf(stderr, "ctlconn: no reply or no state change after %.0f s: %s\n", limitSeconds, request); exit(1); }
        if (!replied && reply_ready(0, &error)) {
            if (error) { refused++; return -1; }
            replied = 1;
            *replyTime = now() - start;
        }
        if (!finished) finished = done();
    }
    return now() - start;
}

static void report(const char *label, double *samples, int k) {
    qsort(samples, k, sizeof(double), compare);
    printf("%-14s %9.0f %9.0f %9.0f\n", label, samples[k / 2], samples[0], samples[k - 1]);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ctlconn SOCKET K REQUEST [REQUEST...] | ctlconn SOCKET K --suspend APP PID\n");
        return 2;
    }
    int k = atoi(argv[2]);
    if (k < 1) return 2;
    if (getenv("CTLCONN_TIMEOUT")) limitSeconds = atof(getenv("CTLCONN_TIMEOUT"));
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof(address.sun_path) - 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *) &address, sizeof(address)) < 0) { perror("ctlconn: connect"); return 1; }

    if (strcmp(argv[3], "--suspend") == 0) {
        if (argc != 6) { fprintf(stderr, "usage: ctlconn SOCKET K --suspend APP PID\n"); return 2; }
        char suspend[512], resume[512];
        snprintf(suspend, sizeof suspend, "{\"verb\":\"suspend\",\"app\":\"%s\"}", argv[4]);
        snprintf(resume, sizeof resume, "{\"verb\":\"resume\",\"app\":\"%s\"}", argv[4]);
        find_members(atoi(argv[5]));
        double *s = calloc(k, sizeof(double)), *r = calloc(k, sizeof(double));
        double *sr = calloc(k, sizeof(double)), *rr = calloc(k, sizeof(double));
        int n = 0;
        for (int i = 0; i < k * 2 && n < k; i++) {
            double suspendReply, resumeReply;
            double suspended = transition(suspend, all_stopped, &suspendReply);
            if (suspended < 0) continue;
            double resumed = transition(resume, none_stopped, &resumeReply);
            /* Refused: the daemon can take the late notice of its own earlier SIGCONT for someone else's and move
               the app to the background while it is stopping it again. The pair is left out (and counted); the
               next suspend puts the daemon and the process in step again. */
            if (resumed < 0) continue;
            s[n] = suspended; sr[n] = suspendReply; r[n] = resumed; rr[n] = resumeReply;
            n++;
        }
        if (n == 0) { fprintf(stderr, "ctlconn: every suspend/resume was refused\n"); return 1; }
        report("suspend", s, n);
        report("resume", r, n);
        report("suspend-reply", sr, n);
        report("resume-reply", rr, n);
        printf("refused        %9d\n", refused);
        return 0;
    }

    int requests = argc - 3, errors = 0, n = 0;
    double *samples = calloc((size_t) k * requests, sizeof(double));
    for (int i = 0; i < k; i++)
        for (int q = 0; q < requests; q++) {
            double start = now();
            send_line(argv[3 + q]);
            int error = 0;
            if (!reply_ready((int) (limitSeconds * 1000), &error)) { fprintf(stderr, "ctlconn: no reply within %.0f s: %s\n", limitSeconds, argv[3 + q]); return 1; }
            samples[n++] = now() - start;
            errors += error;
        }
    qsort(samples, n, sizeof(double), compare);
    printf("%.0f %.0f %.0f %d\n", samples[n / 2], samples[0], samples[n - 1], errors);
    return 0;
}
