// _GNU_SOURCE only here, never in the header: see csupport.h.
#define _GNU_SOURCE
#include "csupport_sources.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/xattr.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/netlink.h>

_Static_assert(CS_IN_MODIFY == IN_MODIFY, "IN_MODIFY");
_Static_assert(CS_IN_ATTRIB == IN_ATTRIB, "IN_ATTRIB");
_Static_assert(CS_IN_CLOSE_WRITE == IN_CLOSE_WRITE, "IN_CLOSE_WRITE");
_Static_assert(CS_IN_MOVED_FROM == IN_MOVED_FROM, "IN_MOVED_FROM");
_Static_assert(CS_IN_MOVED_TO == IN_MOVED_TO, "IN_MOVED_TO");
_Static_assert(CS_IN_CREATE == IN_CREATE, "IN_CREATE");
_Static_assert(CS_IN_DELETE == IN_DELETE, "IN_DELETE");
_Static_assert(CS_IN_DELETE_SELF == IN_DELETE_SELF, "IN_DELETE_SELF");
_Static_assert(CS_IN_MOVE_SELF == IN_MOVE_SELF, "IN_MOVE_SELF");
_Static_assert(CS_IN_Q_OVERFLOW == IN_Q_OVERFLOW, "IN_Q_OVERFLOW");
_Static_assert(CS_IN_IGNORED == IN_IGNORED, "IN_IGNORED");
_Static_assert(CS_IN_ONLYDIR == IN_ONLYDIR, "IN_ONLYDIR");
_Static_assert(CS_IN_MASK_ADD == IN_MASK_ADD, "IN_MASK_ADD");
_Static_assert(CS_IN_ISDIR == IN_ISDIR, "IN_ISDIR");
_Static_assert(sizeof(struct inotify_event) == 16, "struct inotify_event");

int cs_inotify_open(void) {
    return inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

int cs_inotify_add(int fd, const char *path, uint32_t mask) {
    return inotify_add_watch(fd, path, mask);
}

int cs_inotify_remove(int fd, int wd) {
    return inotify_rm_watch(fd, wd);
}

size_t cs_inotify_event_header_size(void) {
    return sizeof(struct inotify_event);
}

int cs_realtime_timer_open(void) {
    return timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
}

int cs_realtime_timer_arm(int fd, int64_t seconds) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof(spec));
    spec.it_value.tv_sec = (time_t) seconds;
    return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, NULL);
}

int cs_realtime_timer_consume(int fd) {
    uint64_t expirations;
    for (;;) {
        ssize_t n = read(fd, &expirations, sizeof(expirations));
        if (n == (ssize_t) sizeof(expirations)) return CS_TIMER_EXPIRED;
        if (n >= 0) {
            errno = EIO;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return CS_TIMER_NOTHING;
        if (errno == ECANCELED) return CS_TIMER_CLOCK_SET;
        return -1;
    }
}

// A kernel uevent is the header `ACTION@DEVPATH` and a NUL, then `ACTION=…`, `DEVPATH=…` and `SUBSYSTEM=…`, each
// ending in a NUL, in that order (lib/kobject_uevent.c). With the header's NUL at index i, ACTION and DEVPATH are
// i - 1 bytes together, so SUBSYSTEM= starts at 2i + 17. Classic BPF has no loops: the search for the NUL is
// unrolled over the first UEVENT_FILTER_SCAN bytes, and a message whose header is longer passes.
#define UEVENT_FILTER_SCAN 256

int cs_uevent_filter(int fd, const char *subsystem) {
    char wanted[96];
    int wanted_length = snprintf(wanted, sizeof(wanted), "SUBSYSTEM=%s", subsystem) + 1;  // its NUL included
    if (wanted_length > (int) sizeof(wanted)) {
        errno = EINVAL;
        return -1;
    }
    struct sock_filter program[4 * UEVENT_FILTER_SCAN + 2 * 96 + 8];
    unsigned length = 0;
    // Per byte: the NUL found at i puts the field's offset in X and jumps to the comparison.
    unsigned compare = 4 * UEVENT_FILTER_SCAN + 1;
    for (unsigned i = 0; i < UEVENT_FILTER_SCAN; i++) {
        program[length++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_B | BPF_ABS, i);
        program[length++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2);
        program[length++] = (struct sock_filter) BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 2 * i + 17);
        program[length] = (struct sock_filter) BPF_STMT(BPF_JMP | BPF_JA, compare - length - 1);
        length++;
    }
    program[length++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, 0xffffffff);
    // The comparison, four bytes at a time, then byte by byte; a load past the end drops the message.
    unsigned checks = 0;
    for (int at = 0; at < wanted_length; checks++) at += wanted_length - at >= 4 ? 4 : 1;
    unsigned reject = length + 2 * checks + 1;
    for (int at = 0; at < wanted_length;) {
        const unsigned char *bytes = (const unsigned char *) wanted + at;
        if (wanted_length - at >= 4) {
            uint32_t word = (uint32_t) bytes[0] << 24 | (uint32_t) bytes[1] << 16 | (uint32_t) bytes[2] << 8 | bytes[3];
            program[length++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_IND, (uint32_t) at);
            program[length] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, word, 0, (uint8_t) (reject - length - 1));
            length++;
            at += 4;
        } else {
            program[length++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_B | BPF_IND, (uint32_t) at);
            program[length] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, bytes[0], 0, (uint8_t) (reject - length - 1));
            length++;
            at += 1;
        }
    }
    program[length++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, 0xffffffff);
    program[length++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog filter = { .len = (unsigned short) length, .filter = program };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &filter, sizeof(filter));
}

int cs_uevent_open(const char *subsystem) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
    if (fd < 0) return -1;
    // Hotplug of many devices at once (a dock, a boot) sends bursts; a larger buffer makes an overflow rarer.
    // SO_RCVBUFFORCE needs CAP_NET_ADMIN; without it SO_RCVBUF is capped by net.core.rmem_max. Neither is fatal.
    int size = 1024 * 1024;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    struct sockaddr_nl address;
    memset(&address, 0, sizeof(address));
    address.nl_family = AF_NETLINK;
    address.nl_groups = 1;  // the kernel's messages; group 2 is udev's, in libudev's own format
    // Before the bind, so that no other subsystem's message is queued in between.
    if (subsystem) (void) cs_uevent_filter(fd, subsystem);
    if (bind(fd, (struct sockaddr *) &address, sizeof(address)) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

ssize_t cs_uevent_receive(int fd, char *buffer, size_t size) {
    struct sockaddr_nl sender;
    struct iovec iov = { .iov_base = buffer, .iov_len = size };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    memset(&sender, 0, sizeof(sender));
    message.msg_name = &sender;
    message.msg_namelen = sizeof(sender);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    for (;;) {
        ssize_t n = recvmsg(fd, &message, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        // Any process with CAP_NET_ADMIN may send to the group; only the kernel (port 0) is believed.
        if (sender.nl_pid != 0 || (message.msg_flags & MSG_TRUNC)) return 0;
        return n;
    }
}

long cs_getxattr(const char *path, const char *name, void *value, unsigned long size) {
    ssize_t count = getxattr(path, name, value, size);
    return count < 0 ? -errno : (long)count;
}
