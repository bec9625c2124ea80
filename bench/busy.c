// busy: the app of bench/desktop-peers.sh, CPU-busy while the file GATE exists and asleep otherwise.
//   usage: busy GATE
// The harness removes the gate while a supervisor starts and stops the hidden apps: a hundred busy processes
// would otherwise keep the supervisor from running at all on a small machine, before it has stopped them. It is
// one process with no children, so that the app's processes are the terminal and this.
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: busy GATE\n"); return 2; }
    // SCHED_IDLE yields only to the processes of its own scheduling group. With autogroups (Linux's default
    // without systemd), a terminal's shell is a session and a group of its own, which competes at full weight
    // with the display server and the supervisor: the group is put at nice 19 too, where the kernel has them.
    int autogroup = open("/proc/self/autogroup", O_WRONLY);
    if (autogroup >= 0) {
        if (write(autogroup, "19", 2) != 2) perror("busy: /proc/self/autogroup");
        close(autogroup);
    }
    volatile unsigned long spin = 0;
    for (;;) {
        if (access(argv[1], F_OK) != 0) {
            usleep(100000);
            continue;
        }
        // Busy for 10 ms between looks at the gate.
        for (double until = now() + 0.01; now() < until;)
            for (int i = 0; i < 10000; i++) spin++;
    }
}
