/* The object: environment, connection, reading and writing, reconnection. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { WATCH_TIMER = 1, WATCH_SOCKET = 2 };

uint64_t lc_now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

void lc_log(lifecycle *l, const char *format, ...) {
        char text[512];
        va_list args;
        va_start(args, format);
        vsnprintf(text, sizeof text, format, args);
        va_end(args);
        if (l->callbacks.log) l->callbacks.log(l, text, l->userdata);
        else if (l->debug) fprintf(stderr, "lifecycle: %s\n", text);
}

void lc_notify_connection(lifecycle *l, lifecycle_connection_event event) {
        if (l->callbacks.connection) l->callbacks.connection(l, event, l->userdata);
}

int lc_arm_timer(lifecycle *l, uint64_t delay_usec) {
        if (delay_usec == 0) delay_usec = 1; /* zero would disarm it */
        struct itimerspec spec = { .it_value = { (time_t)(delay_usec / 1000000ULL), (long)(delay_usec % 1000000ULL) * 1000L } };
        return timerfd_settime(l->timer_fd, 0, &spec, NULL) < 0 ? -errno : 0;
}

static int watch_socket(lifecycle *l, bool out) {
        struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u32 = WATCH_SOCKET };
        if (epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, l->sock, &ev) < 0) return -errno;
        l->out_watched = out;
        return 0;
}

static int adopt_socket(lifecycle *l, int fd) {
        /* Whatever mode the daemon left it in: the library never blocks on it. */
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return -errno;
        int fdflags = fcntl(fd, F_GETFD);
        if (fdflags < 0 || fcntl(fd, F_SETFD, fdflags | FD_CLOEXEC) < 0) return -errno;
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = WATCH_SOCKET };
        if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) return -errno;
        l->sock = fd;
        l->out_watched = false;
        l->generation++;
        lc_buffer_consume(&l->in, l->in.length);
        lc_buffer_consume(&l->out, l->out.length);
        return 0;
}

static void drop_socket(lifecycle *l) {
        if (l->sock < 0) return;
        epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, l->sock, NULL);
        close(l->sock);
        l->sock = -1;
        l->connected = false;
        /* What the old connection left unread or unsent means nothing to the next one. */
        lc_buffer_consume(&l->in, l->in.length);
        lc_buffer_consume(&l->out, l->out.length);
}

static int new_object(lifecycle **ret) {
        if (!ret) return -EINVAL;
        lifecycle *l = calloc(1, sizeof *l);
        if (!l) return -ENOMEM;
        l->sock = -1;
        l->state = LIFECYCLE_STATE_INACTIVE;
        l->remaining_ms = UINT64_MAX;
        l->next_task = 1;
        /* A library writes to the program's stderr only when asked: the program may use it for its own output. */
        const char *debug = getenv("LIFECYCLE_DEBUG");
        l->debug = debug && strcmp(debug, "1") == 0;
        l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        l->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = WATCH_TIMER };
        if (l->epoll_fd < 0 || l->timer_fd < 0 || epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->timer_fd, &ev) < 0) {
                int r = -errno;
                lifecycle_unref(l);
                return r;
        }
        *ret = l;
        return 0;
}

int lifecycle_new_standalone(lifecycle **ret) {
        int r = new_object(ret);
        if (r == 0) (*ret)->standalone = true;
        return r;
}

int lifecycle_new_from_fd(lifecycle **ret, int fd, const char *app) {
        if (fd < 0) return -EBADF;
        lifecycle *l;
        int r = new_object(&l);
        if (r < 0) return r;
        if (app && !(l->app = strdup(app))) r = -ENOMEM;
        if (r == 0) r = adopt_socket(l, fd);
        if (r < 0) {
                lifecycle_unref(l);
                return r;
        }
        *ret = l;
        return 0;
}

