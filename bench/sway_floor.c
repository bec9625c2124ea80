// sway_floor: the least a follower of sway's IPC does to run a window's app again when it gets the focus. It
// subscribes to window events and, on each focus event, sends SIGCONT to the container's pid and its descendants
// (/proc/PID/task/PID/children). Nothing else: no stopping, no grace, no bookkeeping. bench/desktop-peers.sh times
// it against lifecycled (bench/desktop_switch.c).
//   usage: sway_floor SWAYSOCK      (runs until killed; prints "ready" once subscribed)
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "continue_tree.h"

static int read_all(int fd, void *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, (char *)buffer + done, count - done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static char *ipc_read(int fd) {
    char header[14];
    uint32_t length;
    if (read_all(fd, header, 14) < 0) return NULL;
    memcpy(&length, header + 6, 4);
    char *payload = malloc(length + 1);
    if (read_all(fd, payload, length) < 0) return NULL;
    payload[length] = 0;
    return payload;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: sway_floor SWAYSOCK\n"); return 2; }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) < 0) { perror(argv[1]); return 1; }
    const char *events = "[\"window\"]";
    uint32_t length = (uint32_t)strlen(events), type = 2;  // SUBSCRIBE
    char header[14];
    memcpy(header, "i3-ipc", 6);
    memcpy(header + 6, &length, 4);
    memcpy(header + 10, &type, 4);
    if (write(fd, header, 14) != 14 || write(fd, events, length) != (ssize_t)length) { perror("write"); return 1; }
    free(ipc_read(fd));
    printf("ready\n");
    fflush(stdout);
    for (char *event; (event = ipc_read(fd)); free(event)) {
        // {"change": "focus", "container": {… "pid": N, …}}: a view's container has no nodes, so the first pid
        // after "container" is its own.
        char *change = strstr(event, "\"change\"");
        char *container = strstr(event, "\"container\"");
        if (!change || !container || change > container || !strstr(change, "\"focus\"") || strstr(change, "\"focus\"") > container) continue;
        char *pid = strstr(container, "\"pid\"");
        if (pid) continue_tree(strtol(strchr(pid, ':') + 1, NULL, 10), 0);
    }
    return 0;
}
