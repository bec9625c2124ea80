/* An app of the VM's memory squeeze (systemd/vm-squeeze.sh): a real client of liblifecycle that holds MIB mebibytes
 * of anonymous memory it has written, and appends what it hears to RECORD, one line per message:
 *
 *   launch PID LAUNCHED_BY TERMINATED_IN_BACKGROUND     didFinishLaunching (the last is 0 or 1)
 *   warning PID                                        didReceiveMemoryWarning
 *   TYPE PID                                           every other lifecycle message
 *
 *   vm-app MIB RECORD
 *
 * Built static by systemd/test-in-vm.sh with liblifecycle's sources (clients/c), since the VM's tree has no
 * compiler and no liblifecycle. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <lifecycle.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int record_fd = -1;

/* One write per line, O_APPEND: the apps of a run share the file. */
static void record(const char *line) {
        char text[256];
        int n = snprintf(text, sizeof text, "%s\n", line);
        if (n > 0 && (size_t)n < sizeof text && write(record_fd, text, (size_t)n) < 0) perror("vm-app: record");
}

static int on_message(lifecycle_message *m, void *userdata) {
        (void)userdata;
        char line[200];
        const char *type = lifecycle_message_get_type(m);
        if (strcmp(type, "didFinishLaunching") == 0)
                snprintf(line, sizeof line, "launch %d %s %d", (int)getpid(), lifecycle_message_get_launched_by(m),
                         lifecycle_message_was_terminated_in_background(m) ? 1 : 0);
        else
                snprintf(line, sizeof line, "%s %d", type, (int)getpid());
        record(line);
        return 0;
}

static void on_notification(lifecycle *l, const lifecycle_notification *n, void *userdata) {
        (void)l, (void)userdata;
        char line[200];
        if (strcmp(n->name, "didReceiveMemoryWarning") == 0) snprintf(line, sizeof line, "warning %d", (int)getpid());
        else snprintf(line, sizeof line, "notification %d %.100s", (int)getpid(), n->name);
        record(line);
}

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: vm-app MIB RECORD\n");
                return 2;
        }
        size_t bytes = (size_t)strtoul(argv[1], NULL, 10) << 20;
        record_fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (record_fd < 0) {
                perror("vm-app: open the record");
                return 1;
        }
        /* Written, so that every page is resident and counted in the app's scope. */
        char *held = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (held == MAP_FAILED) {
                perror("vm-app: mmap");
                return 1;
        }
        for (size_t i = 0; i < bytes; i += 4096) held[i] = (char)(i >> 12 | 1);

        lifecycle *l;
        int r = lifecycle_new_from_environment(&l);
        if (r < 0) {
                fprintf(stderr, "vm-app: lifecycle_new_from_environment: %s\n", strerror(-r));
                return 1;
        }
        lifecycle_callbacks callbacks = {
                .did_finish_launching = on_message, .did_become_active = on_message, .will_resign_active = on_message,
                .did_enter_background = on_message, .will_enter_foreground = on_message, .will_terminate = on_message,
                .notification = on_notification,
        };
        lifecycle_set_callbacks(l, &callbacks, sizeof callbacks, NULL);
        if ((r = lifecycle_start(l)) < 0) {
                fprintf(stderr, "vm-app: lifecycle_start: %s\n", strerror(-r));
                return 1;
        }
        for (;;) {
                struct pollfd p = { lifecycle_get_fd(l), POLLIN, 0 };
                if (poll(&p, 1, -1) < 0) continue;
                while ((r = lifecycle_process(l)) > 0) {}
                if (r < 0) break;
        }
        return 0;
}
