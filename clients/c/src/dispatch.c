/* One line from the daemon: decoded, turned into a callback, acknowledged. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *string_member(const lc_json_document *doc, const lc_json *object, const char *key) {
        const lc_json *v = lc_json_member(doc, object, key);
        return v && v->kind == LC_JSON_STRING ? v->string : NULL;
}

static bool uint_member(const lc_json_document *doc, const lc_json *object, const char *key, uint64_t *out) {
        const lc_json *v = lc_json_member(doc, object, key);
        if (!v || v->kind != LC_JSON_NUMBER || !v->integer || v->number < 0) return false;
        *out = (uint64_t)v->number;
        return true;
}

/* The value's JSON text, copied; NULL when absent. */
static char *json_text(const lc_json_document *doc, const lc_json *object, const char *key) {
        const lc_json *v = lc_json_member(doc, object, key);
        return v ? strndup(v->text, v->length) : NULL;
}

static lifecycle_state parse_state(const char *s, lifecycle_state fallback) {
        for (lifecycle_state st = LIFECYCLE_STATE_NOT_RUNNING; st <= LIFECYCLE_STATE_SUSPENDED; st++)
                if (s && strcmp(s, lifecycle_state_to_string(st)) == 0) return st;
        return fallback;
}

typedef struct handler_entry {
        const char *type;
        size_t offset; /* of the handler in lifecycle_callbacks */
        bool scene;
} handler_entry;

#define H(name, member, scene) { name, offsetof(lifecycle_callbacks, member), scene }
static const handler_entry handlers[] = {
        H("didFinishLaunching", did_finish_launching, false),
        H("didBecomeActive", did_become_active, false),
        H("willResignActive", will_resign_active, false),
        H("didEnterBackground", did_enter_background, false),
        H("willEnterForeground", will_enter_foreground, false),
        H("willTerminate", will_terminate, false),
        H("configurationForConnecting", configuration_for_connecting, true),
        H("didDiscardSceneSessions", did_discard_scene_sessions, false),
        H("sceneWillConnect", scene_will_connect, true),
        H("sceneWillEnterForeground", scene_will_enter_foreground, true),
        H("sceneDidBecomeActive", scene_did_become_active, true),
        H("sceneWillResignActive", scene_will_resign_active, true),
        H("sceneDidEnterBackground", scene_did_enter_background, true),
        H("sceneDidDisconnect", scene_did_disconnect, true),
        H("performFetch", perform_fetch, false),
};
#undef H

/* "did" messages move the app when they arrive; "will" messages when their ack is sent. */
static void apply_on_arrival(lifecycle *l, const char *type) {
        if (strcmp(type, "didFinishLaunching") == 0) l->state = LIFECYCLE_STATE_INACTIVE;
        else if (strcmp(type, "didBecomeActive") == 0) l->state = LIFECYCLE_STATE_ACTIVE;
        else if (strcmp(type, "didEnterBackground") == 0) l->state = LIFECYCLE_STATE_BACKGROUND;
        if (l->state != LIFECYCLE_STATE_BACKGROUND) l->remaining_ms = UINT64_MAX;
}

void lc_apply_after_ack(lifecycle *l, const char *type) {
        if (strcmp(type, "willResignActive") == 0 || strcmp(type, "willEnterForeground") == 0) l->state = LIFECYCLE_STATE_INACTIVE;
        if (l->state != LIFECYCLE_STATE_BACKGROUND) l->remaining_ms = UINT64_MAX;
}

static int run_handler(lifecycle *l, lifecycle_message *m, lifecycle_message_handler handler) {
        int r = handler ? handler(m, l->userdata) : 0;
        if (r < 0) lc_log(l, "the %s handler failed: %s", m->type, strerror(-r));
        if (r != LIFECYCLE_DEFER && !m->acked) r = lifecycle_message_ack(m);
        else r = 0;
        lifecycle_message_unref(m);
        return r == -ENOTCONN ? 0 : r;
}

