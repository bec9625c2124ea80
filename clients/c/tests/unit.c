/* What the vectors do not show: errors as negative errno values, environment hygiene, the JSON reader's edges. */
#include <errno.h>
#include <fcntl.h>
#include <lifecycle.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner.h"

static void test_errors(void) {
        lifecycle *l = NULL;
        CHECK(lifecycle_new_from_fd(&l, -1, NULL) == -EBADF, "new_from_fd(-1)");
        setenv("LIFECYCLE_FD", "3x", 1);
        CHECK(lifecycle_new_from_environment(&l) == -EBADF, "a malformed LIFECYCLE_FD");
        CHECK(!getenv("LIFECYCLE_FD"), "a malformed LIFECYCLE_FD stays in the environment");
        CHECK(lifecycle_process(NULL) == -EINVAL && lifecycle_start(NULL) == -EINVAL, "NULL object");
        CHECK(lifecycle_message_ack(NULL) == -EINVAL, "ack(NULL)");

        int pair[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
        CHECK(lifecycle_new_from_fd(&l, pair[1], "notes") == 0, "new_from_fd");
        CHECK(fcntl(pair[1], F_GETFD) & FD_CLOEXEC, "the socket is not close-on-exec");
        CHECK(fcntl(pair[1], F_GETFL) & O_NONBLOCK, "the socket is blocking");
        int fd = lifecycle_get_fd(l);
        CHECK(lifecycle_post(l, "x", NULL, NULL) == -ENOTCONN, "post before start");
        CHECK(lifecycle_start(l) == 0 && lifecycle_start(l) == -EALREADY, "start twice");
        CHECK(lifecycle_post(l, "x", "{not json", NULL) == -EINVAL, "post with a payload that is not JSON");
        CHECK(lifecycle_post(l, "", NULL, NULL) == -EINVAL, "post without a name");
        CHECK(lifecycle_request_scene_activation(l, NULL, NULL, NULL, "[1,") == -EINVAL, "options that are not JSON");
        CHECK(lifecycle_end_background_task(l, 42) == -ENOENT, "ending an unknown task");
        size_t big = LIFECYCLE_LINE_MAX;
        char *payload = malloc(big + 3);
        payload[0] = '"';
        memset(payload + 1, 'a', big);
        payload[big + 1] = '"';
        payload[big + 2] = 0;
        CHECK(lifecycle_post(l, "x", payload, NULL) == -EMSGSIZE, "a line over the limit");
        free(payload);
        CHECK(lifecycle_get_fd(l) == fd, "the descriptor changed");
        close(pair[0]);
        while (lifecycle_process(l) > 0) ;
        CHECK(!lifecycle_is_connected(l), "still connected after a hang-up without LIFECYCLE_SOCKET");
        CHECK(lifecycle_post(l, "x", NULL, NULL) == -ENOTCONN, "post after the hang-up");
        lifecycle_unref(l);
}

struct heard { char text[512]; int disconnected; };
static void on_log(lifecycle *l, const char *message, void *userdata) {
        (void)l;
        snprintf(((struct heard *)userdata)->text, sizeof ((struct heard *)userdata)->text, "%s", message);
}
static void on_connection(lifecycle *l, lifecycle_connection_event event, void *userdata) {
        (void)l;
        if (event == LIFECYCLE_DISCONNECTED) ((struct heard *)userdata)->disconnected++;
}

/* A connection the daemon ends: the library's routine log line. Returns what the run wrote to stderr. */
static char *stderr_of_hang_up(const lifecycle_callbacks *callbacks, struct heard *heard) {
        FILE *capture = tmpfile();
        fflush(stderr);
        int saved = dup(STDERR_FILENO);
        dup2(fileno(capture), STDERR_FILENO);
        int pair[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
        lifecycle *l = NULL;
        lifecycle_new_from_fd(&l, pair[1], "quiet");
        if (callbacks) lifecycle_set_callbacks(l, callbacks, sizeof *callbacks, heard);
        lifecycle_start(l);
        close(pair[0]);
        while (lifecycle_process(l) > 0) ;
        lifecycle_unref(l);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        static char text[1024];
        rewind(capture);
        size_t n = fread(text, 1, sizeof text - 1, capture);
        text[n] = 0;
        fclose(capture);
        return text;
}

static void test_quiet_by_default(void) {
        unsetenv("LIFECYCLE_DEBUG");
        char *written = stderr_of_hang_up(NULL, NULL);
        CHECK(written[0] == 0, "a normal run wrote to stderr: %s", written);

        struct heard heard = { 0 };
        lifecycle_callbacks callbacks = { .log = on_log, .connection = on_connection };
        written = stderr_of_hang_up(&callbacks, &heard);
        CHECK(written[0] == 0, "a run with a log callback wrote to stderr: %s", written);
        CHECK(strstr(heard.text, "closed the connection") != NULL, "the log callback heard: '%s'", heard.text);
        CHECK(heard.disconnected == 1, "LIFECYCLE_DISCONNECTED came %d times", heard.disconnected);

        setenv("LIFECYCLE_DEBUG", "1", 1);
        written = stderr_of_hang_up(NULL, NULL);
        unsetenv("LIFECYCLE_DEBUG");
        CHECK(strncmp(written, "lifecycle: lifecycled closed the connection", 43) == 0, "LIFECYCLE_DEBUG=1 wrote: '%s'", written);
}

static void test_json(void) {
        static const char *const good[] = { "{}", "[]", "0", "-0.5e+3", "\"\\ud83d\\ude00\"", "{\"a\":[1,{\"b\":null}],\"c\":true}", " 1 " };
        static const char *const bad[] = { "", "{", "[1,]", "01", "\"\\ud83d\"", "\"\\u0000\"", "{\"a\" 1}", "tru", "1 2", "\"\x01\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "nan" };
        for (size_t i = 0; i < sizeof good / sizeof *good; i++) CHECK(lc_json_valid(good[i], strlen(good[i])), "valid: %s", good[i]);
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(!lc_json_valid(bad[i], strlen(bad[i])), "invalid: %s", bad[i]);
        char deep[600];
        memset(deep, '[', 300);
        memset(deep + 300, ']', 300);
        CHECK(!lc_json_valid(deep, 600), "nesting of 300 accepted");
        CHECK(json_equal_text("{\"a\":1,\"b\":[true]}", "{ \"b\" : [true], \"a\" : 1.0 }"), "equal objects");
        CHECK(!json_equal_text("{\"a\":1}", "{\"a\":1,\"b\":2}"), "unequal objects");
}

int run_unit_tests(void) {
        int before = failures;
        test_errors();
        test_quiet_by_default();
        test_json();
        printf("%s unit tests\n", failures == before ? "ok  " : "FAIL");
        return failures - before;
}
