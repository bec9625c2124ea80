// sleeper: the tiny program every supervisor runs in the benchmarks (bench/run.sh): it waits for a signal,
// whatever its arguments (s6 and runit start it as ./run through a symlink, with none). SIGTERM ends it.
#include <unistd.h>
int main(void) { for (;;) pause(); }
