// The X connection setup off the daemon's loop. libxcb's xcb_connect_to_fd writes the setup request and reads the
// server's answer with blocking waits; a peer that accepts and never answers would hold the caller for ever. So the
// exchange runs on a thread of its own, which posts its end on an eventfd the loop watches, and the loop can end it
// at any time by shutting the socket down (the thread's read then fails and it returns).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <X11/Xauth.h>
#include <xcb/xcb.h>

/// One setup under way. Two references, the loop's and the thread's; the last one released frees it, closes the
/// socket and disconnects a connection nobody took.
typedef struct lc_x11_setup {
    atomic_int references;
    /// The socket as the loop holds it, for `shutdown`; libxcb owns a duplicate. Open until the last release, so
    /// that the loop's `shutdown` never reaches a descriptor number reused by something else.
    int socket;
    int done;
    char *auth_name;
    int auth_name_length;
    char *auth_data;
    int auth_data_length;
    _Atomic(xcb_connection_t *) connection;
    atomic_int taken;
} lc_x11_setup;

static inline void lc_x11_setup_release(lc_x11_setup *setup) {
    if (atomic_fetch_sub(&setup->references, 1) != 1) return;
    xcb_connection_t *connection = atomic_load(&setup->connection);
    if (connection && !atomic_load(&setup->taken)) xcb_disconnect(connection);
    close(setup->socket);
    close(setup->done);
    free(setup->auth_name);
    free(setup->auth_data);
    free(setup);
}

static inline void *lc_x11_setup_run(void *argument) {
    lc_x11_setup *setup = argument;
    xcb_auth_info_t auth = { setup->auth_name_length, setup->auth_name, setup->auth_data_length, setup->auth_data };
    int fd = fcntl(setup->socket, F_DUPFD_CLOEXEC, 0);
    // xcb_connect_to_fd takes the descriptor in every case, closing it on failure.
    xcb_connection_t *connection = fd < 0 ? NULL : xcb_connect_to_fd(fd, setup->auth_name ? &auth : NULL);
    atomic_store(&setup->connection, connection);
    uint64_t one = 1;
    while (write(setup->done, &one, sizeof one) < 0 && errno == EINTR) {}
    lc_x11_setup_release(setup);
    return NULL;
}

/// The MIT-MAGIC-COOKIE-1 entry of the Xauthority file for local display `display`, as libxcb looks it up for a Unix
/// socket (family local, this host's name), or none. Reads `XAUTHORITY`, else `~/.Xauthority`; called on the loop
/// only, as libXau's file name lookup keeps a static buffer.
static inline void lc_x11_setup_find_auth(lc_x11_setup *setup, int display) {
    char host[256] = { 0 };
    char number[16];
    if (gethostname(host, sizeof host - 1) < 0) return;
    int numberLength = snprintf(number, sizeof number, "%d", display);
    char *names[] = { "MIT-MAGIC-COOKIE-1" };
    int lengths[] = { 18 };
    Xauth *entry = XauGetBestAuthByAddr(FamilyLocal, (unsigned short)strlen(host), host, (unsigned short)numberLength,
                                        number, 1, names, lengths);
    if (!entry) return;
    setup->auth_name = malloc(entry->name_length + 1);
    setup->auth_data = malloc(entry->data_length + 1);
    if (setup->auth_name && setup->auth_data) {
        memcpy(setup->auth_name, entry->name, entry->name_length);
        memcpy(setup->auth_data, entry->data, entry->data_length);
        setup->auth_name_length = entry->name_length;
        setup->auth_data_length = entry->data_length;
    } else {
        free(setup->auth_name);
        free(setup->auth_data);
        setup->auth_name = setup->auth_data = NULL;
    }
    XauDisposeAuth(entry);
}

/// Start the setup on connected socket `socket` (taken in every case) for display number `display`. Returns the
/// setup, or NULL with errno set.
static inline lc_x11_setup *lc_x11_setup_start(int socket, int display) {
    lc_x11_setup *setup = calloc(1, sizeof *setup);
    if (!setup) {
        close(socket);
        errno = ENOMEM;
        return NULL;
    }
    setup->socket = socket;
    setup->done = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    atomic_init(&setup->references, 2);
    atomic_init(&setup->connection, NULL);
    atomic_init(&setup->taken, 0);
    if (setup->done < 0) {
        int error = errno;
        close(socket);
        free(setup);
        errno = error;
        return NULL;
    }
    lc_x11_setup_find_auth(setup, display);
    pthread_attr_t attributes;
    pthread_t thread;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int error = pthread_create(&thread, &attributes, lc_x11_setup_run, setup);
    pthread_attr_destroy(&attributes);
    if (error) {
        atomic_store(&setup->references, 1);
        lc_x11_setup_release(setup);
        errno = error;
        return NULL;
    }
    return setup;
}

/// Readable once the thread is done.
static inline int lc_x11_setup_done_fd(const lc_x11_setup *setup) { return setup->done; }

/// Whether the thread wrote its end: the eventfd's counter is read (and reset) without waiting.
static inline int lc_x11_setup_finished(lc_x11_setup *setup) {
    uint64_t count;
    return read(setup->done, &count, sizeof count) == sizeof count;
}

/// The connection the setup made, which the caller then owns (it may carry an error); NULL when none was made.
/// Only after `lc_x11_setup_finished`.
static inline xcb_connection_t *lc_x11_setup_take(lc_x11_setup *setup) {
    atomic_store(&setup->taken, 1);
    return atomic_load(&setup->connection);
}

/// End the exchange early: the thread's wait on the socket returns.
static inline void lc_x11_setup_cancel(lc_x11_setup *setup) { shutdown(setup->socket, SHUT_RDWR); }
