// What both floors do on a focus change: SIGCONT to the window's process and its descendants, read from each
// process's /proc/PID/task/PID/children, as cheaply as a supervisor can.
#ifndef BENCH_CONTINUE_TREE_H
#define BENCH_CONTINUE_TREE_H
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

static void continue_tree(long pid, int depth) {
    kill((pid_t)pid, SIGCONT);
    if (depth > 8) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE *file = fopen(path, "r");
    if (!file) return;
    long child;
    while (fscanf(file, "%ld", &child) == 1) continue_tree(child, depth + 1);
    fclose(file);
}

#endif
