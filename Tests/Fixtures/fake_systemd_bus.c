/* Plays systemd's D-Bus API for lifecycled's restart tests (Tests/IntegrationTests/DaemonRestartTests.swift):
 * PID 1 on the test machine is not systemd, so nothing else can tell the daemon which job it is running.
 *
 * It listens on a Unix socket and speaks real D-Bus there, through sd-bus in server mode, as systemd's private
 * socket (/run/systemd/private) does: a direct connection, EXTERNAL authentication, no bus daemon, no Hello.
 * It answers the three questions the daemon asks when SIGTERM arrives:
 *   org.freedesktop.systemd1.Manager.GetUnitByPID(u)      -> o  the unit's path
 *   org.freedesktop.DBus.Properties.Get(Unit, "Job")      -> v  (uo): job 42, or (0, "/") for none
 *   org.freedesktop.DBus.Properties.Get(Job, "JobType")   -> v  s
 * and the scope placement's calls (ScopePlacementTests, ScopeChargeTests), doing nothing they ask but in mode place:
 *   org.freedesktop.DBus.Properties.Get(Manager, "Version") -> v  s "252"
 *   org.freedesktop.systemd1.Manager.StartTransientUnit(ssa(sv)a(sa(sv)))  -> o  a job's path
 *   org.freedesktop.systemd1.Manager.SetUnitProperties(sba(sv))            -> ()
 *   org.freedesktop.systemd1.Manager.AttachProcessesToUnit(ssau)           -> ()
 * and records each question as one line in RECORD: "GetUnitByPID PID", "Get PATH INTERFACE PROPERTY",
 * "StartTransientUnit UNIT", "SetUnitProperties UNIT NAME=VALUE..." (the properties of type t) or
 * "AttachProcessesToUnit UNIT".
 *
 * What it answers is read from MODEFILE for each new connection, so a test can change it between stops:
 *   restart, stop, ...   any other word is the JobType of the unit's job
 *   nojob                the unit has no job (Job is (0, "/"))
 *   garbage              the Job property is a string, not (uo)
 *   hang                 GetUnitByPID is recorded and never answered
 *   late-start           StartTransientUnit is recorded and never answered (as a systemd too busy to answer in time)
 *   place ROOT MS        StartTransientUnit is answered at once and, MS milliseconds later, carried out as systemd's
 *                        start job does: ROOT/lifecycled.slice/UNIT is made (ROOT: a directory on a cgroup2 mount) and
 *                        the PIDs= of the call are written to its cgroup.procs; then "Placed UNIT" is recorded
 *   refuse MS            StartTransientUnit waits MS milliseconds, then is recorded and refused (AccessDenied)
 *   mute                 the connection is accepted and nothing is ever said, not even to authenticate
 *
 * usage: fake_systemd_bus SOCKET RECORD MODEFILE     (build: cc fake_systemd_bus.c $(pkg-config --libs libsystemd))
 * It serves one connection at a time, until it is killed. */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-id128.h>

#define UNIT_PATH "/org/freedesktop/systemd1/unit/lifecycled_2eservice"
#define JOB_PATH "/org/freedesktop/systemd1/job/42"
#define MANAGER "org.freedesktop.systemd1.Manager"

static FILE *record;
static char mode[1024];
static sd_bus_message *unanswered; /* hang: the call we keep without a reply */

static void read_mode(const char *path) {
    FILE *file = fopen(path, "r");
    mode[0] = 0;
    if (file) {
        if (!fgets(mode, sizeof mode, file)) mode[0] = 0;
        fclose(file);
    }
    mode[strcspn(mode, "\r\n")] = 0;
}

/* Appends " NAME=VALUE" to LINE for each property of type t in an a(sv), skipping the others. */
static int read_properties(sd_bus_message *m, char *line, size_t size) {
    int r = sd_bus_message_enter_container(m, 'a', "(sv)");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'r', "sv")) > 0) {
        const char *name = NULL, *contents = NULL;
        char type = 0;
        if ((r = sd_bus_message_read_basic(m, 's', &name)) < 0) return r;
        if ((r = sd_bus_message_peek_type(m, &type, &contents)) < 0) return r;
        if (contents && strcmp(contents, "t") == 0) {
            uint64_t value = 0;
            if ((r = sd_bus_message_enter_container(m, 'v', "t")) < 0) return r;
            if ((r = sd_bus_message_read_basic(m, 't', &value)) < 0) return r;
            if ((r = sd_bus_message_exit_container(m)) < 0) return r;
            size_t used = strlen(line);
            snprintf(line + used, size - used, " %s=%llu", name, (unsigned long long) value);
        } else if ((r = sd_bus_message_skip(m, "v")) < 0) {
            return r;
        }
        if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

static void sleep_ms(long ms) {
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) < 0 && errno == EINTR) {}
}

