// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "lifecycled",
    products: [
        .executable(name: "lifecycled", targets: ["lifecycled"]),
        .executable(name: "lifectl", targets: ["lifectl"]),
        .library(name: "LifecycleClient", targets: ["LifecycleClient"]),
    ],
    targets: [
        // The UIKit lifecycle as a pure state machine: no I/O, no Glibc.
        .target(name: "LifecycleModel"),
        // Wire messages and NDJSON framing, shared by the daemon, the client library and lifectl.
        .target(name: "LifecycleProtocol", dependencies: ["LifecycleModel"]),
        // libsystemd (sd-daemon, sd-event) through pkg-config; Debian's libsystemd-dev.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // libpulse (the sound server's client library), Debian's libpulse-dev (`make deps`). Its headers are in the
        // default include path; its pkg-config flags (-pthread, -D_REENTRANT) are ones SwiftPM refuses with a warning.
        .systemLibrary(name: "CPulse"),
        // Tiny C shims for what Swift's Glibc module lacks (_GNU_SOURCE calls) and for the spawn path.
        .target(name: "CSupport"),
        // libxcb and its X-Resource extension, for the x11 display source, and libXau for its Xauthority cookie.
        .systemLibrary(name: "CXCB", pkgConfig: "xcb-res", providers: [.apt(["libxcb1-dev", "libxcb-res0-dev", "libxau-dev"])]),
        // The D-Bus API's sd-bus vtables, whose macros do not import into Swift; linked with libsystemd through CSystemd.
        .target(name: "CBus"),
        // Supervision: event loop, processes, cgroups, sockets, config.
        .target(name: "LifecycleDaemon", dependencies: ["LifecycleModel", "LifecycleProtocol", "CSystemd", "CSupport", "CXCB", "CBus", "CPulse"]),
        // The library Swift apps import to adopt the protocol.
        .target(name: "LifecycleClient", dependencies: ["LifecycleProtocol", "CSupport"]),
        .executableTarget(name: "lifecycled", dependencies: ["LifecycleDaemon"]),
        // lifectl's command line as a value (no I/O), so that its parser has unit tests.
        .target(name: "LifectlCommand", dependencies: ["LifecycleModel", "LifecycleProtocol"]),
        .executableTarget(name: "lifectl", dependencies: ["LifecycleModel", "LifecycleProtocol", "LifectlCommand", "CSupport"]),
        .executableTarget(name: "notes-example", dependencies: ["LifecycleClient", "LifecycleProtocol"], path: "Examples/Notes"),
        .executableTarget(name: "scenes-example", dependencies: ["LifecycleClient", "LifecycleProtocol"], path: "Examples/Scenes"),
        // What the test targets share: the seeded generator of their random tests.
        .target(name: "TestSupport", path: "Tests/Support"),
        .testTarget(name: "LifecycleModelTests", dependencies: ["LifecycleModel", "LifecycleProtocol", "TestSupport"]),
        .testTarget(name: "LifecycleProtocolTests", dependencies: ["LifecycleProtocol", "LifecycleClient", "TestSupport"]),
        .testTarget(name: "LifecycleDaemonTests", dependencies: ["LifecycleDaemon", "CSupport", "TestSupport"]),
        .testTarget(name: "LifectlCommandTests", dependencies: ["LifectlCommand", "LifecycleModel", "LifecycleProtocol"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["LifecycleModel", "LifecycleProtocol", "LifectlCommand", "CSupport", "TestSupport", "lifecycled", "lifectl", "notes-example", "scenes-example"]),
        // Fuzzing (docs/RELIABILITY.md): the per-input checks, shared by the two fuzzers and their regression tests.
        .target(name: "FuzzTargets", dependencies: ["LifecycleModel", "LifecycleProtocol", "LifecycleDaemon"], path: "Fuzz/Targets"),
        // libFuzzer's LLVMFuzzerRunDriver, declared for the fuzzers' -DFUZZING build (Fuzz/run.sh); nothing to link otherwise.
        .systemLibrary(name: "CFuzzerDriver", path: "Fuzz/CFuzzerDriver"),
        // libFuzzer executables under Fuzz/run.sh (make fuzz, make fuzz-smoke); corpus replayers in a plain build.
        .executableTarget(name: "fuzz-protocol", dependencies: ["FuzzTargets", "CFuzzerDriver"], path: "Fuzz/protocol"),
        .executableTarget(name: "fuzz-config", dependencies: ["FuzzTargets", "CFuzzerDriver"], path: "Fuzz/config"),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets"]),
    ],
    swiftLanguageModes: [.v6]
)
