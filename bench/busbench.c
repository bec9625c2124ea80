// busbench: the D-Bus API's round trips from one sd-bus connection, without any command's start-up: K times,
// for each measure in turn, one call and its reply; prints one line per measure with the median, min and max of one
// call, in microseconds, and how many replies were errors:
//   ping <median> <min> <max> <errors>      org.freedesktop.DBus.Peer.Ping to the daemon: the bus's floor
//   get <median> <min> <max> <errors>       Properties.Get of App1's State
//   focus <median> <min> <max> <errors>     Manager.Focus, alternating APP1 and APP2: an app switch
//   usage: busbench ADDRESS K APP1 APP2
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

static const char *name = "org.lifecycled.Lifecycle1", *manager = "/org/lifecycled/Lifecycle1";

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void report(const char *what, double *samples, int k, int errors) {
    qsort(samples, k, sizeof(double), compare);
    printf("%s %.0f %.0f %.0f %d\n", what, samples[k / 2], samples[0], samples[k - 1], errors);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: busbench ADDRESS K APP1 APP2\n"); return 2; }
    int k = atoi(argv[2]);
    sd_bus *bus = NULL;
    if (sd_bus_new(&bus) < 0 || sd_bus_set_address(bus, argv[1]) < 0 || sd_bus_set_bus_client(bus, 1) < 0
        || sd_bus_start(bus) < 0) { fprintf(stderr, "busbench: cannot connect to %s\n", argv[1]); return 1; }
    char path[512];
    snprintf(path, sizeof path, "%s/app/%s", manager, argv[3]);
    double *samples = calloc((size_t) k, sizeof(double));
    int errors = 0;
    for (int i = 0; i < k; i++) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        double start = now();
        if (sd_bus_call_method(bus, name, manager, "org.freedesktop.DBus.Peer", "Ping", &error, &reply, "") < 0) errors++;
        samples[i] = now() - start;
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
    }
    report("ping", samples, k, errors);
    errors = 0;
    for (int i = 0; i < k; i++) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        char *state = NULL;
        double start = now();
        if (sd_bus_get_property_string(bus, name, path, "org.lifecycled.Lifecycle1.App", "State", &error, &state) < 0) errors++;
        samples[i] = now() - start;
        free(state);
        sd_bus_error_free(&error);
    }
    report("get", samples, k, errors);
    errors = 0;
    for (int i = 0; i < k; i++) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        double start = now();
        if (sd_bus_call_method(bus, name, manager, "org.lifecycled.Lifecycle1.Manager", "Focus", &error, &reply, "s",
                               argv[3 + i % 2]) < 0) errors++;
        samples[i] = now() - start;
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
    }
    report("focus", samples, k, errors);
    sd_bus_flush_close_unref(bus);
    return 0;
}
