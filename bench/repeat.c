// repeat: run a command N times (posix_spawn + waitpid, no shell) and print the median, min and max
// wall time of one run in microseconds. The floor for "how fast can a command-line tool answer".
//   usage: repeat N LABEL COMMAND [ARGS...]
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

extern char **environ;

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: repeat N LABEL COMMAND [ARGS...]\n"); return 2; }
    int n = atoi(argv[1]);
    double *samples = calloc(n, sizeof(double));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < n; i++) {
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        pid_t pid;
        if (posix_spawnp(&pid, argv[3], &actions, NULL, argv + 3, environ) != 0) { perror("spawn"); return 1; }
        int status;
        waitpid(pid, &status, 0);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "%s failed\n", argv[3]); return 1; }
        samples[i] = (end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3;
    }
    qsort(samples, n, sizeof(double), compare);
    printf("%-34s %9.0f %9.0f %9.0f\n", argv[2], samples[n / 2], samples[0], samples[n - 1]);
    return 0;
}
