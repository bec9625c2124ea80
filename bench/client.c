// client: the smallest lifecycled protocol client, for the benchmarks (bench/run.sh). It takes the socket
// LIFECYCLE_FD (default 3), says hello, and acks every message that has an "id", at once. When it acks
// didFinishLaunching it appends one byte to $BENCH_ACKS (if set), so that a launch of N clients can be
// timed until every one of them has acked. It exits on SIGTERM or when the daemon closes the socket.
//
// It waits for each message in poll(), then reads it, as a client with a run loop does (the Swift library's
// DispatchSource, GLib, Qt: epoll or poll). A client blocked in read() itself is woken for nothing each time the
// daemon reads one of its acks: freeing the ack's buffer wakes the socket's waiters for "writable", and read()'s
// wait, unlike poll's, does not look at what the wake-up is for (measured on one CPU: 3.9 context switches per
// client per app switch instead of 2.0, and the daemon preempted twice as often, about 10% of the switch).
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    const char *fdText = getenv("LIFECYCLE_FD");
    int fd = fdText ? atoi(fdText) : 3;
    const char *acks = getenv("BENCH_ACKS");
    static const char hello[] = "{\"type\":\"hello\",\"protocol\":1}\n";
    if (write(fd, hello, sizeof hello - 1) < 0) return 1;
    static char buffer[1 << 16];
    size_t used = 0;
    for (;;) {
        struct pollfd wait = {.fd = fd, .events = POLLIN};
        if (poll(&wait, 1, -1) < 0) return 1;
        ssize_t n = read(fd, buffer + used, sizeof buffer - used);
        if (n <= 0) { if (n == 0) pause(); return 0; }  /* closed: idle until SIGTERM, as clients do */
        used += (size_t) n;
        char *start = buffer, *end;
        while ((end = memchr(start, '\n', used - (size_t) (start - buffer)))) {
            *end = 0;
            char *id = strstr(start, "\"id\":");
            if (id) {
                long value = strtol(id + 5, NULL, 10);
                char ack[64];
                int length = snprintf(ack, sizeof ack, "{\"type\":\"ack\",\"id\":%ld}\n", value);
                if (write(fd, ack, (size_t) length) < 0) return 1;
                if (acks && strstr(start, "\"didFinishLaunching\"")) {
                    int out = open(acks, O_WRONLY | O_APPEND | O_CREAT, 0644);
                    if (out >= 0) { if (write(out, "x", 1) < 0) {} close(out); }
                }
            }
            start = end + 1;
        }
        used -= (size_t) (start - buffer);
        memmove(buffer, start, used);
        if (used == sizeof buffer) used = 0;  /* a line longer than the buffer: drop it */
    }
}
