#define _GNU_SOURCE
// launchwait: time a supervisor's start until N processes run. Starts COMMAND (posix_spawn, in its own
// session, stdout/stderr to LOG), then polls until N processes whose /proc/PID/exe is EXE exist
// (or, with EXE = file:PATH, until PATH holds N bytes: N acks of the protocol client), and prints
//   <microseconds from the spawn until then> <pid of COMMAND>
// The supervisor keeps running; the caller stops it. Polls every 2 ms, gives up after TIMEOUT seconds (exit 1).
//   usage: launchwait EXE|file:PATH N TIMEOUT LOG COMMAND [ARGS...]
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int count(const char *exe) {
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    char path[300], target[4096];
    int n = 0;
    size_t length = strlen(exe);
    while ((entry = readdir(proc))) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/exe", entry->d_name);
        ssize_t r = readlink(path, target, sizeof target);
        if (r == (ssize_t) length && memcmp(target, exe, length) == 0) n++;
    }
    closedir(proc);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: launchwait EXE|file:PATH N TIMEOUT LOG COMMAND [ARGS...]\n"); return 2; }
    const char *exe = argv[1];
    int n = atoi(argv[2]);
    double timeout = atof(argv[3]) * 1e6;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
    double start = now();
    pid_t pid;
    if (posix_spawnp(&pid, argv[5], &actions, &attributes, argv + 5, environ) != 0) { perror("spawn"); return 1; }
    struct timespec pause = {0, 2000000};
    for (;;) {
        int have;
        if (strncmp(exe, "file:", 5) == 0) {
            struct stat s;
            have = stat(exe + 5, &s) == 0 ? (int) s.st_size : 0;
        } else {
            have = count(exe);
        }
        double elapsed = now() - start;
        if (have >= n) { printf("%.0f %d\n", elapsed, pid); return 0; }
        if (elapsed > timeout) { printf("-1 %d\n", pid); fprintf(stderr, "launchwait: %d of %d after %.0f s\n", have, n, elapsed / 1e6); return 1; }
        nanosleep(&pause, NULL);
    }
}
