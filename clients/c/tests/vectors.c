/* Runs the conformance vectors of docs/protocol-tests (their README says the format) against the library,
 * then the unit tests. usage: test-vectors DIRECTORY */
#include <dirent.h>
#include <errno.h>
#include <lifecycle.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

int failures;

/* A FIFO of strings. */
typedef struct queue { char **items; size_t count; } queue;
static void push(queue *q, const char *s) {
        q->items = realloc(q->items, (q->count + 1) * sizeof *q->items);
        q->items[q->count++] = strdup(s);
}
static char *pop(queue *q) {
        if (!q->count) return NULL;
        char *s = q->items[0];
        memmove(q->items, q->items + 1, --q->count * sizeof *q->items);
        return s;
}
static void clear(queue *q) { while (q->count) free(pop(q)); free(q->items); q->items = NULL; }

typedef struct run {
        lifecycle *l;
        int daemon, listener;
        lc_buffer input;
        queue events, output;
        char answer_on[64], *answer_configuration, *answer_state, *answer_result;
        bool answer_defer;
        lifecycle_message *deferred;
} run;

static void event(run *r, lc_buffer *b) {
        lc_buffer_append_string(b, "}");
        push(&r->events, b->data);
        lc_buffer_free(b);
}

static void field(lc_buffer *b, const char *key, const char *value, bool raw) {
        lc_buffer_append_string(b, ",\"");
        lc_buffer_append_string(b, key);
        lc_buffer_append_string(b, "\":");
        if (!value) lc_buffer_append_string(b, "null");
        else if (raw) lc_buffer_append_string(b, value);
        else lc_buffer_append_json_string(b, value);
}

static int on_message(lifecycle_message *m, void *userdata) {
        run *r = userdata;
        const char *type = lifecycle_message_get_type(m);
        lc_buffer b = { 0 };
        lc_buffer_append_string(&b, "{\"event\":");
        lc_buffer_append_json_string(&b, type);
        if (strcmp(type, "didFinishLaunching") == 0) {
                field(&b, "launchedBy", lifecycle_message_get_launched_by(m), false);
                field(&b, "background", lifecycle_message_is_background_launch(m) ? "true" : "false", true);
                field(&b, "terminatedInBackground", lifecycle_message_was_terminated_in_background(m) ? "true" : "false", true);
        }
        if (lifecycle_message_get_scene(m)) field(&b, "scene", lifecycle_message_get_scene(m), false);
        if (strcmp(type, "configurationForConnecting") == 0 || strcmp(type, "sceneWillConnect") == 0) {
                field(&b, "role", lifecycle_message_get_role(m), false);
                field(&b, "configuration", lifecycle_message_get_configuration(m), false);
                field(&b, "options", lifecycle_message_get_options(m), true);
                field(&b, "state", lifecycle_message_get_saved_state(m), true);
        }
        if (lifecycle_message_get_scenes(m)) {
                lc_buffer_append_string(&b, ",\"scenes\":[");
                const char *const *s = lifecycle_message_get_scenes(m);
                for (size_t i = 0; s[i]; i++) {
                        if (i) lc_buffer_append_string(&b, ",");
                        lc_buffer_append_json_string(&b, s[i]);
                }
                lc_buffer_append_string(&b, "]");
        }
        event(r, &b);
        if (strcmp(r->answer_on, type) != 0) return 0;
        r->answer_on[0] = 0;
        if (r->answer_configuration) lifecycle_message_set_configuration(m, r->answer_configuration);
        if (r->answer_state) CHECK(lifecycle_message_set_state(m, r->answer_state) == 0, "set_state");
        if (r->answer_result) {
                lifecycle_fetch_result result = strcmp(r->answer_result, "newData") == 0 ? LIFECYCLE_FETCH_NEW_DATA
                        : strcmp(r->answer_result, "failed") == 0 ? LIFECYCLE_FETCH_FAILED : LIFECYCLE_FETCH_NO_DATA;
                CHECK(lifecycle_message_set_fetch_result(m, result) == 0, "set_fetch_result");
        }
        free(r->answer_result);
        r->answer_result = NULL;
        free(r->answer_configuration);
        free(r->answer_state);
        r->answer_configuration = r->answer_state = NULL;
        if (r->answer_defer) {
                r->deferred = lifecycle_message_ref(m);
                return LIFECYCLE_DEFER;
        }
        return 0;
}

static void on_notification(lifecycle *l, const lifecycle_notification *n, void *userdata) {
        (void)l;
        char numbers[80];
        lc_buffer b = { 0 };
        lc_buffer_append_string(&b, "{\"event\":\"notification\"");
        field(&b, "name", n->name, false);
        snprintf(numbers, sizeof numbers, ",\"posts\":%llu,\"dropped\":%llu", (unsigned long long)n->posts, (unsigned long long)n->dropped);
        lc_buffer_append_string(&b, numbers);
        if (n->payload) field(&b, "payload", n->payload, true);
        if (n->payloads) field(&b, "payloads", n->payloads, true);
        event(userdata, &b);
}

