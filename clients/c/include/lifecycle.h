/* liblifecycle: the client side of the lifecycled protocol (docs/PROTOCOL.md), for C and C++ programs.
 *
 * Shaped like libsystemd's clients: an object made from the environment, one file descriptor to poll, and
 * lifecycle_process() to read and dispatch. The library starts no thread and never blocks for long, so it
 * fits any event loop (poll, sd-event, GLib's g_unix_fd_add, Qt's QSocketNotifier). Functions return 0 or a
 * positive value on success and a negative errno value on failure; none of them aborts the program. The
 * library writes nothing to standard error unless LIFECYCLE_DEBUG=1 is set (or a log callback is given).
 *
 * Strings the library returns belong to it; copy what must outlive these bounds. A message's strings
 * (lifecycle_message_get_*) live as long as the message: until its callback returns, or until the last
 * lifecycle_message_unref() of a reference taken with lifecycle_message_ref(). The strings of
 * lifecycle_notification, request_failed and log live until their callback returns.
 * lifecycle_state_to_string() returns static strings.
 *
 *     lifecycle *l;
 *     lifecycle_new_from_environment(&l);
 *     lifecycle_set_callbacks(l, &callbacks, sizeof callbacks, app);
 *     lifecycle_start(l);
 *     for (;;) {
 *             struct pollfd p = { lifecycle_get_fd(l), POLLIN, 0 };
 *             poll(&p, 1, -1);
 *             while (lifecycle_process(l) > 0) ;
 *     }
 */
#ifndef LIFECYCLE_H
#define LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIFECYCLE_PROTOCOL_VERSION 1
/* The longest line either side may send, the '\n' not counted. */
#define LIFECYCLE_LINE_MAX 65536

typedef struct lifecycle lifecycle;
typedef struct lifecycle_message lifecycle_message;

/* The app's state, as the daemon's messages so far say (UIKit's rule: a "did" message changes it before its
 * callback runs, a "will" message when the callback's ack is sent). */
typedef enum lifecycle_state {
        LIFECYCLE_STATE_NOT_RUNNING,
        LIFECYCLE_STATE_INACTIVE,
        LIFECYCLE_STATE_ACTIVE,
        LIFECYCLE_STATE_BACKGROUND,
        LIFECYCLE_STATE_SUSPENDED,
} lifecycle_state;

/* What happened to the connection, for lifecycle_callbacks.connection. */
typedef enum lifecycle_connection_event {
        LIFECYCLE_CONNECTED,      /* the daemon answered the hello (also after a reconnection) */
        LIFECYCLE_RECONNECTING,   /* the daemon went away; the library retries LIFECYCLE_SOCKET */
        LIFECYCLE_DISCONNECTED,   /* for good: an error from the daemon, or reconnection gave up */
} lifecycle_connection_event;

/* A callback returns 0 to have its message acknowledged when it returns, LIFECYCLE_DEFER to acknowledge it
 * later with lifecycle_message_ack() (take a reference with lifecycle_message_ref() first), or a negative
 * errno value, which is reported through lifecycle_callbacks.log and acknowledged like 0. */
#define LIFECYCLE_DEFER 1

typedef int (*lifecycle_message_handler)(lifecycle_message *m, void *userdata);

typedef struct lifecycle_notification {
        const char *name;
        const char *payload;   /* JSON text, or NULL when the message has none */
        const char *payloads;  /* JSON array text (coalescing "none"), or NULL */
        uint64_t posts;        /* how many posts this message stands for */
        uint64_t dropped;      /* how many of them were set aside */
} lifecycle_notification;

/* Every member may be NULL: a message without a handler is acknowledged at once. Pass sizeof(struct) to
 * lifecycle_set_callbacks(): members added by later versions go at the end. */