static lifecycle_message *new_message(lifecycle *l, const char *type) {
        lifecycle_message *m = calloc(1, sizeof *m);
        if (!m) return NULL;
        m->refs = 1;
        m->owner = l;
        m->generation = l->generation;
        if (!(m->type = strdup(type))) {
                free(m);
                return NULL;
        }
        return m;
}

static int dispatch_acknowledged(lifecycle *l, const handler_entry *entry, const lc_json_document *doc, const lc_json *root) {
        uint64_t id;
        if (!uint_member(doc, root, "id", &id) || id == 0) {
                lc_log(l, "ignored a %s without a valid id", entry->type);
                return 0;
        }
        lifecycle_message *m = new_message(l, entry->type);
        if (!m) return -ENOMEM;
        m->id = id;
        uint_member(doc, root, "deadlineMs", &m->deadline_ms);
        const lc_json *options = lc_json_member(doc, root, "launchOptions");
        if (options) {
                const char *by = string_member(doc, options, "launchedBy");
                const lc_json *bg = lc_json_member(doc, options, "background");
                const lc_json *tb = lc_json_member(doc, options, "terminatedInBackground");
                m->launched_by = strdup(by ? by : "unknown");
                m->background = bg && bg->kind == LC_JSON_BOOL && bg->boolean;
                m->terminated_in_background = tb && tb->kind == LC_JSON_BOOL && tb->boolean;
        }
        const char *scene = string_member(doc, root, "scene"), *role = string_member(doc, root, "role");
        const char *configuration = string_member(doc, root, "configuration");
        if (scene) m->scene = strdup(scene);
        if (role) m->role = strdup(role);
        if (configuration) m->configuration = strdup(configuration);
        m->options = json_text(doc, root, "options");
        m->saved_state = json_text(doc, root, "state");
        const lc_json *scenes = lc_json_member(doc, root, "scenes");
        if (scenes && scenes->kind == LC_JSON_ARRAY) {
                m->scenes = calloc(scenes->children + 1, sizeof *m->scenes);
                size_t k = 0;
                for (size_t i = 0; m->scenes && i < scenes->children; i++) {
                        const lc_json *s = lc_json_child(doc, scenes, i);
                        if (s->kind == LC_JSON_STRING) m->scenes[k++] = strdup(s->string);
                }
        }
        if (entry->scene && !m->scene) {
                lc_log(l, "ignored a %s without a scene", entry->type);
                lifecycle_message_unref(m);
                return 0;
        }
        apply_on_arrival(l, entry->type);
        lifecycle_message_handler handler = *(const lifecycle_message_handler *)((const char *)&l->callbacks + entry->offset);
        return run_handler(l, m, handler);
}

static void dispatch_notification(lifecycle *l, const lc_json_document *doc, const lc_json *root) {
        lifecycle_notification n = { .name = string_member(doc, root, "name"), .posts = 1 };
        if (!n.name) return;
        char *payload = json_text(doc, root, "payload"), *payloads = json_text(doc, root, "payloads");
        n.payload = payload;
        n.payloads = payloads;
        uint_member(doc, root, "posts", &n.posts);
        uint_member(doc, root, "dropped", &n.dropped);
        if (l->callbacks.notification) l->callbacks.notification(l, &n, l->userdata);
        free(payload);
        free(payloads);
}

static void dispatch_expiry(lifecycle *l, const lc_json_document *doc, const lc_json *root) {
        uint_member(doc, root, "remainingMs", &l->remaining_ms);
        const lc_json *tasks = lc_json_member(doc, root, "tasks");
        for (size_t i = 0; tasks && tasks->kind == LC_JSON_ARRAY && i < tasks->children; i++) {
                uint64_t id;
                if (!uint_member(doc, lc_json_child(doc, tasks, i), "task", &id)) continue;
                for (size_t k = 0; k < l->task_count; k++)
                        if (l->tasks[k].id == id && l->tasks[k].expiration) {
                                /* Copied first: the handler may end the task, which moves the array. */
                                lc_task task = l->tasks[k];
                                task.expiration(l, id, task.userdata);
                                break;
                        }
        }
}

