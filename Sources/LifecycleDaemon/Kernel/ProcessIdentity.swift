import Glibc

/// What /proc says about who a process is, for the checks before the daemon takes on (and may signal) a process
/// that is not its child: its session and group, its environment, its real user.
enum ProcessIdentity {
    /// Whether `pid` leads its own session and process group, as every process the daemon spawns does (setsid), and
    /// is not in the daemon's own group.
    static func leadsSessionAndGroup(_ pid: pid_t) -> Bool {
        getpgid(pid) == pid && getsid(pid) == pid && getpgid(0) != pid
    }

    /// Whether `entry` ("KEY=value") is one of the entries of `pid`'s environment (/proc/PID/environ: what it was
    /// started with).
    static func environment(of pid: pid_t, contains entry: String, procRoot: String = "/proc") -> Bool {
        guard let bytes = try? withKernelFileBytes("\(procRoot)/\(pid)/environ", { Array($0) }) else { return false }
        let wanted = Array(entry.utf8)
        return bytes.split(separator: 0, omittingEmptySubsequences: true).contains { $0.elementsEqual(wanted) }
    }

    /// The real uid of `pid` (the Uid: line of /proc/PID/status), nil when it is gone.
    static func realUID(of pid: pid_t, procRoot: String = "/proc") -> uid_t? {
        guard let status = try? readKernelFile("\(procRoot)/\(pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
              let real = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first else { return nil }
        return uid_t(real)
    }
}

extension ProcessTable {
    /// Whether `pid` runs no code of its own until it stops: stopped already, gone, or in an uninterruptible wait
    /// (D, such as a parent waiting for a vfork child that was stopped before it exec'd) with SIGSTOP pending, which
    /// the kernel delivers before it returns to the process.
    static func stoppedOrStopping(_ pid: pid_t, procRoot: String = "/proc") -> Bool {
        guard let state = state(of: pid, procRoot: procRoot) else { return true }
        if noneRunning([pid], procRoot: procRoot) { return true }
        return state == "D" && stopPending(pid, procRoot: procRoot)
    }

    /// Whether SIGSTOP is pending for `pid`, for its thread or its whole process (SigPnd, ShdPnd of /proc/PID/status).
    static func stopPending(_ pid: pid_t, procRoot: String = "/proc") -> Bool {
        guard let status = try? readKernelFile("\(procRoot)/\(pid)/status") else { return false }
        let bit = UInt64(1) << UInt64(SIGSTOP - 1)
        return status.split(separator: "\n").contains { line in
            guard line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:"),
                  let mask = line.split(separator: "\t").last.flatMap({ UInt64($0, radix: 16) }) else { return false }
            return mask & bit != 0
        }
    }
}