typedef struct lifecycle_callbacks {
        /* The application delegate (UIApplicationDelegate). */
        lifecycle_message_handler did_finish_launching;
        lifecycle_message_handler did_become_active;
        lifecycle_message_handler will_resign_active;
        lifecycle_message_handler did_enter_background;
        lifecycle_message_handler will_enter_foreground;
        lifecycle_message_handler will_terminate;
        /* Scenes: answer with lifecycle_message_set_configuration() before the ack. */
        lifecycle_message_handler configuration_for_connecting;
        lifecycle_message_handler did_discard_scene_sessions;
        /* The scene delegate (UISceneDelegate); lifecycle_message_get_scene() names the session. */
        lifecycle_message_handler scene_will_connect;
        lifecycle_message_handler scene_will_enter_foreground;
        lifecycle_message_handler scene_did_become_active;
        lifecycle_message_handler scene_will_resign_active;
        /* Save with lifecycle_message_set_state() before the ack: it comes back in scene_will_connect. */
        lifecycle_message_handler scene_did_enter_background;
        lifecycle_message_handler scene_did_disconnect;
        /* Notifications of the observed types, and didReceiveMemoryWarning, which every app gets. */
        void (*notification)(lifecycle *l, const lifecycle_notification *n, void *userdata);
        /* A post (request "post") or a scene request the daemon refused; the connection stays. */
        void (*request_failed)(lifecycle *l, const char *request, const char *message, void *userdata);
        void (*connection)(lifecycle *l, lifecycle_connection_event event, void *userdata);
        /* The library's log: a lost connection, a refused request, a line it ignored. NULL: nothing is written,
         * unless LIFECYCLE_DEBUG=1 was set when the object was made, which writes it to standard error. */
        void (*log)(lifecycle *l, const char *message, void *userdata);
        /* A background wake (ResumeEverySec=; UIKit's performFetch): fetch what is new, say what came of it
         * with lifecycle_message_set_fetch_result() (default LIFECYCLE_FETCH_NO_DATA); the app is suspended again
         * after the ack, or the deadline. */
        lifecycle_message_handler perform_fetch;
} lifecycle_callbacks;

/* lifecycle_new_from_environment(3) */
/* Reads LIFECYCLE_FD, LIFECYCLE_APP, LIFECYCLE_SOCKET and LIFECYCLE_TOKEN (which lets a connection that ended
 * before the daemon's hello be made again), removes them from the environment and marks the socket
 * close-on-exec, so that programs the app starts do not take its place. Without LIFECYCLE_FD the object
 * is standalone: lifecycle_start() then delivers did_finish_launching and did_become_active, and nothing more. */
int lifecycle_new_from_environment(lifecycle **ret);
/* An object on a connected socket the caller hands over (it is closed with the object); app may be NULL. */
int lifecycle_new_from_fd(lifecycle **ret, int fd, const char *app);
/* A standalone object, whatever the environment says. */
int lifecycle_new_standalone(lifecycle **ret);
lifecycle *lifecycle_unref(lifecycle *l);
int lifecycle_set_callbacks(lifecycle *l, const lifecycle_callbacks *callbacks, size_t size, void *userdata);
/* The notification types to observe, a NULL-terminated array: sent in the hello, or at once once started. */
int lifecycle_observe(lifecycle *l, const char *const *names);
/* Says hello. Call it early: slow initialisation belongs in did_finish_launching. */
int lifecycle_start(lifecycle *l);

/* lifecycle_process(3) */
/* The one descriptor to poll for POLLIN. It stays the same for the object's life, across reconnections and
 * in standalone mode (an epoll descriptor holding the socket and the library's timer). */
int lifecycle_get_fd(lifecycle *l);
/* Reads what is available, dispatches at most one message, sends what is queued. Returns 1 when it did
 * something (call it again), 0 when there is nothing more to do now, or a negative errno value. */
int lifecycle_process(lifecycle *l);
/* Sends what is queued, waiting at most timeout_usec (UINT64_MAX: as long as it takes). */
int lifecycle_flush(lifecycle *l, uint64_t timeout_usec);

/* lifecycle_get_state(3) */
lifecycle_state lifecycle_get_state(lifecycle *l);
const char *lifecycle_state_to_string(lifecycle_state state);
/* LIFECYCLE_APP, or the name the daemon's hello gave; NULL when standalone and unnamed. Valid until the next
 * lifecycle_process() (a hello may rename the app) or lifecycle_unref(). */
