#pragma once
#include <sys/types.h>

/* Unix stream sockets by path, close-on-exec. Return the fd, or -errno. */

/* Bind and listen on `path` (an existing socket file there is replaced). Non-blocking. */
int cs_unix_listen(const char *path, int backlog);

/* Connect to `path`. Blocking. */
int cs_unix_connect(const char *path);
/// The same without ever waiting: a listener whose backlog is full gives -EAGAIN at once. The socket stays
/// non-blocking.
int cs_unix_connect_nonblocking(const char *path);
/// The same for an abstract socket (Linux): `name` without its leading NUL, e.g. "/tmp/.X11-unix/X0" for
/// "@/tmp/.X11-unix/X0". Nothing on the file system guards an abstract name: any user may bind a free one.
int cs_unix_connect_abstract_nonblocking(const char *name);

/* The kernel's view of Unix sockets (NETLINK_SOCK_DIAG), to tell which process holds a connection to a server. */

/* A sock_diag netlink socket, close-on-exec, or -errno. */
int cs_sock_diag_open(void);

/* The Unix socket with inode `inode` in the netlink socket's network namespace: `*peer` is its peer's inode (0: not
   connected), `*bound_device`/`*bound_inode` the file it is bound to (both 0: not bound to a path; an accepted
   socket is bound to its listener's file), `*bound_device` in stat()'s encoding. Returns 0, or -errno (-ENOENT:
   no such socket). */
int cs_unix_socket_diag(int diag_fd, unsigned int inode, unsigned int *peer,
                        unsigned long long *bound_device, unsigned long long *bound_inode);
