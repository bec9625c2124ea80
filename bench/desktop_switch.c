// desktop_switch: the driver of bench/desktop-peers.sh. Sends a display server what a user's switch sends (on X11
// what `xdotool windowactivate` and `xdotool windowminimize` send; on sway `[con_id=N] focus` and a switch back to
// workspace 1) and times, from /proc, what a supervisor does about it.
//   desktop_switch list
//       every window an X11 window manager manages (_NET_CLIENT_LIST): "WINDOW PID CLASS", one a line
//   desktop_switch settle TIMEOUT WINDOWS
//       waits until every hidden window's processes are stopped (state T) and the shown one's are not; prints the
//       seconds it took, or fails after TIMEOUT seconds
//   desktop_switch rounds DISPLAY K WINDOWS SUPERVISOR floor|supervised
//       DISPLAY: `x11` ($DISPLAY) or `sway:SOCKET`. K rounds on the hidden windows of WINDOWS (a file:
//       "WINDOW PID PID…" a line, the window (X11 id or sway con_id) and the app's processes; the first line is the
//       shown window, never touched), one after the other. A round waits until the window's processes are stopped,
//       asks the display server to focus the window and polls /proc/PID/stat every 50 µs until none is stopped ("focus to
//       running"), shows it a while, then hides it (X11: minimized, WM_CHANGE_STATE IconicState; sway: workspace 1
//       shown again, the window's own workspace hidden) and, "supervised", polls /proc every millisecond until all
//       are stopped again ("grace"). "floor": this program stops the processes itself (every hidden window's at the
//       start, each window's again once it is hidden; all continued at the end), a follower such as
//       bench/x11_floor.c continues them, and no grace is measured. Prints "round FOCUS_US GRACE_US" per round
//       (GRACE_US -1 for the floor), then "cpu NS" of SUPERVISOR over the rounds (0: none).
//   desktop_switch reset DISPLAY WINDOWS
//       hides every hidden window of WINDOWS again and focuses the shown one
//   desktop_switch idle SECONDS WINDOWS SUPERVISOR
//       sleeps SECONDS and prints "idle SUPERVISOR_NS HIDDEN_NS": the CPU time of the supervisor and of the
//       hidden windows' processes (every line of WINDOWS but the first) over that time.
// A supervisor's CPU time is its threads' run time (schedstat, in nanoseconds: the clock tick of utime and stime
// is coarser than one switch) plus its reaped children's (cutime and cstime): xsuspender forks pgrep to find a
// window's descendants, and that is its work too.
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <xcb/xcb.h>

#define MAX_PIDS 16

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct app {
    xcb_window_t window;
    int count;
    pid_t pids[MAX_PIDS];
};

static struct app *apps;
static int napps;

static void read_windows(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) { perror(path); exit(1); }
    char line[4096];
    int capacity = 16;
    apps = calloc((size_t)capacity, sizeof *apps);
    while (fgets(line, sizeof line, file)) {
        if (napps == capacity) apps = realloc(apps, sizeof *apps * (size_t)(capacity *= 2));
        struct app *app = &apps[napps];
        memset(app, 0, sizeof *app);
        char *cursor = line, *end;
        app->window = (xcb_window_t)strtoul(cursor, &end, 0);
        if (end == cursor) continue;
        for (cursor = end; app->count < MAX_PIDS; cursor = end) {
            long pid = strtol(cursor, &end, 10);
            if (end == cursor) break;
            app->pids[app->count++] = (pid_t)pid;
        }
        napps++;
    }
    fclose(file);
    if (napps < 2) { fprintf(stderr, "desktop_switch: %s needs a shown window and a hidden one\n", path); exit(1); }
}

/// The state letter of /proc/PID/stat (0 when the process is gone).
static char state(pid_t pid) {
    char path[64], buffer[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) return 0;
    size_t n = fread(buffer, 1, sizeof buffer - 1, file);
    fclose(file);
    buffer[n] = 0;
    char *end = strrchr(buffer, ')');
    return end && end[1] == ' ' ? end[2] : 0;
}

static int all_stopped(const struct app *app) {
    for (int i = 0; i < app->count; i++) {
        char s = state(app->pids[i]);
        if (s != 'T' && s != 't') return 0;
    }
    return 1;
}

static int none_stopped(const struct app *app) {
    for (int i = 0; i < app->count; i++) {
        char s = state(app->pids[i]);
        if (s == 'T' || s == 't') return 0;
    }
    return 1;
}

