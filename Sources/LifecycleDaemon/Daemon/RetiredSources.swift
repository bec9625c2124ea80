/// Event sources whose last event has fired, freed on the next loop iteration rather than inside their own
/// callback. Each is disarmed at once: for an I/O source that takes its descriptor out of epoll while it is still
/// open. Freeing the source later while the service manager's fd store kept the same file open would leave the
/// registration in epoll, and sd-event would be handed an event for a freed source.
final class RetiredSources {
    private let loop: EventLoop
    private var retired: [EventSource] = []
    private var sweep: EventSource?

    init(loop: EventLoop) {
        self.loop = loop
    }

    func retire(_ source: EventSource) {
        source.disarm()
        retired.append(source)
        if sweep == nil {
            sweep = try? loop.deferred { [unowned self] in
                self.retired.removeAll()
                self.sweep = nil
            }
        }
    }
}