const char *lifecycle_get_app(lifecycle *l);
int lifecycle_is_connected(lifecycle *l);
int lifecycle_is_standalone(lifecycle *l);

/* lifecycle_message_ack(3) */
lifecycle_message *lifecycle_message_ref(lifecycle_message *m);
lifecycle_message *lifecycle_message_unref(lifecycle_message *m);
lifecycle *lifecycle_message_get_lifecycle(lifecycle_message *m);
/* The message's "type", e.g. "didEnterBackground". */
const char *lifecycle_message_get_type(lifecycle_message *m);
/* The id, 0 for the messages of standalone mode, which need no ack. */
uint64_t lifecycle_message_get_id(lifecycle_message *m);
uint64_t lifecycle_message_get_deadline_ms(lifecycle_message *m);
/* didFinishLaunching's launch options. */
const char *lifecycle_message_get_launched_by(lifecycle_message *m);
int lifecycle_message_is_background_launch(lifecycle_message *m);
int lifecycle_message_was_terminated_in_background(lifecycle_message *m);
/* Scene messages: the session id, its role and configuration, the connection's options and the saved state
 * (JSON text; "null" when nothing was saved). NULL where the message has no such field. */
const char *lifecycle_message_get_scene(lifecycle_message *m);
const char *lifecycle_message_get_role(lifecycle_message *m);
const char *lifecycle_message_get_configuration(lifecycle_message *m);
const char *lifecycle_message_get_options(lifecycle_message *m);
const char *lifecycle_message_get_saved_state(lifecycle_message *m);
/* didDiscardSceneSessions: the discarded session ids, a NULL-terminated array. */
const char *const *lifecycle_message_get_scenes(lifecycle_message *m);
/* The answer of configurationForConnecting, sent in its ack. */
int lifecycle_message_set_configuration(lifecycle_message *m, const char *configuration);
/* The state of sceneDidEnterBackground to keep with the session: any JSON text, checked here. */
int lifecycle_message_set_state(lifecycle_message *m, const char *json);
/* What a performFetch found, sent in its ack (UIKit's UIBackgroundFetchResult). */
typedef enum lifecycle_fetch_result {
        LIFECYCLE_FETCH_NO_DATA,
        LIFECYCLE_FETCH_NEW_DATA,
        LIFECYCLE_FETCH_FAILED,
} lifecycle_fetch_result;
int lifecycle_message_set_fetch_result(lifecycle_message *m, lifecycle_fetch_result result);
/* Acknowledges a deferred message. -EALREADY if it was acknowledged already. */
int lifecycle_message_ack(lifecycle_message *m);

/* lifecycle_begin_background_task(3) */
typedef void (*lifecycle_expiration_handler)(lifecycle *l, uint64_t task, void *userdata);
/* UIKit's beginBackgroundTask(withName:expirationHandler:); *ret_task gets the task's id. */
int lifecycle_begin_background_task(lifecycle *l, const char *name, lifecycle_expiration_handler expiration,
                                    void *userdata, uint64_t *ret_task);
int lifecycle_end_background_task(lifecycle *l, uint64_t task);
/* Milliseconds left while background tasks run; UINT64_MAX in the foreground, where the time has not started. */
uint64_t lifecycle_get_background_time_remaining(lifecycle *l);

/* lifecycle_post(3) */
/* Posts a notification: payload is JSON text or NULL; app NULL posts to every app that observes name. */
int lifecycle_post(lifecycle *l, const char *name, const char *payload, const char *app);
/* Scene requests: with scene, bring that session to focus; without, open a new scene (role, configuration
 * and options JSON text may be NULL). */
int lifecycle_request_scene_activation(lifecycle *l, const char *scene, const char *role,
                                       const char *configuration, const char *options);
int lifecycle_request_scene_destruction(lifecycle *l, const char *scene);

#ifdef __cplusplus
}
#endif
#endif
