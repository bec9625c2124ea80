// x11_floor: the least a follower of an EWMH window manager does to run a window's app again when it gets the
// focus. It watches the root window's _NET_ACTIVE_WINDOW and, when it changes, reads the new window's _NET_WM_PID
// and sends SIGCONT to that process and its descendants (/proc/PID/task/PID/children). Nothing else: no stopping,
// no grace, no bookkeeping. bench/desktop-peers.sh times it against the supervisors (bench/x11_switch.c).
//   usage: DISPLAY=:N x11_floor      (runs until killed; prints "ready" once it listens)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xcb/xcb.h>
#include "continue_tree.h"

static xcb_connection_t *connection;

static xcb_atom_t atom(const char *name) {
    xcb_intern_atom_reply_t *reply =
        xcb_intern_atom_reply(connection, xcb_intern_atom(connection, 0, (uint16_t)strlen(name), name), NULL);
    if (!reply) { fprintf(stderr, "x11_floor: no atom %s\n", name); exit(1); }
    xcb_atom_t result = reply->atom;
    free(reply);
    return result;
}

/// The first 32-bit value of a property, or 0.
static uint32_t cardinal(xcb_window_t window, xcb_atom_t name, xcb_atom_t type) {
    xcb_get_property_reply_t *reply =
        xcb_get_property_reply(connection, xcb_get_property(connection, 0, window, name, type, 0, 1), NULL);
    uint32_t value = reply && xcb_get_property_value_length(reply) >= 4 ? *(uint32_t *)xcb_get_property_value(reply) : 0;
    free(reply);
    return value;
}

int main(void) {
    int screen_number;
    connection = xcb_connect(NULL, &screen_number);
    if (xcb_connection_has_error(connection)) { fprintf(stderr, "x11_floor: cannot open the display\n"); return 1; }
    xcb_screen_iterator_t screens = xcb_setup_roots_iterator(xcb_get_setup(connection));
    for (int i = 0; i < screen_number; i++) xcb_screen_next(&screens);
    xcb_window_t root = screens.data->root;
    xcb_atom_t active = atom("_NET_ACTIVE_WINDOW"), pid_atom = atom("_NET_WM_PID");
    uint32_t mask = XCB_EVENT_MASK_PROPERTY_CHANGE;
    xcb_change_window_attributes(connection, root, XCB_CW_EVENT_MASK, &mask);
    xcb_flush(connection);
    xcb_window_t previous = cardinal(root, active, XCB_ATOM_WINDOW);
    printf("ready\n");
    fflush(stdout);
    for (xcb_generic_event_t *event; (event = xcb_wait_for_event(connection)); free(event)) {
        if ((event->response_type & 0x7f) != XCB_PROPERTY_NOTIFY) continue;
        if (((xcb_property_notify_event_t *)event)->atom != active) continue;
        xcb_window_t window = cardinal(root, active, XCB_ATOM_WINDOW);
        if (!window || window == previous) continue;
        previous = window;
        uint32_t pid = cardinal(window, pid_atom, XCB_ATOM_CARDINAL);
        if (pid) continue_tree(pid, 0);
    }
    return 0;
}