static void on_failed(lifecycle *l, const char *request, const char *message, void *userdata) {
        (void)l;
        lc_buffer b = { 0 };
        lc_buffer_append_string(&b, "{\"event\":\"requestFailed\"");
        field(&b, "request", request, false);
        field(&b, "message", message, false);
        event(userdata, &b);
}

static void on_connection(lifecycle *l, lifecycle_connection_event e, void *userdata) {
        static const char *const names[] = { "connected", "reconnecting", "disconnected" };
        lc_buffer b = { 0 };
        lc_buffer_append_string(&b, "{\"event\":\"connection\"");
        field(&b, "connection", names[e], false);
        field(&b, "state", lifecycle_state_to_string(lifecycle_get_state(l)), false);
        event(userdata, &b);
}

static void on_expire(lifecycle *l, uint64_t task, void *userdata) {
        (void)l;
        char text[64];
        snprintf(text, sizeof text, "{\"event\":\"expire\",\"task\":%llu", (unsigned long long)task);
        lc_buffer b = { 0 };
        lc_buffer_append_string(&b, text);
        event(userdata, &b);
}

static void on_log(lifecycle *l, const char *message, void *userdata) { (void)l; (void)userdata; (void)message; }

/* Lets the library and the fake daemon run for up to timeout_ms, until `until` has an item. */
static void pump(run *r, queue *until, int timeout_ms) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                while (lifecycle_process(r->l) > 0) ;
                if (until && until->count) return;
                struct pollfd p[3] = { { lifecycle_get_fd(r->l), POLLIN, 0 }, { r->daemon, POLLIN, 0 }, { r->listener, POLLIN, 0 } };
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
                if (elapsed >= timeout_ms) return;
                poll(p, 3, (int)(timeout_ms - elapsed < 20 ? timeout_ms - elapsed : 20));
                if (r->listener >= 0 && (p[2].revents & POLLIN)) {
                        int fd = accept(r->listener, NULL, NULL);
                        if (fd >= 0) {
                                if (r->daemon >= 0) close(r->daemon);
                                r->daemon = fd;
                                lc_buffer_consume(&r->input, r->input.length);
                        }
                }
                if (r->daemon >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
                        char chunk[4096];
                        ssize_t n = recv(r->daemon, chunk, sizeof chunk, MSG_DONTWAIT);
                        if (n > 0) {
                                lc_buffer_append(&r->input, chunk, (size_t)n);
                                char *nl;
                                while (r->input.length && (nl = memchr(r->input.data, '\n', r->input.length))) {
                                        *nl = 0;
                                        push(&r->output, r->input.data);
                                        lc_buffer_consume(&r->input, (size_t)(nl - r->input.data) + 1);
                                }
                        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                                close(r->daemon);
                                r->daemon = -1;
                        }
                }
        }
}

static void expect(run *r, queue *q, const char *expected, const char *what, const char *file, int line) {
        pump(r, q, 3000);
        char *got = pop(q);
        CHECK(got && json_equal_text(got, expected), "%s:%d: expected %s %s, got %s", file, line, what, expected, got ? got : "nothing");
        free(got);
}

static const char *str(const lc_json_document *d, const lc_json *o, const char *k) {
        const lc_json *v = lc_json_member(d, o, k);
        return v && v->kind == LC_JSON_STRING ? v->string : NULL;
}
static char *raw(const lc_json_document *d, const lc_json *o, const char *k) {
        const lc_json *v = lc_json_member(d, o, k);
        return v ? strndup(v->text, v->length) : NULL;
}

