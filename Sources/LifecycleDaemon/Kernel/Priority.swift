import Glibc
import LifecycleModel

/// The numbers behind each priority class, in one place.
extension PriorityClass {
    /// Android's ranks (docs/PLATFORM.md, "Priorities"): a foreground app is kept, background apps go
    /// first, and suspended ones before them.
    var oomScoreAdj: Int {
        switch self {
        case .foreground: 0
        case .background: 500
        case .suspended: 900
        }
    }

    /// The class whose CPU and IO weights apply. A suspended app keeps its background weights: a stopped or
    /// frozen process runs no code and issues no IO, so a weight of its own would change nothing while it is
    /// suspended, and would cost a write of each weight file on every suspend and another on every resume.
    var weightClass: PriorityClass {
        self == .suspended ? .background : self
    }

    /// cgroup2 cpu.weight and io.weight (default 100, range 1–10000).
    var cgroupWeight: Int {
        switch weightClass {
        case .foreground: 100
        case .background, .suspended: 20
        }
    }

    /// The memory protection of the class: an app's own `MemoryLow=` in the foreground, and none in the background
    /// or suspended, so that the kernel reclaims from hidden apps before it reclaims from what the user sees. It
    /// follows `weightClass`, so that it is written when the weights are.
    func memoryLow(_ protection: MemoryProtection) -> MemoryProtection {
        weightClass == .foreground ? protection : .bytes(0)
    }

    /// cgroup v1 cpu.shares (default 1024, minimum 2).
    var cpuShares: Int {
        switch weightClass {
        case .foreground: 1024
        case .background, .suspended: 128
        }
    }

    /// The nice value, used only where no cgroup controls the CPU.
    var niceValue: Int32 {
        switch weightClass {
        case .foreground: 0
        case .background, .suspended: 10
        }
    }
}

/// Per-process priority: the OOM killer's ranking, and nice where cgroups cannot weigh the CPU.
public enum ProcessPriority {
    /// Writes `oom_score_adj` for each member and, with `useNice` (no cgroup cpu control),
    /// renices the whole process group. Members that exit meanwhile are skipped. Returns the
    /// failures for the caller to log. Going back to foreground lowers both values, which
    /// needs CAP_SYS_RESOURCE and CAP_SYS_NICE (the daemon runs as root).
    /// `from`: the class applied before, when known; the nice value is left alone where it is the same.
    /// `kept`: the open files `oom_score_adj` is written through, when given.
    static func apply(
        _ cls: PriorityClass, from previous: PriorityClass? = nil, processGroup pgid: pid_t, members: [pid_t],
        useNice: Bool, procRoot: String = "/proc", kept: KeptKernelFiles? = nil
    ) -> [SystemError] {
        var failures: [SystemError] = []
        for pid in members {
            do {
                let path = "\(procRoot)/\(pid)/oom_score_adj", value = String(cls.oomScoreAdj)
                if let kept { try kept.write(path, value) } else { try writeKernelFile(path, value) }
            } catch where error.errno == ENOENT || error.errno == ESRCH {
                continue
            } catch {
                failures.append(error)
            }
        }
        if useNice && previous?.niceValue != cls.niceValue {
            // PRIO_PGRP sets every process of the group in one call.
            let which = __priority_which_t(PRIO_PGRP.rawValue)
            if setpriority(which, id_t(pgid), cls.niceValue) != 0 && errno != ESRCH {
                failures.append(SystemError(operation: "set nice \(cls.niceValue) on process group \(pgid)", errno: errno))
            }
        }
        return failures
    }
}