/* The PIDs= of a StartTransientUnit whose unit's name was read: at most `max` into `pids`, their count returned. */
static int read_pids(sd_bus_message *m, uint32_t *pids, int max) {
    int n = 0, r;
    const char *unit_mode = NULL;
    if (sd_bus_message_read_basic(m, 's', &unit_mode) < 0) return 0;
    if (sd_bus_message_enter_container(m, 'a', "(sv)") < 0) return 0;
    while ((r = sd_bus_message_enter_container(m, 'r', "sv")) > 0) {
        const char *name = NULL, *contents = NULL;
        char type = 0;
        if (sd_bus_message_read_basic(m, 's', &name) < 0) return n;
        if (sd_bus_message_peek_type(m, &type, &contents) < 0) return n;
        if (strcmp(name, "PIDs") == 0 && contents && strcmp(contents, "au") == 0) {
            uint32_t pid;
            if (sd_bus_message_enter_container(m, 'v', "au") < 0 || sd_bus_message_enter_container(m, 'a', "u") < 0) return n;
            while (sd_bus_message_read_basic(m, 'u', &pid) > 0) if (n < max) pids[n++] = pid;
            if (sd_bus_message_exit_container(m) < 0 || sd_bus_message_exit_container(m) < 0) return n;
        } else if (sd_bus_message_skip(m, "v") < 0) {
            return n;
        }
        if (sd_bus_message_exit_container(m) < 0) return n;
    }
    return n;
}

/* What systemd's start job of a scope does with its PIDs=. */
static void place(const char *root, const char *unit, const uint32_t *pids, int n) {
    char path[2048];
    snprintf(path, sizeof path, "%s/lifecycled.slice", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/lifecycled.slice/%s", root, unit);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/lifecycled.slice/%s/cgroup.procs", root, unit);
    for (int i = 0; i < n; i++) {
        FILE *procs = fopen(path, "w");
        if (!procs) break;
        fprintf(procs, "%u\n", pids[i]);
        fclose(procs);
    }
    fprintf(record, "Placed %s\n", unit);
    fflush(record);
}