static void act(run *r, const lc_json_document *d, const lc_json *o, const char *file, int line) {
        const char *what = str(d, o, "do");
        int rc = 0;
        char *payload = raw(d, o, "payload"), *options = raw(d, o, "options");
        if (!what) { CHECK(0, "%s:%d: no \"do\"", file, line); }
        else if (strcmp(what, "ackDeferred") == 0) {
                CHECK(r->deferred, "%s:%d: nothing deferred", file, line);
                lifecycle_message_ack(r->deferred);
                r->deferred = lifecycle_message_unref(r->deferred);
        } else if (strcmp(what, "post") == 0) rc = lifecycle_post(r->l, str(d, o, "name"), payload, str(d, o, "app"));
        else if (strcmp(what, "beginBackgroundTask") == 0) {
                uint64_t task;
                rc = lifecycle_begin_background_task(r->l, str(d, o, "name"), on_expire, r, &task);
        } else if (strcmp(what, "endBackgroundTask") == 0) {
                rc = lifecycle_end_background_task(r->l, (uint64_t)lc_json_member(d, o, "task")->number);
        } else if (strcmp(what, "observe") == 0) {
                const lc_json *names = lc_json_member(d, o, "names");
                const char *list[64] = { 0 };
                for (size_t i = 0; i < names->children && i < 63; i++) list[i] = lc_json_child(d, names, i)->string;
                rc = lifecycle_observe(r->l, list);
        } else if (strcmp(what, "requestSceneActivation") == 0) {
                rc = lifecycle_request_scene_activation(r->l, str(d, o, "scene"), str(d, o, "role"), str(d, o, "configuration"), options);
        } else if (strcmp(what, "requestSceneDestruction") == 0) {
                rc = lifecycle_request_scene_destruction(r->l, str(d, o, "scene"));
        } else if (strcmp(what, "state") == 0) {
                lc_buffer b = { 0 };
                lc_buffer_append_string(&b, "{\"event\":\"state\"");
                field(&b, "state", lifecycle_state_to_string(lifecycle_get_state(r->l)), false);
                event(r, &b);
        } else if (strcmp(what, "hangup") == 0) {
                pump(r, NULL, 50);
                if (r->daemon >= 0) close(r->daemon);
                r->daemon = -1;
        } else if (strcmp(what, "sendRaw") == 0) {
                size_t n = (size_t)lc_json_member(d, o, "bytes")->number;
                char *bytes = malloc(n);
                memset(bytes, 'a', n);
                for (size_t sent = 0; sent < n && r->daemon >= 0;) {
                        ssize_t k = send(r->daemon, bytes + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (k > 0) sent += (size_t)k;
                        else pump(r, NULL, 10);
                }
                free(bytes);
        } else CHECK(0, "%s:%d: unknown action %s", file, line, what);
        CHECK(rc >= 0, "%s:%d: %s failed: %s", file, line, what ? what : "?", strerror(-rc));
        free(payload);
        free(options);
}

static void run_file(const char *directory, const char *name) {
        char path[4096], socket_dir[] = "/tmp/lifecycle-vectors-XXXXXX";
        snprintf(path, sizeof path, "%s/%s", directory, name);
        FILE *f = fopen(path, "r");
        if (!f) { CHECK(0, "cannot open %s", path); return; }
        int before = failures;
        run r = { .daemon = -1, .listener = -1 };
        static const lifecycle_callbacks callbacks = {
                .did_finish_launching = on_message, .did_become_active = on_message, .will_resign_active = on_message,
                .did_enter_background = on_message, .will_enter_foreground = on_message, .will_terminate = on_message,
                .configuration_for_connecting = on_message, .did_discard_scene_sessions = on_message,
                .scene_will_connect = on_message, .scene_will_enter_foreground = on_message,
                .scene_did_become_active = on_message, .scene_will_resign_active = on_message,
                .scene_did_enter_background = on_message, .scene_did_disconnect = on_message,
                .notification = on_notification, .request_failed = on_failed, .connection = on_connection, .log = on_log,
                .perform_fetch = on_message,
        };
        char *text = NULL;
        size_t capacity = 0;
        ssize_t length;
        int number = 0;
        bool started = false, standalone = false;
        const char *observe[64] = { 0 }, *token = NULL;
        lc_json_document setup = { 0 };
        while ((length = getline(&text, &capacity, f)) >= 0) {
                number++;
                while (length && (text[length - 1] == '\n' || text[length - 1] == '\r')) text[--length] = 0;
                if (!length || text[0] == '#') continue;
                char kind = text[0];
                const char *body = length > 2 ? text + 2 : "";
                if (strncmp(text, "setup ", 6) == 0) {
                        int error;
                        const lc_json *o = lc_json_parse(&setup, text + 6, strlen(text + 6), &error);
                        const lc_json *s = lc_json_member(&setup, o, "standalone"), *names = lc_json_member(&setup, o, "observe");
                        standalone = s && s->boolean;
                        const lc_json *t = lc_json_member(&setup, o, "token");
                        token = t ? t->string : NULL;
                        for (size_t i = 0; names && i < names->children && i < 63; i++) observe[i] = lc_json_child(&setup, names, i)->string;
                        continue;
                }
                if (!started) {
                        started = true;
                        int pair[2] = { -1, -1 };
                        unsetenv("LIFECYCLE_FD");
                        if (!standalone) {
                                socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair);
                                char fd_text[16];
                                snprintf(fd_text, sizeof fd_text, "%d", pair[1]);
                                setenv("LIFECYCLE_FD", fd_text, 1);
                                r.daemon = pair[0];
                                mkdtemp(socket_dir);
                                struct sockaddr_un address = { .sun_family = AF_UNIX };
                                snprintf(address.sun_path, sizeof address.sun_path, "%s/app.sock", socket_dir);
                                r.listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                                bind(r.listener, (struct sockaddr *)&address, sizeof address);
                                listen(r.listener, 16);
                                setenv("LIFECYCLE_SOCKET", address.sun_path, 1);
                        }
                        setenv("LIFECYCLE_APP", "notes", 1);
                        if (token) setenv("LIFECYCLE_TOKEN", token, 1);
                        else unsetenv("LIFECYCLE_TOKEN");
                        CHECK(lifecycle_new_from_environment(&r.l) == 0, "%s: new", name);
                        CHECK(!getenv("LIFECYCLE_FD") && !getenv("LIFECYCLE_APP") && !getenv("LIFECYCLE_SOCKET")
                              && !getenv("LIFECYCLE_TOKEN"), "%s: environment kept", name);
                        lifecycle_set_callbacks(r.l, &callbacks, sizeof callbacks, &r);
                        if (observe[0]) lifecycle_observe(r.l, observe);
                        CHECK(lifecycle_start(r.l) == 0, "%s: start", name);
                }
                int error;
                lc_json_document d;
                const lc_json *o = NULL;
                if (kind == '@' || kind == '!') {
                        o = lc_json_parse(&d, body, strlen(body), &error);
                        CHECK(o, "%s:%d: bad JSON", name, number);
                        if (!o) continue;
                }
                switch (kind) {
                case '<':
                        pump(&r, NULL, 0);
                        for (int i = 0; r.daemon < 0 && i < 300; i++) pump(&r, NULL, 10);
                        CHECK(r.daemon >= 0, "%s:%d: no connection to send on", name, number);
                        if (r.daemon >= 0) {
                                size_t n = strlen(body);
                                char *line = malloc(n + 1);
                                memcpy(line, body, n);
                                line[n] = '\n';
                                CHECK(send(r.daemon, line, n + 1, MSG_NOSIGNAL) == (ssize_t)(n + 1), "%s:%d: send", name, number);
                                free(line);
                        }
                        break;
                case '>': expect(&r, &r.output, body, "the client to send", name, number); break;
                case '=': expect(&r, &r.events, body, "the report", name, number); break;
                case '@': {
                        const char *on = str(&d, o, "on");
                        snprintf(r.answer_on, sizeof r.answer_on, "%s", on ? on : "");
                        const char *configuration = str(&d, o, "configuration");
                        r.answer_configuration = configuration ? strdup(configuration) : NULL;
                        r.answer_state = raw(&d, o, "state");
                        const char *result = str(&d, o, "result");
                        r.answer_result = result ? strdup(result) : NULL;
                        const lc_json *defer = lc_json_member(&d, o, "defer");
                        r.answer_defer = defer && defer->boolean;
                        break;
                }
                case '!': act(&r, &d, o, name, number); break;
                default: CHECK(0, "%s:%d: unknown line", name, number);
                }
                if (o) lc_json_document_free(&d);
        }
        pump(&r, NULL, 300);
        CHECK(r.output.count == 0, "%s: the client sent more: %s", name, r.output.items ? r.output.items[0] : "");
        CHECK(r.events.count == 0, "%s: the library reported more: %s", name, r.events.items ? r.events.items[0] : "");
        lifecycle_message_unref(r.deferred);
        lifecycle_unref(r.l);
        if (r.daemon >= 0) close(r.daemon);
        if (r.listener >= 0) {
                close(r.listener);
                char sock[4200];
                snprintf(sock, sizeof sock, "%s/app.sock", socket_dir);
                unlink(sock);
                rmdir(socket_dir);
        }
        clear(&r.events);
        clear(&r.output);
        lc_buffer_free(&r.input);
        free(r.answer_configuration);
        free(r.answer_state);
        free(r.answer_result);
        lc_json_document_free(&setup);
        free(text);
        fclose(f);
        printf("%s %s\n", failures == before ? "ok  " : "FAIL", name);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
        if (argc != 2) { fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]); return 2; }
        DIR *dir = opendir(argv[1]);
        if (!dir) { perror(argv[1]); return 2; }
        char *names[256];
        size_t count = 0;
        for (struct dirent *e; (e = readdir(dir)) && count < 256;) {
                size_t n = strlen(e->d_name);
                if (n > 4 && strcmp(e->d_name + n - 4, ".txt") == 0) names[count++] = strdup(e->d_name);
        }
        closedir(dir);
        qsort(names, count, sizeof *names, by_name);
        CHECK(count > 0, "no vectors in %s", argv[1]);
        for (size_t i = 0; i < count; i++) { run_file(argv[1], names[i]); free(names[i]); }
        run_unit_tests();
        printf("%s: %zu vectors, %d failures\n", argv[0], count, failures);
        return failures ? 1 : 0;
}
