/* The squeeze of the VM's memory checks (systemd/vm-squeeze.sh): allocates anonymous memory, STEP_MIB at a time, each
 * page written, until the PSI file PRESSURE says that tasks stall for memory; then it holds what it has and keeps
 * replacing its oldest piece with a new one, so that the stall goes on as long as it runs. When pressure goes away
 * (something freed memory), it allocates again. It never holds more than MAX_MIB.
 *
 *   vm-squeezer PRESSURE STEP_MIB MAX_MIB
 *
 * Prints one line when pressure first shows, and one per second: what it holds, and the stall of the last second.
 * Pressure is a stall of 10% or more in the last 200 ms (the growth of "some total"), read from the file itself,
 * so that it answers within one step rather than after avg10's ten seconds. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static unsigned long long stall_total(const char *path) {
        FILE *f = fopen(path, "re");
        if (!f) {
                perror("vm-squeezer: open the PSI file");
                exit(1);
        }
        char line[256];
        unsigned long long total = 0;
        while (fgets(line, sizeof line, f)) {
                char *t = strstr(line, "total=");
                if (strncmp(line, "some ", 5) == 0 && t) total = strtoull(t + 6, NULL, 10);
        }
        fclose(f);
        return total;
}

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *piece(size_t bytes) {
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        for (size_t i = 0; i < bytes; i += 4096) p[i] = (char)(i >> 12 | 1);
        return p;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: vm-squeezer PRESSURE STEP_MIB MAX_MIB\n");
                return 2;
        }
        const char *pressure = argv[1];
        size_t step = (size_t)strtoul(argv[2], NULL, 10) << 20;
        size_t most = strtoul(argv[3], NULL, 10) / strtoul(argv[2], NULL, 10);
        char **pieces = calloc(most ? most : 1, sizeof *pieces);
        size_t held = 0, oldest = 0;
        int pressed = 0, under = 0;
        setvbuf(stdout, NULL, _IOLBF, 0);

        unsigned long long window_stall = stall_total(pressure), second_stall = window_stall;
        double window = now(), second = window;
        for (;;) {
                double t = now();
                unsigned long long stall = stall_total(pressure);
                if (t - window >= 0.2) {
                        /* Microseconds of stall against the window's length. */
                        under = (double)(stall - window_stall) >= 0.1 * (t - window) * 1e6;
                        window = t;
                        window_stall = stall;
                }
                if (under && !pressed) {
                        printf("vm-squeezer: pressure at %zu MiB\n", held * (step >> 20));
                        pressed = 1;
                }
                if (!under && held < most) {
                        if (!(pieces[held] = piece(step))) {
                                perror("vm-squeezer: mmap");
                                return 1;
                        }
                        held++;
                } else if (held > 0) {
                        /* The oldest piece goes and a new one comes: new charges keep the slice at its limit. */
                        munmap(pieces[oldest], step);
                        if (!(pieces[oldest] = piece(step))) {
                                perror("vm-squeezer: mmap");
                                return 1;
                        }
                        oldest = (oldest + 1) % held;
                }
                if (t - second >= 1) {
                        printf("vm-squeezer: %zu MiB, stall %.0f ms in the last %.1f s\n", held * (step >> 20),
                               (stall - second_stall) / 1e3, t - second);
                        second = t;
                        second_stall = stall;
                }
                usleep(20000);
        }
}
