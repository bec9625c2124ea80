/* A plain C app on liblifecycle and poll(2): it prints each callback, records it (LIFECYCLE_RECORD=FILE, one
 * JSON line each, for the tests), keeps its scenes' state, and holds a background task while it "uploads".
 *
 *   cc main.c $(pkg-config --cflags --libs lifecycle) -o c-example
 *   c-example [--observe TYPE,TYPE] [--task-on-background] [--defer-ack] [--hello-when FILE]
 *
 * Without LIFECYCLE_FD (started by hand) it runs standalone: launched and active. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <lifecycle.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct app {
        int record_fd;
        int task_on_background, defer_ack;
        uint64_t task;
        int has_task;
        lifecycle_message *deferred;
} app;

static volatile sig_atomic_t terminate;
static void on_sigterm(int signal) { (void)signal; terminate = 1; }

/* One write per line, O_APPEND: several apps may share the file. */
static void record(app *a, lifecycle *l, const char *type, const char *extra) {
        printf("%s: %s%s%s\n", lifecycle_get_app(l) ? lifecycle_get_app(l) : "c-example", type, extra ? " " : "", extra ? extra : "");
        fflush(stdout);
        if (a->record_fd < 0) return;
        char line[2048];
        int n = snprintf(line, sizeof line, "{\"app\":\"%s\",\"type\":\"%s\",\"pid\":%d,\"client\":\"c\"%s%s}\n",
                         lifecycle_get_app(l) ? lifecycle_get_app(l) : "", type, (int)getpid(), extra ? "," : "", extra ? extra : "");
        if (n > 0 && (size_t)n < sizeof line && write(a->record_fd, line, (size_t)n) < 0) perror("record");
}

static void on_expiry(lifecycle *l, uint64_t task, void *userdata);

static int on_message(lifecycle_message *m, void *userdata) {
        app *a = userdata;
        lifecycle *l = lifecycle_message_get_lifecycle(m);
        const char *type = lifecycle_message_get_type(m), *scene = lifecycle_message_get_scene(m);
        char extra[600] = "";
        if (scene) {
                const char *saved = lifecycle_message_get_saved_state(m);
                snprintf(extra, sizeof extra, "\"scene\":\"%s\",\"savedState\":%s", scene, saved ? saved : "null");
        } else if (strcmp(type, "didFinishLaunching") == 0) {
                snprintf(extra, sizeof extra, "\"launchedBy\":\"%s\"", lifecycle_message_get_launched_by(m));
        }
        record(a, l, type, *extra ? extra : NULL);
        if (strcmp(type, "sceneDidEnterBackground") == 0) {
                char state[200];
                snprintf(state, sizeof state, "{\"savedBy\":\"c-example\",\"scene\":\"%s\"}", scene);
                lifecycle_message_set_state(m, state);
        }
        if (strcmp(type, "didEnterBackground") == 0 && a->task_on_background && !a->has_task
            && lifecycle_begin_background_task(l, "upload", on_expiry, a, &a->task) == 0)
                a->has_task = 1;
        if (strcmp(type, "didEnterBackground") == 0 && a->defer_ack) {
                /* Finishes its save later, from the loop: the ack waits until then. */
                a->deferred = lifecycle_message_ref(m);
                return LIFECYCLE_DEFER;
        }
        return 0;
}

static void on_notification(lifecycle *l, const lifecycle_notification *n, void *userdata) {
        char extra[900];
        snprintf(extra, sizeof extra, "\"name\":\"%s\",\"posts\":%llu,\"payload\":%.300s,\"payloads\":%.300s", n->name,
                 (unsigned long long)n->posts, n->payload ? n->payload : "null", n->payloads ? n->payloads : "null");
        record(userdata, l, "notification", extra);
}

static void on_expiry(lifecycle *l, uint64_t task, void *userdata) {
        app *a = userdata;
        record(a, l, "backgroundTimeWillExpire", NULL);
        lifecycle_end_background_task(l, task);
        a->has_task = 0;
}

static void on_connection(lifecycle *l, lifecycle_connection_event event, void *userdata) {
        static const char *const names[] = { "connected", "reconnecting", "disconnected" };
        char extra[80];
        snprintf(extra, sizeof extra, "\"event\":\"%s\",\"state\":\"%s\"", names[event], lifecycle_state_to_string(lifecycle_get_state(l)));
        record(userdata, l, "connection", extra);
}

int main(int argc, char **argv) {
        app a = { .record_fd = -1 };
        const char *observe = NULL, *hello_when = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--observe") == 0 && i + 1 < argc) observe = argv[++i];
                else if (strcmp(argv[i], "--task-on-background") == 0) a.task_on_background = 1;
                else if (strcmp(argv[i], "--defer-ack") == 0) a.defer_ack = 1;
                /* A slow start that ends when FILE exists: the tests choose what happens before the hello. */
                else if (strcmp(argv[i], "--hello-when") == 0 && i + 1 < argc) hello_when = argv[++i];
                else {
                        fprintf(stderr, "usage: %s [--observe TYPE,TYPE] [--task-on-background] [--defer-ack] [--hello-when FILE]\n", argv[0]);
                        return 2;
                }
        }
        const char *record_path = getenv("LIFECYCLE_RECORD");
        if (record_path) a.record_fd = open(record_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        signal(SIGTERM, on_sigterm);

        lifecycle *l;
        int r = lifecycle_new_from_environment(&l);
        if (r < 0) { fprintf(stderr, "lifecycle_new_from_environment: %s\n", strerror(-r)); return 1; }
        static const lifecycle_callbacks callbacks = {
                .did_finish_launching = on_message, .did_become_active = on_message, .will_resign_active = on_message,
                .did_enter_background = on_message, .will_enter_foreground = on_message, .will_terminate = on_message,
                .configuration_for_connecting = on_message, .did_discard_scene_sessions = on_message,
                .scene_will_connect = on_message, .scene_will_enter_foreground = on_message,
                .scene_did_become_active = on_message, .scene_will_resign_active = on_message,
                .scene_did_enter_background = on_message, .scene_did_disconnect = on_message,
                .notification = on_notification, .connection = on_connection,
        };
        lifecycle_set_callbacks(l, &callbacks, sizeof callbacks, &a);
        if (observe) {
                char *copy = strdup(observe), *names[32] = { 0 }, *save = NULL;
                int n = 0;
                for (char *t = strtok_r(copy, ",", &save); t && n < 31; t = strtok_r(NULL, ",", &save)) names[n++] = t;
                lifecycle_observe(l, (const char *const *)names);
                free(copy);
        }
        while (hello_when && !terminate && access(hello_when, F_OK) < 0) usleep(50000);
        if ((r = lifecycle_start(l)) < 0) fprintf(stderr, "lifecycle_start: %s\n", strerror(-r));

        while (!terminate) {
                struct pollfd p = { lifecycle_get_fd(l), POLLIN, 0 };
                if (poll(&p, 1, a.deferred ? 100 : -1) < 0 && errno != EINTR) break;
                while ((r = lifecycle_process(l)) > 0) ;
                if (r < 0) fprintf(stderr, "lifecycle_process: %s\n", strerror(-r));
                if (a.deferred) {
                        lifecycle_message_ack(a.deferred);
                        a.deferred = lifecycle_message_unref(a.deferred);
                }
        }
        lifecycle_flush(l, 1000000);
        lifecycle_unref(l);
        return 0;
}
