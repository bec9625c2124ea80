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
