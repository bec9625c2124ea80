// libpulse's asynchronous API, for the daemon's sound-server client (Sources/LifecycleDaemon/Audio).
#include <pulse/context.h>
#include <pulse/introspect.h>
#include <pulse/mainloop-api.h>
#include <pulse/proplist.h>
#include <pulse/stream.h>
#include <pulse/subscribe.h>
#include <pulse/error.h>
#include <sys/time.h>
