#ifndef CBUS_H
#define CBUS_H

// The D-Bus objects of lifecycled, declared with sd-bus's vtable macros, which Swift cannot import. Every method
// call and property read goes to one Swift handler of each kind; the types are opaque here so that Swift sees
// sd-bus's own types only through the CSystemd module (a header included by two modules makes two types).

typedef struct {
    // A method call on either interface: the Swift side reads the member and the path from the message.
    int (*method)(void *message, void *userdata, void *error);
    // A property read: append the value of `property` of the object at `path` to `reply`.
    int (*property)(void *bus, const char *path, const char *interface, const char *property, void *reply,
                    void *userdata, void *error);
    // Whether an app object exists at `path` (1) or not (0).
    int (*find)(const char *path, void *userdata);
    // Every app object's path, a NULL-terminated array of malloc'd strings in a malloc'd array.
    char **(*nodes)(void *userdata);
} cbus_handlers;

// Registers the manager object, the app objects under PREFIX/app (a fallback vtable with its enumerator) and the
// object manager on `bus`. The slots come back for the caller to unref; `handlers` is copied.
int cbus_register(void *bus, const cbus_handlers *handlers, void *userdata, void **slots, int slot_count);

extern const char *const cbusManagerPath;
extern const char *const cbusAppPrefix;
extern const char *const cbusManagerInterface;
extern const char *const cbusAppInterface;

#endif