int lifecycle_new_from_environment(lifecycle **ret) {
        if (!ret) return -EINVAL;
        /* Taken out of the environment first, so that nothing the app starts later believes it is the app. */
        const char *fd_text = getenv("LIFECYCLE_FD"), *app_text = getenv("LIFECYCLE_APP"), *path_text = getenv("LIFECYCLE_SOCKET");
        const char *token_text = getenv("LIFECYCLE_TOKEN");
        char *fd_copy = fd_text ? strdup(fd_text) : NULL, *app = app_text ? strdup(app_text) : NULL;
        char *path = path_text && *path_text ? strdup(path_text) : NULL;
        char *token = token_text && *token_text ? strdup(token_text) : NULL;
        unsetenv("LIFECYCLE_FD");
        unsetenv("LIFECYCLE_APP");
        unsetenv("LIFECYCLE_SOCKET");
        unsetenv("LIFECYCLE_TOKEN");
        int r;
        if (!fd_copy) {
                r = lifecycle_new_standalone(ret);
                if (r == 0) { (*ret)->app = app; app = NULL; }
        } else {
                char *end;
                errno = 0;
                long fd = strtol(fd_copy, &end, 10);
                if (errno || end == fd_copy || *end || fd < 0 || fd > 0x7fffffff) r = -EBADF;
                else r = lifecycle_new_from_fd(ret, (int)fd, app);
                /* Known from the start, the token lets a client whose inherited connection died before its first
                 * hello connect again. */
                if (r == 0) { (*ret)->socket_path = path; path = NULL; (*ret)->token = token; token = NULL; }
        }
        free(fd_copy);
        free(app);
        free(path);
        if (token) explicit_bzero(token, strlen(token));
        free(token);
        return r;
}

lifecycle *lifecycle_unref(lifecycle *l) {
        if (!l) return NULL;
        drop_socket(l);
        if (l->epoll_fd >= 0) close(l->epoll_fd);
        if (l->timer_fd >= 0) close(l->timer_fd);
        free(l->app);
        free(l->socket_path);
        if (l->token) explicit_bzero(l->token, strlen(l->token));
        free(l->token);
        for (size_t i = 0; l->observe && l->observe[i]; i++) free(l->observe[i]);
        free(l->observe);
        lc_buffer_free(&l->in);
        lc_buffer_free(&l->out);
        free(l->tasks);
        free(l);
        return NULL;
}

int lifecycle_set_callbacks(lifecycle *l, const lifecycle_callbacks *callbacks, size_t size, void *userdata) {
        if (!l || (size && !callbacks)) return -EINVAL;
        memset(&l->callbacks, 0, sizeof l->callbacks);
        memcpy(&l->callbacks, callbacks, size < sizeof l->callbacks ? size : sizeof l->callbacks);
        l->userdata = userdata;
        return 0;
}

static int append_observe(lifecycle *l, lc_buffer *b) {
        int r = lc_buffer_append_string(b, "[");
        for (size_t i = 0; r == 0 && l->observe && l->observe[i]; i++) {
                if (i) r = lc_buffer_append_string(b, ",");
                if (r == 0) r = lc_buffer_append_json_string(b, l->observe[i]);
        }
        return r < 0 ? r : lc_buffer_append_string(b, "]");
}

int lifecycle_observe(lifecycle *l, const char *const *names) {
        if (!l) return -EINVAL;
        size_t count = 0;
        while (names && names[count]) count++;
        char **copy = calloc(count + 1, sizeof *copy);
        if (!copy) return -ENOMEM;
        for (size_t i = 0; i < count; i++)
                if (!(copy[i] = strdup(names[i]))) {
                        for (size_t k = 0; k < i; k++) free(copy[k]);
                        free(copy);
                        return -ENOMEM;
                }
        for (size_t i = 0; l->observe && l->observe[i]; i++) free(l->observe[i]);
        free(l->observe);
        l->observe = copy;
        if (!l->started || l->standalone || l->sock < 0) return 0;
        lc_buffer line = { 0 };
        int r = lc_buffer_append_string(&line, "{\"type\":\"observe\",\"names\":");
        if (r == 0) r = append_observe(l, &line);
        if (r == 0) r = lc_buffer_append_string(&line, "}");
        if (r == 0) r = lc_send_line(l, &line);
        lc_buffer_free(&line);
        return r;
}

