// ctlbench: the daemon's own share of control requests, without any command's start-up: K times, for each
// REQUEST in turn, connect to the control socket, send the request line, read the reply line, close; prints
// the median, min and max of one request, in microseconds, and how many replies carried an "error":
//   <median> <min> <max> <errors>
//   usage: ctlbench SOCKET K REQUEST [REQUEST...]     e.g. '{"verb":"focus","app":"a"}'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: ctlbench SOCKET K REQUEST [REQUEST...]\n"); return 2; }
    int k = atoi(argv[2]), requests = argc - 3, errors = 0;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof(address.sun_path) - 1);
    double *samples = calloc((size_t) k * requests, sizeof(double));
    static char buffer[1 << 20];
    int s = 0;
    for (int i = 0; i < k; i++)
        for (int r = 0; r < requests; r++) {
            struct timespec start, end;
            clock_gettime(CLOCK_MONOTONIC, &start);
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *) &address, sizeof(address)) < 0) { perror("connect"); return 1; }
            char line[4096];
            int length = snprintf(line, sizeof line, "%s\n", argv[3 + r]);
            if (write(fd, line, (size_t) length) < 0) return 1;
            size_t used = 0;
            ssize_t n;
            int complete = 0;
            while ((n = read(fd, buffer + used, sizeof buffer - 1 - used)) > 0) {
                used += (size_t) n;
                if (memchr(buffer + used - n, '\n', (size_t) n) || used == sizeof buffer - 1) { complete = 1; break; }
            }
            close(fd);
            clock_gettime(CLOCK_MONOTONIC, &end);
            if (!complete) return 1;
            buffer[used] = 0;
            if (strstr(buffer, "\"error\"")) errors++;
            samples[s++] = (end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3;
        }
    qsort(samples, s, sizeof(double), compare);
    printf("%.0f %.0f %.0f %d\n", samples[s / 2], samples[0], samples[s - 1], errors);
    return 0;
}
