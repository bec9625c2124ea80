// repeat: run a command N times (posix_spawn + waitpid, no shell) and print the median, min and max
// wall time of one run in microseconds. The floor for "how fast can a command-line tool answer".
// A lone "+" separates commands that make one run together, one after the other (a stop then a start).
//   usage: repeat N LABEL COMMAND [ARGS...] [+ COMMAND [ARGS...]]...
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    /* next[i]: the command after the one starting at argv[i], split at each "+" (NULL: the last one). */
    char ***next = calloc(argc + 1, sizeof(char **));
    for (int i = 3, first = 3; i <= argc; i++)
        if (i == argc || strcmp(argv[i], "+") == 0) {
            if (i < argc) { argv[i] = NULL; next[first] = argv + i + 1; first = i + 1; }
        }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < n; i++) {
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (char **command = argv + 3; command; command = next[command - argv]) {
            pid_t pid;
            if (posix_spawnp(&pid, command[0], &actions, NULL, command, environ) != 0) { perror("spawn"); return 1; }
            int status;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "%s failed\n", command[0]); return 1; }
        }
        clock_gettime(CLOCK_MONOTONIC, &end);
        samples[i] = (end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3;
    }
    qsort(samples, n, sizeof(double), compare);
    printf("%-34s %9.0f %9.0f %9.0f\n", argv[2], samples[n / 2], samples[0], samples[n - 1]);
    return 0;
}