static int send_hello(lifecycle *l) {
        lc_buffer line = { 0 };
        int r = lc_buffer_append_string(&line, "{\"type\":\"hello\",\"protocol\":1");
        /* The inherited connection is the app's already; only a reconnection names the app and proves it. */
        if (r == 0 && l->token && l->generation > 1) {
                r = lc_buffer_append_string(&line, ",\"app\":");
                if (r == 0) r = lc_buffer_append_json_string(&line, l->app ? l->app : "");
                if (r == 0) r = lc_buffer_append_string(&line, ",\"token\":");
                if (r == 0) r = lc_buffer_append_json_string(&line, l->token);
        }
        if (r == 0 && l->observe && l->observe[0]) {
                r = lc_buffer_append_string(&line, ",\"observe\":");
                if (r == 0) r = append_observe(l, &line);
        }
        if (r == 0) r = lc_buffer_append_string(&line, "}");
        if (r == 0) r = lc_send_line(l, &line);
        if (line.data) explicit_bzero(line.data, line.length);
        lc_buffer_free(&line);
        return r;
}

int lifecycle_start(lifecycle *l) {
        if (!l) return -EINVAL;
        if (l->started) return -EALREADY;
        l->started = true;
        if (l->standalone) return lc_arm_timer(l, 0);
        return send_hello(l);
}

int lifecycle_get_fd(lifecycle *l) { return l ? l->epoll_fd : -EINVAL; }

static int flush_some(lifecycle *l) {
        while (l->sock >= 0 && l->out.length > 0) {
                ssize_t n = send(l->sock, l->out.data, l->out.length, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) { lc_buffer_consume(&l->out, (size_t)n); continue; }
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return l->out_watched ? 0 : watch_socket(l, true);
                lc_connection_lost(l, "lost the connection to lifecycled", false);
                return 0;
        }
        if (l->sock >= 0 && l->out_watched) return watch_socket(l, false);
        return 0;
}

int lc_send_line(lifecycle *l, lc_buffer *line) {
        if (l->standalone) return 0;
        if (l->sock < 0) return -ENOTCONN;
        if (line->length > LIFECYCLE_LINE_MAX) return -EMSGSIZE;
        if (l->out.length + line->length > OUTPUT_MAX) return -ENOBUFS;
        int r = lc_buffer_append(&l->out, line->data, line->length);
        if (r == 0) r = lc_buffer_append(&l->out, "\n", 1);
        if (r < 0) return r;
        return flush_some(l);
}

int lifecycle_flush(lifecycle *l, uint64_t timeout_usec) {
        if (!l) return -EINVAL;
        uint64_t deadline = timeout_usec == UINT64_MAX ? UINT64_MAX : lc_now_usec() + timeout_usec;
        while (l->sock >= 0 && l->out.length > 0) {
                int r = flush_some(l);
                if (r < 0) return r;
                if (l->sock < 0 || l->out.length == 0) break;
                uint64_t now = lc_now_usec();
                if (now >= deadline) return -ETIMEDOUT;
                struct pollfd p = { l->sock, POLLOUT, 0 };
                int wait_ms = deadline == UINT64_MAX ? -1 : (int)((deadline - now + 999) / 1000);
                if (poll(&p, 1, wait_ms) < 0 && errno != EINTR) return -errno;
        }
        return l->out.length == 0 ? 0 : -ENOTCONN;
}

void lc_connection_lost(lifecycle *l, const char *why, bool after_error) {
        bool was_welcomed = l->connected;
        drop_socket(l);
        /* An error on a welcomed connection was meant; anything before the daemon's hello on a reconnection
         * (a refusal, a reset from a dying daemon's listener) is retried within the window. */
        bool retry = l->socket_path && l->token && (!after_error || (l->reconnecting && !was_welcomed));
        if (retry && !l->reconnecting) {
                l->reconnecting = true;
                l->reconnect_deadline = lc_now_usec() + RECONNECT_WINDOW_USEC;
                lc_log(l, "%s; reconnecting through %s", why, l->socket_path);
                lc_notify_connection(l, LIFECYCLE_RECONNECTING);
        }
        if (retry && lc_now_usec() < l->reconnect_deadline) {
                lc_arm_timer(l, RECONNECT_INTERVAL_USEC);
                return;
        }
        l->reconnecting = false;
        lc_log(l, "%s; running on without lifecycle messages", retry ? "could not reconnect to lifecycled" : why);
        lc_notify_connection(l, LIFECYCLE_DISCONNECTED);
}

