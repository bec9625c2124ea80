import LifecycleModel

/// What changed about the apps, as outside observers see it: an app that appears or goes, an app's transition, a
/// scene's transition, or any other change to what `lifectl status` shows of an app (pid, queue, deadline misses).
enum AppChange {
    case added(String)
    case removed(String)
    case transition(app: String, from: AppState, to: AppState, reason: String)
    case sceneTransition(app: String, scene: String, from: SceneActivationState?, to: SceneActivationState?, reason: String)
    /// Something else of the app's status may have changed; observers that show it read it again.
    case details(String)
}

/// Whoever follows the apps from outside the loop's owners: the control socket's watchers, the bus.
protocol AppObserver: AnyObject {
    func appChanged(_ change: AppChange)
}

/// The daemon's observers, told of each change in the order the model decided them. An observer must not feed
/// the model from `appChanged`: it is called while effects are being performed.
final class AppObservers {
    private var observers: [any AppObserver] = []

    func add(_ observer: any AppObserver) { observers.append(observer) }

    func remove(_ observer: any AppObserver) { observers.removeAll { $0 === observer } }

    func tell(_ change: AppChange) {
        for observer in observers { observer.appChanged(change) }
    }

    var isEmpty: Bool { observers.isEmpty }
}
