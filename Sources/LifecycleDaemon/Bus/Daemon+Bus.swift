import Glibc

extension Daemon {
    /// The D-Bus API on the bus `[Control] Bus=` names; the daemon runs on without it when there is none.
    func startBus() {
        switch BusEndpoint.resolve(configuration.config.daemon.bus, environment: options.environment,
                                   runtimeDirectory: options.runtimeDirectory, euid: geteuid()) {
        case .success(let endpoint):
            let bus = BusService(context: controlContext, display: display, cgroupLayout: cgroups.layout.rawValue,
                                 endpoint: endpoint)
            self.bus = bus
            display.dbusSource = DBusDisplaySource(bus: bus) { [unowned self] name in
                self.model.app(name)?.state.isRunning == true ? self.runtime(name)?.pid : nil
            }
            bus.start()
        case .failure(let unavailable):
            Log.info("D-Bus: no API (\(unavailable.reason))")
        }
    }
}