static int handle(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void) userdata;
    (void) error;
    const char *path = sd_bus_message_get_path(m);
    if (sd_bus_message_is_method_call(m, MANAGER, "StartTransientUnit")
        || sd_bus_message_is_method_call(m, MANAGER, "SetUnitProperties")
        || sd_bus_message_is_method_call(m, MANAGER, "AttachProcessesToUnit")) {
        const char *member = sd_bus_message_get_member(m), *unit = NULL;
        char line[1024];
        int r = sd_bus_message_read_basic(m, 's', &unit);
        if (r <= 0) return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_INVALID_ARGS, "expected a unit's name");
        snprintf(line, sizeof line, "%s %s", member, unit);
        long delay = 0;
        char root[1024] = "";
        int placing = strcmp(member, "StartTransientUnit") == 0 && sscanf(mode, "place %1023s %ld", root, &delay) == 2;
        if (strcmp(member, "StartTransientUnit") == 0 && sscanf(mode, "refuse %ld", &delay) == 1) {
            sleep_ms(delay);
            fprintf(record, "%s\n", line);
            fflush(record);
            return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_ACCESS_DENIED, "this fake systemd refuses scopes");
        }
        if (placing) {
            uint32_t pids[16];
            char unit_name[256];
            snprintf(unit_name, sizeof unit_name, "%s", unit);
            int n = read_pids(m, pids, 16);
            fprintf(record, "%s\n", line);
            fflush(record);
            r = sd_bus_reply_method_return(m, "o", JOB_PATH);
            if (r < 0) return r;
            sd_bus_flush(sd_bus_message_get_bus(m));
            sleep_ms(delay);
            place(root, unit_name, pids, n);
            return 1;
        }
        if (strcmp(member, "SetUnitProperties") == 0) {
            int runtime = 0;
            r = sd_bus_message_read_basic(m, 'b', &runtime);
            if (r > 0) r = read_properties(m, line, sizeof line);
            if (r < 0) return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_INVALID_ARGS, "expected (sba(sv))");
        }
        fprintf(record, "%s\n", line);
        fflush(record);
        if (strcmp(member, "StartTransientUnit") == 0) {
            if (strcmp(mode, "late-start") == 0) {
                sd_bus_message_unref(unanswered);
                unanswered = sd_bus_message_ref(m);
                return 1;
            }
            return sd_bus_reply_method_return(m, "o", JOB_PATH);
        }
        return sd_bus_reply_method_return(m, "");
    }
    if (sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "GetUnitByPID")) {
        uint32_t pid = 0;
        int r = sd_bus_message_read_basic(m, 'u', &pid);
        if (r < 0) return r;
        fprintf(record, "GetUnitByPID %u\n", pid);
        fflush(record);
        if (strcmp(mode, "hang") == 0) {
            unanswered = sd_bus_message_ref(m);
            return 1;
        }
        return sd_bus_reply_method_return(m, "o", UNIT_PATH);
    }
    if (sd_bus_message_is_method_call(m, "org.freedesktop.DBus.Properties", "Get")) {
        const char *interface = NULL, *property = NULL;
        int r = sd_bus_message_read_basic(m, 's', &interface);
        if (r > 0) r = sd_bus_message_read_basic(m, 's', &property);
        if (r <= 0) return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_INVALID_ARGS, "expected (ss)");
        fprintf(record, "Get %s %s %s\n", path, interface, property);
        fflush(record);
        if (strcmp(path, UNIT_PATH) == 0 && strcmp(interface, "org.freedesktop.systemd1.Unit") == 0
            && strcmp(property, "Job") == 0) {
            if (strcmp(mode, "garbage") == 0) return sd_bus_reply_method_return(m, "v", "s", "restart");
            if (strcmp(mode, "nojob") == 0) return sd_bus_reply_method_return(m, "v", "(uo)", (uint32_t) 0, "/");
            return sd_bus_reply_method_return(m, "v", "(uo)", (uint32_t) 42, JOB_PATH);
        }
        if (strcmp(path, JOB_PATH) == 0 && strcmp(interface, "org.freedesktop.systemd1.Job") == 0
            && strcmp(property, "JobType") == 0)
            return sd_bus_reply_method_return(m, "v", "s", mode);
        if (strcmp(path, "/org/freedesktop/systemd1") == 0 && strcmp(interface, MANAGER) == 0
            && strcmp(property, "Version") == 0)
            return sd_bus_reply_method_return(m, "v", "s", "252");
        return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_UNKNOWN_PROPERTY, "no property %s.%s on %s", interface, property, path);
    }
    if (sd_bus_message_is_method_call(m, NULL, NULL))
        return sd_bus_reply_method_errorf(m, SD_BUS_ERROR_UNKNOWN_METHOD, "this fake systemd knows only what lifecycled asks");
    return 0;
}

static void serve(int fd, const char *mode_file) {
    read_mode(mode_file);
    if (strcmp(mode, "mute") == 0) {
        char buffer[256];
        while (read(fd, buffer, sizeof buffer) > 0) {}
        close(fd);
        return;
    }
    sd_bus *bus = NULL;
    sd_id128_t id;
    if (sd_bus_new(&bus) < 0 || sd_id128_randomize(&id) < 0 || sd_bus_set_fd(bus, fd, fd) < 0
        || sd_bus_set_server(bus, 1, id) < 0 || sd_bus_add_filter(bus, NULL, handle, NULL) < 0 || sd_bus_start(bus) < 0) {
        fprintf(stderr, "fake_systemd_bus: failed to set up a connection\n");
        sd_bus_unref(bus);
        close(fd);
        return;
    }
    for (;;) {
        int r = sd_bus_process(bus, NULL);
        if (r < 0) break;
        if (r > 0) continue;
        if (sd_bus_wait(bus, UINT64_MAX) < 0) break;
    }
    unanswered = sd_bus_message_unref(unanswered);
    sd_bus_flush_close_unref(bus);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SOCKET RECORD MODEFILE\n", argv[0]);
        return 2;
    }
    record = fopen(argv[2], "a");
    if (!record) { perror(argv[2]); return 1; }
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof address.sun_path) { fprintf(stderr, "socket path too long\n"); return 2; }
    strcpy(address.sun_path, argv[1]);
    unlink(argv[1]);
    if (bind(listener, (struct sockaddr *) &address, sizeof address) < 0 || listen(listener, 16) < 0) {
        perror(argv[1]);
        return 1;
    }
    fprintf(record, "listening\n");
    fflush(record);
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            perror("accept4");
            return 1;
        }
        serve(fd, argv[3]);
    }
}
