/* What the library's files share: the object, the message, and the functions between them. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "json.h"
#include "lifecycle.h"

/* How long and how often to retry LIFECYCLE_SOCKET after the daemon went away. */
#define RECONNECT_WINDOW_USEC (60ULL * 1000000ULL)
#define RECONNECT_INTERVAL_USEC (200ULL * 1000ULL)
/* Unsent output beyond this means the daemon stopped reading: lifecycle_post and the like fail with -ENOBUFS. */
#define OUTPUT_MAX (1024 * 1024)

typedef struct lc_task {
        uint64_t id;
        lifecycle_expiration_handler expiration;
        void *userdata;
} lc_task;

struct lifecycle {
        int epoll_fd, timer_fd, sock;
        char *app, *socket_path, *token;
        bool standalone, started, connected, reconnecting;
        /* LIFECYCLE_DEBUG=1 at creation: the log goes to stderr when no log callback is set. */
        bool debug;
        /* Counts connections, so that a deferred ack of a message from an earlier one is not sent on this one. */
        uint64_t generation;
        uint64_t reconnect_deadline;
        bool out_watched;
        unsigned standalone_step;
        lifecycle_state state;
        lifecycle_callbacks callbacks;
        void *userdata;
        char **observe;
        lc_buffer in, out;
        lc_task *tasks;
        size_t task_count;
        uint64_t next_task;
        uint64_t remaining_ms;
};

struct lifecycle_message {
        unsigned refs;
        lifecycle *owner;
        uint64_t generation;
        char *type;
        uint64_t id, deadline_ms;
        bool acked;
        char *launched_by;
        bool background, terminated_in_background;
        char *scene, *role, *configuration, *options, *saved_state;
        char **scenes;
        char *answer_configuration, *answer_state;
        lifecycle_fetch_result answer_fetch;
};

/* lifecycle.c */
void lc_log(lifecycle *l, const char *format, ...) __attribute__((format(printf, 2, 3)));
int lc_send_line(lifecycle *l, lc_buffer *line);
/* The daemon hung up or sent an error: retry with the token where that is allowed, else go on without it. */
void lc_connection_lost(lifecycle *l, const char *why, bool after_error);
void lc_notify_connection(lifecycle *l, lifecycle_connection_event event);
uint64_t lc_now_usec(void);
int lc_arm_timer(lifecycle *l, uint64_t delay_usec);

/* dispatch.c */
int lc_dispatch_line(lifecycle *l, const char *line, size_t length);
int lc_dispatch_standalone(lifecycle *l);
/* What the ack of message type moves the app to, applied when the ack is sent ("will" messages). */
void lc_apply_after_ack(lifecycle *l, const char *type);
