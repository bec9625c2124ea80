import Glibc

/// Who may use the changing verbs of the control socket: root, the daemon's own user, and the members of
/// `[Control] Group=`. Decided from the peer's credentials as the kernel reports them (SO_PEERCRED: its
/// effective uid and gid at connect time) and the group database's memberships of that uid (getgrouplist),
/// never from anything the client sends. The group is looked up at each request, so that a membership
/// change, or a group created after the daemon started, applies to the next request.
///
/// The same peers are the control socket's privileged ones: their requests are served before any other's
/// (`ControlServer`), and they see every app's saved scene state.
struct ControlAccess {
    let daemonUID: uid_t
    /// `[Control] Group=`: a name or a number; nil for none.
    let group: String?
    /// Says that the group cannot be looked up; called at each request it fails for.
    var warn: (String) -> Void = { Log.warning($0) }

    enum Decision: Equatable {
        /// Allowed, and why ("root", "the daemon's user", "member of group 'x' (its gid)"…), for the log.
        case allowed(String)
        /// Refused; the sentence names who may, and how access is granted.
        case refused(String)

        var isAllowed: Bool {
            if case .allowed = self { return true }
            return false
        }
    }

    func mayChange(uid: uid_t, gid: gid_t, verb: String) -> Decision {
        if uid == 0 { return .allowed("root") }
        if uid == daemonUID { return .allowed("the daemon's user") }
        let refusal = Decision.refused("permission denied: \(verb) is for \(whoMay) (you are uid \(uid)); \(howToGrant)")
        guard let group else { return refusal }
        let groupID: gid_t
        do {
            guard let credentials = try lookupCredentials(user: nil, group: group) else { return refusal }
            groupID = credentials.gid
        } catch {
            warn("[Control] Group=\(group): \(error); only root and uid \(daemonUID) may change states")
            return refusal
        }
        if gid == groupID { return .allowed("its group is '\(group)'") }
        // A uid with no passwd entry has no memberships (lookupCredentials would make its number its group).
        if let user = try? lookupCredentials(user: String(uid), group: nil), user.userName != nil,
           user.groups.contains(groupID) {
            return .allowed("member of group '\(group)'")
        }
        return refusal
    }

    /// "root or uid 1000 (the daemon's user) or members of group 'lifecycle'".
    var whoMay: String {
        var who = ["root"]
        if daemonUID != 0 { who.append("uid \(daemonUID) (the daemon's user)") }
        if let group { who.append("members of group '\(group)'") }
        return who.joined(separator: " or ")
    }

    /// The refusal's second half: the administrator's way to let someone in.
    var howToGrant: String {
        guard let group else {
            return "to let others change states, name a group in [Control] Group= of lifecycled.conf and add them to it"
        }
        return "[Control] Group=\(group) in lifecycled.conf grants access: ask to be added to that group"
    }

    /// Whether a peer sees an app's saved scene state: those who may change states, and the app itself. An app
    /// is known to the kernel only by the uid it runs as (`User=`; the daemon's own when unset), so a peer of
    /// that uid is the app: it could read the app's memory anyway. `appUID` nil: the app's user is unknown, only
    /// the privileged see it.
    static func seesSavedState(peerUID: uid_t, privileged: Bool, appUID: uid_t?) -> Bool {
        privileged || peerUID == appUID
    }
}
