#define _GNU_SOURCE
#include "csupport_socket.h"

#include <errno.h>
#include <stddef.h>
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

/* An abstract name: a NUL, then the name's bytes without a terminating NUL, which the address length bounds. */
static int fill_abstract_address(struct sockaddr_un *address, const char *name, socklen_t *size) {
    size_t length = strlen(name);
    if (length + 1 > sizeof(address->sun_path)) return -ENAMETOOLONG;
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path + 1, name, length);
    *size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + length);
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

static int connect_address(const struct sockaddr_un *address, socklen_t size, int flags) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0) return -errno;
    int r;
    while (connect(fd, (const struct sockaddr *) address, size) < 0) {
        if (errno == EINTR) continue;
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
    return connect_address(&address, sizeof(address), flags);
}

int cs_unix_connect_nonblocking(const char *path) { return unix_connect(path, SOCK_NONBLOCK); }

int cs_unix_connect_abstract_nonblocking(const char *name) {
    struct sockaddr_un address;
    socklen_t size;
    int r = fill_abstract_address(&address, name, &size);
    if (r < 0) return r;
    return connect_address(&address, size, SOCK_NONBLOCK);
}

int cs_unix_connect(const char *path) { return unix_connect(path, 0); }

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/sysmacros.h>

int cs_sock_diag_open(void) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    return fd < 0 ? -errno : fd;
}

int cs_unix_socket_diag(int diag_fd, unsigned int inode, unsigned int *peer,
                        unsigned long long *bound_device, unsigned long long *bound_inode) {
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof(message));
    message.header.nlmsg_len = sizeof(message);
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = ~0U;
    message.request.udiag_ino = inode;
    message.request.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_VFS;
    message.request.udiag_cookie[0] = ~0U;
    message.request.udiag_cookie[1] = ~0U;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    ssize_t sent;
    do {
        sent = sendto(diag_fd, &message, sizeof(message), 0, (struct sockaddr *) &kernel, sizeof(kernel));
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) return -errno;
    /* The kernel answers within the send: the reply is there to read, one message. */
    long buffer[1024];
    ssize_t received;
    do {
        received = recv(diag_fd, buffer, sizeof(buffer), 0);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return -errno;
    *peer = 0;
    *bound_device = 0;
    *bound_inode = 0;
    struct nlmsghdr *header = (struct nlmsghdr *) buffer;
    if (!NLMSG_OK(header, (size_t) received)) return -EBADMSG;
    if (header->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *error = NLMSG_DATA(header);
        return error->error < 0 ? error->error : -ENOENT;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) return -EBADMSG;
    struct unix_diag_msg *reply = NLMSG_DATA(header);
    if (reply->udiag_ino != inode) return -ENOENT;
    int length = (int) header->nlmsg_len - (int) NLMSG_LENGTH(sizeof(*reply));
    for (struct rtattr *attribute = (struct rtattr *) (reply + 1); RTA_OK(attribute, length);
         attribute = RTA_NEXT(attribute, length)) {
        if (attribute->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(attribute) >= sizeof(unsigned int)) {
            memcpy(peer, RTA_DATA(attribute), sizeof(unsigned int));
        } else if (attribute->rta_type == UNIX_DIAG_VFS && RTA_PAYLOAD(attribute) >= sizeof(struct unix_diag_vfs)) {
            struct unix_diag_vfs vfs;
            memcpy(&vfs, RTA_DATA(attribute), sizeof(vfs));
            /* The kernel's own device number (major << 20 | minor), turned into stat()'s. */
            *bound_device = makedev(vfs.udiag_vfs_dev >> 20, vfs.udiag_vfs_dev & 0xfffff);
            *bound_inode = vfs.udiag_vfs_ino;
        }
    }
    return 0;
}
