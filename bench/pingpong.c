// pingpong: the floor of a lifecycle message: a raw AF_UNIX stream ping-pong between two processes, K round
// trips of a short line (the size of a lifecycle message), and prints the median, min and max of one message
// one way (half a round trip), in microseconds:
//   message  <median> <min> <max>
//   usage: pingpong K
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int k = argc > 1 ? atoi(argv[1]) : 10000;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) { perror("socketpair"); return 1; }
    static const char message[] = "{\"type\":\"didBecomeActive\",\"id\":12,\"deadlineMs\":5000}\n";
    static const char ack[] = "{\"type\":\"ack\",\"id\":12}\n";
    char buffer[256];
    pid_t child = fork();
    if (child == 0) {
        close(pair[0]);
        while (read(pair[1], buffer, sizeof buffer) > 0)
            if (write(pair[1], ack, sizeof ack - 1) < 0) return 1;
        return 0;
    }
    close(pair[1]);
    double *samples = calloc(k, sizeof(double));
    for (int i = 0; i < k; i++) {
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        if (write(pair[0], message, sizeof message - 1) < 0) return 1;
        if (read(pair[0], buffer, sizeof buffer) <= 0) return 1;
        clock_gettime(CLOCK_MONOTONIC, &end);
        samples[i] = ((end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3) / 2;
    }
    close(pair[0]);
    waitpid(child, NULL, 0);
    qsort(samples, k, sizeof(double), compare);
    printf("message  %9.2f %9.2f %9.2f\n", samples[k / 2], samples[0], samples[k - 1]);
    return 0;
}
