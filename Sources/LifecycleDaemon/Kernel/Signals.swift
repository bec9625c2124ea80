import CSupport
import Glibc

/// Sends `signal` to every process in the group `pgid`.
/// Returns false when the group no longer exists (ESRCH): that is not an error here, since the
/// caller learns of the exit from its child watch. Other failures (EPERM) are thrown.
@discardableResult
public func sendSignal(_ signal: Int32, toProcessGroup pgid: pid_t) throws(SystemError) -> Bool {
    // kill(0) signals our own group and kill(-1) every process we may signal.
    precondition(pgid > 1, "not an app's process group: \(pgid)")
    if kill(-pgid, signal) == 0 { return true }
    let code = errno
    if code == ESRCH { return false }
    throw SystemError(operation: "send signal \(signal) to process group \(pgid)", errno: code)
}

/// Blocks `signals` in the calling thread (and in threads it creates later). Call first thing in
/// main, before any thread exists: a signalfd or sd-event signal source only sees signals that
/// every thread blocks.
public func blockSignals(_ signals: [Int32]) {
    let result = cs_block_signals(signals, Int32(signals.count))
    precondition(result == 0, "invalid signal number in \(signals)")
}

/// A pidfd for `pid`: it stays bound to this process even if the pid is reused once reaped,
/// and polls readable when the process exits (not when it stops).
func openPidFD(_ pid: pid_t) throws(SystemError) -> FileDescriptor {
    FileDescriptor(owning: try retryingEINTR("open a pidfd for \(pid)") { cs_pidfd_open(pid) }, path: "pidfd of \(pid)")
}