/// Waits until `done(app)`, polling every `step` microseconds (0: spinning); the time it was seen, or -1 after
/// `timeout` seconds.
static double wait_for(int (*done)(const struct app *), const struct app *app, useconds_t step, double timeout) {
    double deadline = now_us() + timeout * 1e6;
    for (;;) {
        if (done(app)) return now_us();
        if (now_us() > deadline) return -1;
        if (step) usleep(step);
    }
}

/// Run time in nanoseconds of the threads of `pid`, plus its reaped children's utime and stime.
static long long cpu_ns(pid_t pid) {
    if (pid <= 0) return 0;
    long long total = 0;
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *dir = opendir(path);
    if (!dir) return 0;
    for (struct dirent *entry; (entry = readdir(dir));) {
        if (entry->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%d/task/%.16s/schedstat", pid, entry->d_name);
        FILE *file = fopen(path, "r");
        long long ns = 0;
        if (file && fscanf(file, "%lld", &ns) == 1) total += ns;
        if (file) fclose(file);
    }
    closedir(dir);
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    char buffer[1024];
    size_t n = file ? fread(buffer, 1, sizeof buffer - 1, file) : 0;
    if (file) fclose(file);
    buffer[n] = 0;
    char *cursor = strrchr(buffer, ')');
    // After ")": state(3) … utime(14) stime(15) cutime(16) cstime(17).
    long long fields[18] = {0};
    for (int field = 3; cursor && field <= 17; field++) {
        cursor = strchr(cursor + 1, ' ');
        if (cursor) fields[field] = strtoll(cursor + 1, NULL, 10);
    }
    return total + (fields[16] + fields[17]) * (1000000000LL / sysconf(_SC_CLK_TCK));
}

/// utime + stime of the processes, in nanoseconds (busy loops: the tick is fine enough over seconds).
static long long processes_ns(const struct app *list, int count) {
    long long ticks = 0;
    for (int a = 0; a < count; a++) {
        for (int i = 0; i < list[a].count; i++) {
            char path[64], buffer[1024];
            snprintf(path, sizeof path, "/proc/%d/stat", list[a].pids[i]);
            FILE *file = fopen(path, "r");
            if (!file) continue;
            size_t n = fread(buffer, 1, sizeof buffer - 1, file);
            fclose(file);
            buffer[n] = 0;
            char *cursor = strrchr(buffer, ')');
            long long fields[16] = {0};
            for (int field = 3; cursor && field <= 15; field++) {
                cursor = strchr(cursor + 1, ' ');
                if (cursor) fields[field] = strtoll(cursor + 1, NULL, 10);
            }
            ticks += fields[14] + fields[15];
        }
    }
    return ticks * (1000000000LL / sysconf(_SC_CLK_TCK));
}

static xcb_connection_t *connection;
static xcb_window_t root;

static xcb_atom_t atom(const char *name) {
    xcb_intern_atom_reply_t *reply =
        xcb_intern_atom_reply(connection, xcb_intern_atom(connection, 0, (uint16_t)strlen(name), name), NULL);
    if (!reply) { fprintf(stderr, "desktop_switch: no atom %s\n", name); exit(1); }
    xcb_atom_t result = reply->atom;
    free(reply);
    return result;
}

/// A client message to the root window, as EWMH and ICCCM say a pager sends it to the window manager.
static void client_message(xcb_window_t window, xcb_atom_t type, uint32_t d0, uint32_t d1, uint32_t d2) {
    xcb_client_message_event_t event = {0};
    event.response_type = XCB_CLIENT_MESSAGE;
    event.format = 32;
    event.window = window;
    event.type = type;
    event.data.data32[0] = d0;
    event.data.data32[1] = d1;
    event.data.data32[2] = d2;
    xcb_send_event(connection, 0, root, XCB_EVENT_MASK_SUBSTRUCTURE_REDIRECT | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY,
                   (const char *)&event);
    xcb_flush(connection);
}

static void *property(xcb_window_t window, xcb_atom_t name, xcb_atom_t type, int *length) {
    xcb_get_property_reply_t *reply =
        xcb_get_property_reply(connection, xcb_get_property(connection, 0, window, name, type, 0, 1 << 16), NULL);
    if (!reply) { *length = 0; return NULL; }
    *length = xcb_get_property_value_length(reply);
    void *copy = malloc((size_t)*length + 1);
    memcpy(copy, xcb_get_property_value(reply), (size_t)*length);
    ((char *)copy)[*length] = 0;
    free(reply);
    return copy;
}

static void connect_display(void) {
    int screen_number;
    connection = xcb_connect(NULL, &screen_number);
    if (xcb_connection_has_error(connection)) { fprintf(stderr, "desktop_switch: cannot open display %s\n", getenv("DISPLAY")); exit(1); }
    xcb_screen_iterator_t screens = xcb_setup_roots_iterator(xcb_get_setup(connection));
    for (int i = 0; i < screen_number; i++) xcb_screen_next(&screens);
    root = screens.data->root;
}

// sway's IPC (i3's): "i3-ipc", a 32-bit length and type, the payload.
static int sway_fd = -1;

static int read_all(int fd, void *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, (char *)buffer + done, count - done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static void sway_connect(const char *path) {
    sway_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    if (sway_fd < 0 || connect(sway_fd, (struct sockaddr *)&address, sizeof address) < 0) { perror(path); exit(1); }
}

static void sway_send(const char *payload) {
    uint32_t length = (uint32_t)strlen(payload), type = 0;  // RUN_COMMAND
    char header[14];
    memcpy(header, "i3-ipc", 6);
    memcpy(header + 6, &length, 4);
    memcpy(header + 10, &type, 4);
    if (write(sway_fd, header, 14) != 14 || write(sway_fd, payload, length) != (ssize_t)length) { perror("sway"); exit(1); }
}

static void sway_reply(void) {
    char header[14];
    uint32_t length;
    if (read_all(sway_fd, header, 14) < 0) { fprintf(stderr, "desktop_switch: sway closed the connection\n"); exit(1); }
    memcpy(&length, header + 6, 4);
    char *payload = malloc(length + 1);
    if (read_all(sway_fd, payload, length) < 0) { fprintf(stderr, "desktop_switch: sway closed the connection\n"); exit(1); }
    free(payload);
}

static int list(void) {
    int length;
    xcb_window_t *windows = property(root, atom("_NET_CLIENT_LIST"), XCB_ATOM_WINDOW, &length);
    xcb_atom_t pid_atom = atom("_NET_WM_PID");
    for (int i = 0; windows && i < length / 4; i++) {
        int pid_length, class_length;
        uint32_t *pid = property(windows[i], pid_atom, XCB_ATOM_CARDINAL, &pid_length);
        char *class = property(windows[i], XCB_ATOM_WM_CLASS, XCB_ATOM_STRING, &class_length);
        // WM_CLASS is "instance\0class\0": the class is the second string.
        const char *name = class && class_length > (int)strlen(class) + 1 ? class + strlen(class) + 1 : "";
        printf("0x%x %u %s\n", windows[i], pid_length >= 4 ? *pid : 0, name);
        free(pid);
        free(class);
    }
    free(windows);
    return 0;
}

static xcb_atom_t active_atom, change_state_atom;

/// Asks the display server to focus the window; the reply (sway's) is read by `done_asking`, after the timing.
static void ask_focus(const struct app *app) {
    if (sway_fd >= 0) {
        char command[64];
        snprintf(command, sizeof command, "[con_id=%u] focus", app->window);
        sway_send(command);
    } else {
        // _NET_ACTIVE_WINDOW from a pager (source 2), as xdotool windowactivate sends it.
        client_message(app->window, active_atom, 2, XCB_CURRENT_TIME, 0);
    }
}

static void ask_hide(const struct app *app) {
    if (sway_fd >= 0) {
        sway_send("workspace 1");
    } else {
        // ICCCM's iconify request (IconicState), as xdotool windowminimize sends it.
        client_message(app->window, change_state_atom, 3, 0, 0);
    }
}

static void done_asking(void) {
    if (sway_fd >= 0) sway_reply();
}

static void signal_app(const struct app *app, int signal) {
    for (int i = 0; i < app->count; i++) kill(app->pids[i], signal);
}

static int rounds(int k, pid_t supervisor, int floor_mode) {
    if (sway_fd < 0) {
        active_atom = atom("_NET_ACTIVE_WINDOW");
        change_state_atom = atom("WM_CHANGE_STATE");
    }
    if (floor_mode)
        for (int a = 1; a < napps; a++) signal_app(&apps[a], SIGSTOP);
    long long before = cpu_ns(supervisor);
    int failed = 0;
    for (int round = 0; round < k; round++) {
        const struct app *app = &apps[1 + round % (napps - 1)];
        if (floor_mode) signal_app(app, SIGSTOP);
        if (wait_for(all_stopped, app, 1000, 30) < 0) {
            fprintf(stderr, "desktop_switch: window 0x%x was not suspended within 30 s\n", app->window);
            failed = 1;
            break;
        }
        usleep(200000);  // the supervisor's work for the suspension is over
        double start = now_us();
        ask_focus(app);
        // Polled every 50 µs rather than spun on: a spinning driver holds a CPU at the display server's own
        // weight, and the server's wake-up waits behind it for the next scheduler tick.
        double running = wait_for(none_stopped, app, 50, 30);
        done_asking();
        if (running < 0) {
            fprintf(stderr, "desktop_switch: window 0x%x was not continued within 30 s of the focus request\n", app->window);
            failed = 1;
            break;
        }
        usleep(300000);  // shown a while: the supervisor has made it the active app
        ask_hide(app);
        double hidden = now_us(), grace = -1;
        done_asking();
        if (!floor_mode) {
            double stopped = wait_for(all_stopped, app, 1000, 30);
            if (stopped < 0) {
                fprintf(stderr, "desktop_switch: window 0x%x was not suspended within 30 s of its hiding\n", app->window);
                failed = 1;
                break;
            }
            grace = stopped - hidden;
        } else {
            // The floor's supervisor stops a hidden app at once, so that no more apps run than under a supervisor.
            signal_app(app, SIGSTOP);
        }
        printf("round %.1f %.1f\n", running - start, grace);
        fflush(stdout);
    }
    printf("cpu %lld\n", cpu_ns(supervisor) - before);
    if (floor_mode)
        for (int a = 1; a < napps; a++) signal_app(&apps[a], SIGCONT);
    return failed;
}

/// Every hidden window hidden again and the shown one focused: the picture a round that broke off may have left
/// otherwise, for the next follower.
static int reset(void) {
    if (sway_fd >= 0) {
        char command[64];
        snprintf(command, sizeof command, "[con_id=%u] focus", apps[0].window);
        sway_send(command);
        sway_reply();
        return 0;
    }
    active_atom = atom("_NET_ACTIVE_WINDOW");
    change_state_atom = atom("WM_CHANGE_STATE");
    for (int a = 1; a < napps; a++) client_message(apps[a].window, change_state_atom, 3, 0, 0);
    client_message(apps[0].window, active_atom, 2, XCB_CURRENT_TIME, 0);
    free(xcb_get_input_focus_reply(connection, xcb_get_input_focus(connection), NULL));  // a round trip: all sent
    return 0;
}

static int settled(const struct app *unused) {
    (void)unused;
    if (!none_stopped(&apps[0])) return 0;
    for (int a = 1; a < napps; a++)
        if (!all_stopped(&apps[a])) return 0;
    return 1;
}

static int settle(double timeout) {
    double start = now_us(), done = wait_for(settled, NULL, 10000, timeout);
    if (done < 0) {
        int stopped = 0;
        for (int a = 1; a < napps; a++) stopped += all_stopped(&apps[a]);
        fprintf(stderr, "desktop_switch: after %.0f s, %d of %d hidden apps are stopped, the shown one %s\n", timeout,
                stopped, napps - 1, none_stopped(&apps[0]) ? "runs" : "is stopped");
        return 1;
    }
    printf("%.2f\n", (done - start) / 1e6);
    return 0;
}

static int idle(double seconds, pid_t supervisor) {
    long long cpu0 = cpu_ns(supervisor), hidden0 = processes_ns(apps + 1, napps - 1);
    usleep((useconds_t)(seconds * 1e6));
    long long cpu1 = cpu_ns(supervisor), hidden1 = processes_ns(apps + 1, napps - 1);
    printf("idle %lld %lld\n", cpu1 - cpu0, hidden1 - hidden0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        connect_display();
        return list();
    }
    if (argc >= 4 && strcmp(argv[1], "settle") == 0) {
        read_windows(argv[3]);
        return settle(atof(argv[2]));
    }
    if (argc >= 7 && strcmp(argv[1], "rounds") == 0) {
        read_windows(argv[4]);
        if (strncmp(argv[2], "sway:", 5) == 0) sway_connect(argv[2] + 5);
        else connect_display();
        return rounds(atoi(argv[3]), (pid_t)atoi(argv[5]), strcmp(argv[6], "floor") == 0);
    }
    if (argc >= 4 && strcmp(argv[1], "reset") == 0) {
        read_windows(argv[3]);
        if (strncmp(argv[2], "sway:", 5) == 0) sway_connect(argv[2] + 5);
        else connect_display();
        return reset();
    }
    if (argc >= 5 && strcmp(argv[1], "idle") == 0) {
        read_windows(argv[3]);
        return idle(atof(argv[2]), (pid_t)atoi(argv[4]));
    }
    fprintf(stderr, "usage: desktop_switch list | settle TIMEOUT WINDOWS | rounds x11|sway:SOCKET K WINDOWS SUPERVISOR floor|supervised"
                    " | reset x11|sway:SOCKET WINDOWS | idle SECONDS WINDOWS SUPERVISOR\n");
    return 2;
}
