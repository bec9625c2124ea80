/* A GLib main-loop app on liblifecycle: the library's one descriptor joins the loop through g_unix_fd_add,
 * and the app saves its state (a counter of launches and foreground entries) in didEnterBackground, to
 * GLIB_EXAMPLE_STATE (default $XDG_RUNTIME_DIR/glib-example.state), restoring it in didFinishLaunching.
 *
 *   cc main.c $(pkg-config --cflags --libs lifecycle glib-2.0) -o glib-example */
#include <glib.h>
#include <glib-unix.h>
#include <lifecycle.h>
#include <stdio.h>
#include <string.h>

typedef struct app {
        GMainLoop *loop;
        lifecycle *lifecycle;
        char *state_path;
        int launches, foregrounds;
} app;

static void save(app *a) {
        char *text = g_strdup_printf("%d %d\n", a->launches, a->foregrounds);
        GError *error = NULL;
        if (!g_file_set_contents(a->state_path, text, -1, &error)) {
                g_printerr("glib-example: could not save: %s\n", error->message);
                g_error_free(error);
        }
        g_free(text);
}

static void restore(app *a) {
        char *text = NULL;
        if (g_file_get_contents(a->state_path, &text, NULL, NULL)) sscanf(text, "%d %d", &a->launches, &a->foregrounds);
        g_free(text);
}

static int on_message(lifecycle_message *m, void *userdata) {
        app *a = userdata;
        const char *type = lifecycle_message_get_type(m);
        if (strcmp(type, "didFinishLaunching") == 0) {
                restore(a);
                a->launches++;
        } else if (strcmp(type, "willEnterForeground") == 0) {
                a->foregrounds++;
        } else if (strcmp(type, "didEnterBackground") == 0 || strcmp(type, "willTerminate") == 0) {
                save(a);
        }
        g_print("glib-example: %s (launches %d, foregrounds %d)\n", type, a->launches, a->foregrounds);
        return 0;
}

static gboolean on_readable(gint fd, GIOCondition condition, gpointer userdata) {
        (void)fd;
        (void)condition;
        app *a = userdata;
        int r;
        while ((r = lifecycle_process(a->lifecycle)) > 0) ;
        if (r < 0) g_printerr("glib-example: %s\n", g_strerror(-r));
        return G_SOURCE_CONTINUE;
}

static gboolean on_sigterm(gpointer userdata) {
        g_main_loop_quit(((app *)userdata)->loop);
        return G_SOURCE_REMOVE;
}

int main(void) {
        app a = { 0 };
        const char *path = g_getenv("GLIB_EXAMPLE_STATE");
        a.state_path = path ? g_strdup(path) : g_build_filename(g_get_user_runtime_dir(), "glib-example.state", NULL);
        int r = lifecycle_new_from_environment(&a.lifecycle);
        if (r < 0) {
                g_printerr("glib-example: %s\n", g_strerror(-r));
                return 1;
        }
        static const lifecycle_callbacks callbacks = {
                .did_finish_launching = on_message, .did_become_active = on_message,
                .will_resign_active = on_message, .did_enter_background = on_message,
                .will_enter_foreground = on_message, .will_terminate = on_message,
        };
        lifecycle_set_callbacks(a.lifecycle, &callbacks, sizeof callbacks, &a);
        lifecycle_start(a.lifecycle);

        a.loop = g_main_loop_new(NULL, FALSE);
        g_unix_fd_add(lifecycle_get_fd(a.lifecycle), G_IO_IN, on_readable, &a);
        g_unix_signal_add(SIGTERM, on_sigterm, &a);
        g_main_loop_run(a.loop);

        lifecycle_flush(a.lifecycle, G_USEC_PER_SEC);
        lifecycle_unref(a.lifecycle);
        g_main_loop_unref(a.loop);
        g_free(a.state_path);
        return 0;
}
