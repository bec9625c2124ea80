#include <errno.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>
#include "cbus.h"

const char *const cbusManagerPath = "/org/lifecycled/Lifecycle1";
const char *const cbusAppPrefix = "/org/lifecycled/Lifecycle1/app";
const char *const cbusManagerInterface = "org.lifecycled.Lifecycle1.Manager";
const char *const cbusAppInterface = "org.lifecycled.Lifecycle1.App";

// Copied by cbus_register: one daemon per process, one bus at a time.
static cbus_handlers handlers;

static int method(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    return handlers.method(m, userdata, error);
}

static int property(sd_bus *bus, const char *path, const char *interface, const char *property,
                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    return handlers.property(bus, path, interface, property, reply, userdata, error);
}

static int find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                sd_bus_error *error) {
    (void)bus; (void)interface; (void)error;
    int r = handlers.find(path, userdata);
    if (r > 0) *found = userdata;
    return r;
}

static int enumerate(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error) {
    (void)bus; (void)path; (void)error;
    char **list = handlers.nodes(userdata);
    if (!list) return -ENOMEM;
    *nodes = list;
    return 0;
}

#define CHANGES SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
#define VERB(name) SD_BUS_METHOD_WITH_NAMES(name, "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED)

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("CgroupLayout", "s", property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("DisplaySource", "s", property, 0, CHANGES),
    SD_BUS_PROPERTY("AppsNotRunning", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("AppsInactive", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("AppsActive", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("AppsBackground", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("AppsSuspended", "u", property, 0, CHANGES),
    SD_BUS_METHOD_WITH_NAMES("ListApps", "", , "a(ssuo)", SD_BUS_PARAM(apps), method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("GetApp", "s", SD_BUS_PARAM(name), "o", SD_BUS_PARAM(app), method,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Launch", "sb", SD_BUS_PARAM(name) SD_BUS_PARAM(background), "", , method,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Focus", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Deactivate", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Background", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Suspend", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Resume", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Terminate", "s", SD_BUS_PARAM(name), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Post", "sss", SD_BUS_PARAM(type) SD_BUS_PARAM(app) SD_BUS_PARAM(json), "uu",
                             SD_BUS_PARAM(delivered) SD_BUS_PARAM(queued), method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Reload", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("SetDisplay", "ass", SD_BUS_PARAM(visible) SD_BUS_PARAM(focused), "", , method,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("SetDisplayPids", "auu", SD_BUS_PARAM(visible) SD_BUS_PARAM(focused), "", , method,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_NAMES("StateChanged", "ssss", SD_BUS_PARAM(app) SD_BUS_PARAM(from) SD_BUS_PARAM(to)
                             SD_BUS_PARAM(reason), 0),
    SD_BUS_SIGNAL_WITH_NAMES("FocusRequested", "s", SD_BUS_PARAM(app), 0),
    SD_BUS_SIGNAL_WITH_NAMES("HideRequested", "s", SD_BUS_PARAM(app), 0),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable app_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Name", "s", property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("State", "s", property, 0, CHANGES),
    SD_BUS_PROPERTY("Pid", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("Since", "t", property, 0, CHANGES),
    SD_BUS_PROPERTY("Protocol", "s", property, 0, CHANGES),
    SD_BUS_PROPERTY("Adopted", "b", property, 0, CHANGES),
    SD_BUS_PROPERTY("DeadlineMisses", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("QueuedNotifications", "u", property, 0, CHANGES),
    SD_BUS_PROPERTY("Scenes", "a(ssss)", property, 0, CHANGES),
    SD_BUS_PROPERTY("Reclaim", "(stttt)", property, 0, CHANGES),
    SD_BUS_METHOD_WITH_NAMES("Launch", "b", SD_BUS_PARAM(background), "", , method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Focus", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Deactivate", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Background", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Suspend", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Resume", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Terminate", "", "", method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END
};

int cbus_register(void *opaque, const cbus_handlers *given, void *userdata, void **slots, int slot_count) {
    sd_bus *bus = opaque;
    if (slot_count < 4) return -EINVAL;
    handlers = *given;
    sd_bus_slot **out = (sd_bus_slot **)slots;
    int r = sd_bus_add_object_vtable(bus, &out[0], cbusManagerPath, cbusManagerInterface, manager_vtable, userdata);
    if (r < 0) return r;
    r = sd_bus_add_fallback_vtable(bus, &out[1], cbusAppPrefix, cbusAppInterface, app_vtable, find, userdata);
    if (r < 0) return r;
    r = sd_bus_add_node_enumerator(bus, &out[2], cbusAppPrefix, enumerate, userdata);
    if (r < 0) return r;
    return sd_bus_add_object_manager(bus, &out[3], cbusManagerPath);
}
