// line_floor: read stdin and count its lines. The floor of the notification benchmark: what it costs
// to move the posts' bytes through a pipe and find the line ends, with no JSON and no queues.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    static char buffer[1 << 16];
    long lines = 0;
    ssize_t n;
    while ((n = read(0, buffer, sizeof buffer)) > 0)
        for (char *p = buffer; (p = memchr(p, '\n', buffer + n - p)); p++) lines++;
    fprintf(stderr, "%ld lines\n", lines);
    return 0;
}
