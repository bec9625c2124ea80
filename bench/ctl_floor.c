// ctl_floor: the floor for a status query: connect to the control socket, send one request line,
// read one reply line, exit. What lifectl would cost if its start-up and JSON were free.
//   usage: ctl_floor SOCKET
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof(address.sun_path) - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *) &address, sizeof(address)) < 0) { perror("connect"); return 1; }
    const char *request = "{\"verb\":\"list\"}\n";
    if (write(fd, request, strlen(request)) < 0) return 1;
    char buffer[65536];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0)
        if (memchr(buffer, '\n', n)) return 0;
    return 1;
}
