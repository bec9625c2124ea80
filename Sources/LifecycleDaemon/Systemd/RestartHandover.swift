import Glibc

extension CgroupSupport {
    /// Before handing the apps over at `systemctl restart`: systemd starts the next daemon in the unit's own
    /// cgroup, which is the delegated root where there is no `DelegateSubgroup=`, and the kernel refuses (EBUSY)
    /// to put a process in a cgroup that has controllers enabled for its children while they hold processes (the
    /// no-internal-process rule). systemd would then fail the start with status 219/CGROUP and leave the apps
    /// without a daemon. So the controllers this daemon enabled in the root are disabled again. The apps keep
    /// their cgroups, their processes and `cgroup.freeze` (a core file, so a frozen app stays frozen); they lose
    /// `cpu.weight` and `io.weight` until the next daemon enables the controllers again (it moves into
    /// `supervisor/` first) and re-applies each re-adopted app's priority. With `DelegateSubgroup=supervisor`
    /// (systemd >= 254) the next daemon starts in the leaf and this is not needed, but harmless.
    ///
    /// Returns the controllers disabled (none when not delegated, or none enabled); throws when the root
    /// refused, in which case the next daemon could not start beside the apps.
    func releaseControllersForNextStart() throws(SystemError) -> [String] {
        guard let subtree = delegatedSubtree else { return [] }
        let file = subtree.root + "/cgroup.subtree_control"
        let enabled = cgroupFileWords(file).sorted()
        guard !enabled.isEmpty else { return [] }
        try writeKernelFile(file, enabled.map { "-" + $0 }.joined(separator: " "))
        return enabled
    }
}