static void try_reconnect(lifecycle *l) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un address = { .sun_family = AF_UNIX };
        if (fd >= 0 && strlen(l->socket_path) < sizeof address.sun_path) {
                strcpy(address.sun_path, l->socket_path);
                if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0 && adopt_socket(l, fd) == 0) {
                        if (send_hello(l) < 0) lc_connection_lost(l, "could not say hello", false);
                        return;
                }
        }
        if (fd >= 0) close(fd);
        if (lc_now_usec() < l->reconnect_deadline) {
                lc_arm_timer(l, RECONNECT_INTERVAL_USEC);
                return;
        }
        l->reconnecting = false;
        lc_log(l, "could not reconnect to lifecycled; running on without lifecycle messages");
        lc_notify_connection(l, LIFECYCLE_DISCONNECTED);
}

/* The length of the first complete line in the input, or -1. */
static long first_line(lifecycle *l) {
        char *newline = l->in.length ? memchr(l->in.data, '\n', l->in.length) : NULL;
        return newline ? (long)(newline - l->in.data) : -1;
}

static int dispatch_buffered(lifecycle *l) {
        long length = first_line(l);
        if (length < 0) {
                if (l->in.length > LIFECYCLE_LINE_MAX) {
                        lc_connection_lost(l, "lifecycled sent a line longer than 65536 bytes", true);
                        return 1;
                }
                return 0;
        }
        if (length > LIFECYCLE_LINE_MAX) {
                lc_connection_lost(l, "lifecycled sent a line longer than 65536 bytes", true);
                return 1;
        }
        /* Dispatched from a copy: a callback may send, reconnect or otherwise touch the input buffer. */
        char *line = malloc((size_t)length + 1);
        if (!line) return -ENOMEM;
        memcpy(line, l->in.data, (size_t)length);
        line[length] = 0;
        lc_buffer_consume(&l->in, (size_t)length + 1);
        int r = lc_dispatch_line(l, line, (size_t)length);
        free(line);
        return r < 0 ? r : 1;
}

int lifecycle_process(lifecycle *l) {
        if (!l) return -EINVAL;
        uint64_t expirations;
        bool timer = read(l->timer_fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations;
        if (l->standalone) return l->started ? lc_dispatch_standalone(l) : 0;
        if (timer && l->reconnecting && l->sock < 0) {
                try_reconnect(l);
                return 1;
        }
        int r = flush_some(l);
        if (r < 0) return r;
        r = dispatch_buffered(l);
        if (r != 0 || l->sock < 0) return r;
        char chunk[16384];
        ssize_t n = recv(l->sock, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
                r = lc_buffer_append(&l->in, chunk, (size_t)n);
                if (r < 0) return r;
                r = dispatch_buffered(l);
                return r < 0 ? r : 1;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        lc_connection_lost(l, "lifecycled closed the connection", false);
        return 1;
}

lifecycle_state lifecycle_get_state(lifecycle *l) { return l ? l->state : LIFECYCLE_STATE_NOT_RUNNING; }
const char *lifecycle_get_app(lifecycle *l) { return l ? l->app : NULL; }
int lifecycle_is_connected(lifecycle *l) { return l && l->connected; }
int lifecycle_is_standalone(lifecycle *l) { return l && l->standalone; }

const char *lifecycle_state_to_string(lifecycle_state state) {
        static const char *const names[] = { "notRunning", "inactive", "active", "background", "suspended" };
        return (unsigned)state < sizeof names / sizeof names[0] ? names[state] : NULL;
}