static void dispatch_hello(lifecycle *l, const lc_json_document *doc, const lc_json *root) {
        const char *app = string_member(doc, root, "app"), *token = string_member(doc, root, "token");
        if (app && (!l->app || strcmp(app, l->app) != 0)) {
                char *copy = strdup(app);
                if (copy) { free(l->app); l->app = copy; }
        }
        if (token) {
                char *copy = strdup(token);
                if (copy) {
                        if (l->token) explicit_bzero(l->token, strlen(l->token));
                        free(l->token);
                        l->token = copy;
                }
        }
        l->state = parse_state(string_member(doc, root, "state"), l->state);
        l->connected = true;
        l->reconnecting = false;
        lc_notify_connection(l, LIFECYCLE_CONNECTED);
}

int lc_dispatch_line(lifecycle *l, const char *line, size_t length) {
        lc_json_document doc;
        int error;
        const lc_json *root = lc_json_parse(&doc, line, length, &error);
        const char *type = root ? string_member(&doc, root, "type") : NULL;
        int r = 0;
        if (!type) {
                /* Not ours to judge: a later daemon may send what this version cannot read. */
                if (error == -ENOMEM) r = -ENOMEM;
                else lc_log(l, "ignored a line from lifecycled that is not a message");
        } else if (strcmp(type, "hello") == 0) {
                dispatch_hello(l, &doc, root);
        } else if (strcmp(type, "error") == 0) {
                const char *message = string_member(&doc, root, "message");
                char why[400];
                snprintf(why, sizeof why, "lifecycled reported a protocol error: %s", message ? message : "(no message)");
                lc_connection_lost(l, why, true);
        } else if (strcmp(type, "notification") == 0) {
                dispatch_notification(l, &doc, root);
        } else if (strcmp(type, "backgroundTaskBegan") == 0) {
                const lc_json *remaining = lc_json_member(&doc, root, "remainingMs");
                if (remaining && remaining->kind == LC_JSON_NUMBER && remaining->integer && remaining->number >= 0)
                        l->remaining_ms = (uint64_t)remaining->number;
        } else if (strcmp(type, "backgroundTimeWillExpire") == 0) {
                dispatch_expiry(l, &doc, root);
        } else if (strcmp(type, "postFailed") == 0 || strcmp(type, "requestFailed") == 0) {
                const char *request = type[0] == 'p' ? "post" : string_member(&doc, root, "request");
                const char *message = string_member(&doc, root, "message");
                if (l->callbacks.request_failed) l->callbacks.request_failed(l, request ? request : "", message ? message : "", l->userdata);
                else lc_log(l, "%s refused: %s", request ? request : "a request", message ? message : "");
        } else {
                for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
                        if (strcmp(type, handlers[i].type) == 0) {
                                r = dispatch_acknowledged(l, &handlers[i], &doc, root);
                                break;
                        }
                /* Anything else is a type a later version added: ignored, never acknowledged. */
        }
        lc_json_document_free(&doc);
        return r;
}

/* Standalone: the app behaves as launched and focused, one callback per call. */
int lc_dispatch_standalone(lifecycle *l) {
        static const char *const steps[] = { "didFinishLaunching", "didBecomeActive" };
        if (l->standalone_step >= 2) return 0;
        const char *type = steps[l->standalone_step++];
        lifecycle_message *m = new_message(l, type);
        if (!m) return -ENOMEM;
        if (l->standalone_step == 1 && !(m->launched_by = strdup("standalone"))) {
                lifecycle_message_unref(m);
                return -ENOMEM;
        }
        apply_on_arrival(l, type);
        int r = run_handler(l, m, l->standalone_step == 1 ? l->callbacks.did_finish_launching : l->callbacks.did_become_active);
        return r < 0 ? r : 1;
}
