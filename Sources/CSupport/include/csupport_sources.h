#pragma once
// The kernel interfaces behind lifecycled's notification sources (Sources/LifecycleDaemon/Sources):
// inotify, a CLOCK_REALTIME timerfd that is cancelled when the clock is set, and the kernel's uevent
// netlink socket. Swift's Glibc module has none of them.
// No _GNU_SOURCE here (see csupport.h); the numeric values below are the kernel ABI, and sources.c checks
// each against the system header at compile time.
// Unless said otherwise, functions return 0 (or a descriptor) on success, -1 with errno on failure.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// MARK: inotify

#define CS_IN_MODIFY      0x00000002u
#define CS_IN_ATTRIB      0x00000004u
#define CS_IN_CLOSE_WRITE 0x00000008u
#define CS_IN_MOVED_FROM  0x00000040u
#define CS_IN_MOVED_TO    0x00000080u
#define CS_IN_CREATE      0x00000100u
#define CS_IN_DELETE      0x00000200u
#define CS_IN_DELETE_SELF 0x00000400u
#define CS_IN_MOVE_SELF   0x00000800u
#define CS_IN_Q_OVERFLOW  0x00004000u
#define CS_IN_IGNORED     0x00008000u
#define CS_IN_ONLYDIR     0x01000000u
#define CS_IN_MASK_ADD    0x20000000u
#define CS_IN_ISDIR       0x40000000u

/// An inotify instance, non-blocking and close-on-exec.
int cs_inotify_open(void);
/// inotify_add_watch: the watch descriptor. The kernel gives one descriptor per inode and instance, so
/// adding a directory already watched returns its descriptor again (with CS_IN_MASK_ADD, masks add up).
int cs_inotify_add(int fd, const char *path, uint32_t mask);
int cs_inotify_remove(int fd, int wd);

/// getxattr(2) of a path (Glibc's Swift module leaves <sys/xattr.h> out): the value's length, or -errno.
long cs_getxattr(const char *path, const char *name, void *value, unsigned long size);
/// The size of struct inotify_event without its name (16); the name follows, NUL-padded to `len` bytes.
size_t cs_inotify_event_header_size(void);

// MARK: timerfd on CLOCK_REALTIME

/// A timerfd on CLOCK_REALTIME, non-blocking and close-on-exec.
int cs_realtime_timer_open(void);
/// Arms the timer at the absolute wall-clock time `seconds` since the epoch, with TFD_TIMER_CANCEL_ON_SET:
/// a later setting of the clock (clock_settime, settimeofday, a step by NTP, a resume from suspend) wakes it.
int cs_realtime_timer_arm(int fd, int64_t seconds);

#define CS_TIMER_NOTHING 0   /* nothing to read (EAGAIN) */
#define CS_TIMER_EXPIRED 1   /* the armed time was reached */
#define CS_TIMER_CLOCK_SET 2 /* the clock was set (read failed with ECANCELED); arm again */
/// Reads the timer once: CS_TIMER_NOTHING, CS_TIMER_EXPIRED or CS_TIMER_CLOCK_SET; -1 with errno otherwise.
int cs_realtime_timer_consume(int fd);

// MARK: kernel uevents

/// A NETLINK_KOBJECT_UEVENT socket bound to multicast group 1 (the kernel's own messages, not udev's),
/// non-blocking and close-on-exec. With a `subsystem`, the kernel itself drops every other subsystem's messages
/// (cs_uevent_filter), so that the machine's other devices never wake the reader; where the filter cannot be
/// attached, every message arrives, as without one.
int cs_uevent_open(const char *subsystem);
/// Attaches to `fd` a socket filter that passes a kernel uevent only when its SUBSYSTEM is `subsystem` (and, to be
/// safe, one whose header is too long for the filter to find the field). Returns 0, or -1 with errno.
int cs_uevent_filter(int fd, const char *subsystem);
/// Receives one datagram into `buffer`. Returns its length, 0 for a datagram that was dropped (not sent by the
/// kernel, or truncated), or -1 with errno (EAGAIN: none left; ENOBUFS: the socket overflowed and messages
/// were lost).
ssize_t cs_uevent_receive(int fd, char *buffer, size_t size);
