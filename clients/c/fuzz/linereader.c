/* libFuzzer on the library's reader: the input is what a daemon sends, cut into reads at the bytes 0xFF; an
 * object with every callback set (one answering with a saved state, one deferring) reads and dispatches it
 * all. Sanitizers (address, undefined) report what goes wrong; the library must never abort. */
#include <lifecycle.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static lifecycle_message *deferred;

static int on_message(lifecycle_message *m, void *userdata) {
        (void)userdata;
        const char *type = lifecycle_message_get_type(m);
        if (strcmp(type, "sceneDidEnterBackground") == 0) lifecycle_message_set_state(m, "{\"k\":[1,2]}");
        if (strcmp(type, "configurationForConnecting") == 0) lifecycle_message_set_configuration(m, "Main");
        if (strcmp(type, "willResignActive") == 0 && !deferred) {
                deferred = lifecycle_message_ref(m);
                return LIFECYCLE_DEFER;
        }
        (void)lifecycle_message_get_saved_state(m);
        (void)lifecycle_message_get_options(m);
        return 0;
}

static void on_notification(lifecycle *l, const lifecycle_notification *n, void *userdata) {
        (void)l; (void)userdata;
        if (n->payload) (void)strlen(n->payload);
}

static void on_expire(lifecycle *l, uint64_t task, void *userdata) {
        (void)userdata;
        lifecycle_end_background_task(l, task);
}

static void on_log(lifecycle *l, const char *message, void *userdata) { (void)l; (void)message; (void)userdata; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) return 0;
        lifecycle *l;
        if (lifecycle_new_from_fd(&l, pair[1], "fuzz") < 0) { close(pair[0]); close(pair[1]); return 0; }
        static const lifecycle_callbacks callbacks = {
                .did_finish_launching = on_message, .did_become_active = on_message, .will_resign_active = on_message,
                .did_enter_background = on_message, .will_enter_foreground = on_message, .will_terminate = on_message,
                .configuration_for_connecting = on_message, .did_discard_scene_sessions = on_message,
                .scene_will_connect = on_message, .scene_will_enter_foreground = on_message,
                .scene_did_become_active = on_message, .scene_will_resign_active = on_message,
                .scene_did_enter_background = on_message, .scene_did_disconnect = on_message,
                .notification = on_notification, .log = on_log,
        };
        lifecycle_set_callbacks(l, &callbacks, sizeof callbacks, NULL);
        lifecycle_start(l);
        uint64_t task;
        lifecycle_begin_background_task(l, "fuzz", on_expire, NULL, &task);
        size_t start = 0;
        for (size_t i = 0; i <= size; i++) {
                if (i < size && data[i] != 0xFF) continue;
                if (i > start && send(pair[0], data + start, i - start, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) break;
                for (int k = 0; k < 64 && lifecycle_process(l) > 0; k++) ;
                start = i + 1;
        }
        shutdown(pair[0], SHUT_WR);
        for (int k = 0; k < 64 && lifecycle_process(l) > 0; k++) ;
        if (deferred) {
                lifecycle_message_ack(deferred);
                deferred = lifecycle_message_unref(deferred);
        }
        lifecycle_unref(l);
        close(pair[0]);
        return 0;
}
