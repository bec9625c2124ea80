#define _GNU_SOURCE
#include "csupport_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int fill_address(struct sockaddr_un *address, const char *path) {
    size_t length = strlen(path);
    if (length >= sizeof(address->sun_path)) return -ENAMETOOLONG;
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path, path, length + 1);
    return 0;
}

int cs_unix_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    int r = fill_address(&address, path);
    if (r < 0) return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    (void) unlink(path);
    if (bind(fd, (struct sockaddr *) &address, sizeof(address)) < 0 || listen(fd, backlog) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

static int unix_connect(const char *path, int flags) {
    struct sockaddr_un address;
    int r = fill_address(&address, path);
    if (r < 0) return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0) return -errno;
    while (connect(fd, (struct sockaddr *) &address, sizeof(address)) < 0) {
        if (errno == EINTR) continue;
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int cs_unix_connect_nonblocking(const char *path) { return unix_connect(path, SOCK_NONBLOCK); }

int cs_unix_connect(const char *path) { return unix_connect(path, 0); }
