// libxcb and its X-Resource extension, with the few helpers whose C shapes (unions, extension globals, the
// reply iterator) read poorly from Swift.
#include <stdlib.h>
#include <string.h>
#include <xcb/xcb.h>
#include <xcb/xcbext.h>
#include <xcb/res.h>

/// The event's kind without the bit that marks events sent by another client.
static inline uint8_t lc_xcb_event_kind(const xcb_generic_event_t *event) { return event->response_type & 0x7f; }

/// A 32-bit client message about `window`, sent to the root as EWMH and ICCCM ask of pagers: the window
/// manager gets it through its substructure redirect.
static inline void lc_xcb_client_message(xcb_connection_t *c, xcb_window_t root, xcb_window_t window,
                                         xcb_atom_t type, uint32_t d0, uint32_t d1, uint32_t d2) {
    xcb_client_message_event_t event;
    memset(&event, 0, sizeof event);
    event.response_type = XCB_CLIENT_MESSAGE;
    event.format = 32;
    event.window = window;
    event.type = type;
    event.data.data32[0] = d0;
    event.data.data32[1] = d1;
    event.data.data32[2] = d2;
    xcb_send_event(c, 0, root, XCB_EVENT_MASK_SUBSTRUCTURE_REDIRECT | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY,
                   (const char *)&event);
}

/// Whether the reply to `sequence` is in, without blocking: 1 with `*reply` set (NULL when the server answered
/// with an error, which is dropped), 0 while it is still on its way.
static inline int lc_xcb_poll_reply(xcb_connection_t *c, unsigned int sequence, void **reply) {
    xcb_generic_error_t *error = NULL;
    *reply = NULL;
    int done = xcb_poll_for_reply(c, sequence, reply, &error);
    free(error);
    return done;
}

/// Ask for the X-Resource extension's presence early, so that reading it later finds the answer in.
static inline void lc_xcb_prefetch_res(xcb_connection_t *c) { xcb_prefetch_extension_data(c, &xcb_res_id); }

static inline int lc_xcb_has_res(xcb_connection_t *c) {
    const xcb_query_extension_reply_t *reply = xcb_get_extension_data(c, &xcb_res_id);
    return reply && reply->present;
}

/// Ask the X server which local process holds the client that created `window`.
static inline unsigned int lc_xcb_res_query_pid(xcb_connection_t *c, xcb_window_t window) {
    xcb_res_client_id_spec_t spec = { .client = window, .mask = XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID };
    return xcb_res_query_client_ids(c, 1, &spec).sequence;
}

/// The pid in a QueryClientIds reply, or -1 when the server does not know it (a remote client).
static inline int64_t lc_xcb_res_pid(const void *reply) {
    xcb_res_client_id_value_iterator_t ids = xcb_res_query_client_ids_ids_iterator(reply);
    for (; ids.rem; xcb_res_client_id_value_next(&ids)) {
        if ((ids.data->spec.mask & XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID) && xcb_res_client_id_value_value_length(ids.data) >= 1)
            return xcb_res_client_id_value_value(ids.data)[0];
    }
    return -1;
}
