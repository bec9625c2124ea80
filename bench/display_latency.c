// display_latency: how long from asking sway to focus a window of a stopped app until the app runs again.
//   usage: display_latency K SWAYSOCK CON_ID PID lifecycled [RECORD_FILE]
//          display_latency K SWAYSOCK CON_ID PID floor
// Each of the K rounds hides the window (moves it to workspace 9 and shows workspace 1), waits until PID is
// stopped (state T in /proc), then sends `[con_id=CON_ID] focus` over its own sway IPC connection and polls /proc
// until PID runs. "lifecycled": the daemon follows sway and does the stopping (BackgroundTimeSec=0) and the
// continuing; with RECORD_FILE (the Python client's LIFECYCLE_RECORD) it also waits for the round's
// didBecomeActive there and reports when the client received it. "floor": this program stops PID itself, and a
// child process of it, subscribed to sway's window events, sends SIGCONT on the focus event of CON_ID: the least
// any follower of sway's IPC can do. Prints
//   run     <median> <min> <max>      (microseconds from the focus request until PID runs)
//   active  <median> <min> <max>      (until the client received didBecomeActive; lifecycled with RECORD_FILE)
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int ipc_connect(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) < 0) { perror("connect"); exit(1); }
    return fd;
}

static int read_all(int fd, void *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, (char *)buffer + done, count - done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static void ipc_send(int fd, uint32_t type, const char *payload) {
    uint32_t length = (uint32_t)strlen(payload);
    char header[14];
    memcpy(header, "i3-ipc", 6);
    memcpy(header + 6, &length, 4);
    memcpy(header + 10, &type, 4);
    if (write(fd, header, 14) != 14 || write(fd, payload, length) != (ssize_t)length) { perror("write"); exit(1); }
}

/// The next message's payload (malloc'd, NUL-terminated) and type; NULL when the connection ends.
static char *ipc_read(int fd, uint32_t *type) {
    char header[14];
    uint32_t length;
    if (read_all(fd, header, 14) < 0) return NULL;
    memcpy(&length, header + 6, 4);
    memcpy(type, header + 10, 4);
    char *payload = malloc(length + 1);
    if (read_all(fd, payload, length) < 0) return NULL;
    payload[length] = 0;
    return payload;
}

/// A command and its reply (events are not subscribed on this connection).
static void command(int fd, const char *text) {
    uint32_t type;
    ipc_send(fd, 0, text);
    free(ipc_read(fd, &type));
}

static char state(pid_t pid) {
    char path[64], buffer[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) return 0;
    size_t n = fread(buffer, 1, sizeof buffer - 1, file);
    fclose(file);
    buffer[n] = 0;
    char *end = strrchr(buffer, ')');
    return end && end[1] == ' ' ? end[2] : 0;
}

static void wait_state(pid_t pid, int stopped) {
    double deadline = now_us() + 10e6;
    while ((state(pid) == 'T' || state(pid) == 't') != stopped) {
        if (now_us() > deadline) { fprintf(stderr, "display_latency: pid %d never %s\n", pid, stopped ? "stopped" : "ran"); exit(1); }
    }
}

/// The floor's follower: SIGCONT to PID on each focus event of CON_ID, and nothing else.
static void follower(const char *socket_path, long con, pid_t pid) {
    int fd = ipc_connect(socket_path);
    uint32_t type;
    ipc_send(fd, 2, "[\"window\"]");
    free(ipc_read(fd, &type));
    for (char *event; (event = ipc_read(fd, &type)); free(event)) {
        char *change = strstr(event, "\"change\"");
        char *container = strstr(event, "\"container\"");
        char *id = container ? strstr(container, "\"id\"") : NULL;
        if (!change || !id || !strstr(change, "\"focus\"") || strstr(change, "\"focus\"") > container) continue;
        if (strtol(strchr(id, ':') + 1, NULL, 10) == con) kill(pid, SIGCONT);
    }
    exit(0);
}

/// The time (us) of the first didBecomeActive in RECORD after `since`, waiting for it up to 10 s.
static double record_time(const char *record, double since) {
    double deadline = now_us() + 10e6;
    while (now_us() < deadline) {
        FILE *file = fopen(record, "r");
        char line[4096];
        while (file && fgets(line, sizeof line, file)) {
            char *t = strstr(line, "\"t\":");
            if (!strstr(line, "\"didBecomeActive\"") || !t) continue;
            double when = strtod(t + 4, NULL) / 1e3;
            if (when > since) { fclose(file); return when; }
        }
        if (file) fclose(file);
        usleep(1000);
    }
    fprintf(stderr, "display_latency: no didBecomeActive in %s\n", record);
    exit(1);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print(const char *label, double *values, int k) {
    qsort(values, (size_t)k, sizeof *values, compare);
    printf("%-7s %.1f %.1f %.1f\n", label, values[k / 2], values[0], values[k - 1]);
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: display_latency K SWAYSOCK CON_ID PID lifecycled|floor [RECORD_FILE]\n"); return 2; }
    int k = atoi(argv[1]);
    const char *socket_path = argv[2];
    long con = atol(argv[3]);
    pid_t pid = atoi(argv[4]);
    int floor_mode = strcmp(argv[5], "floor") == 0;
    const char *record = argc > 6 ? argv[6] : NULL;
    pid_t child = 0;
    if (floor_mode && (child = fork()) == 0) follower(socket_path, con, pid);
    if (floor_mode) usleep(200000);  // the follower subscribes before the first round
    int fd = ipc_connect(socket_path);
    char hide[128], focus[64];
    snprintf(hide, sizeof hide, "[con_id=%ld] move container to workspace 9; workspace 1", con);
    snprintf(focus, sizeof focus, "[con_id=%ld] focus", con);
    double *run = calloc((size_t)k, sizeof *run), *active = calloc((size_t)k, sizeof *active);
    for (int i = 0; i < k; i++) {
        if (floor_mode) kill(pid, SIGSTOP);
        command(fd, hide);
        wait_state(pid, 1);
        usleep(50000);  // the daemon's own work for the hide (didEnterBackground, the freeze) is done
        double start = now_us();
        ipc_send(fd, 0, focus);
        wait_state(pid, 0);
        run[i] = now_us() - start;
        uint32_t type;
        free(ipc_read(fd, &type));
        if (record) active[i] = record_time(record, start) - start;
    }
    print("run", run, k);
    if (record) print("active", active, k);
    if (child) {
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
    }
    return 0;
}
