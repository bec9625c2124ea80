import Glibc

/// When the local day changes: the instant the `significantTimeChange` timer is armed at.
enum LocalMidnight {
    /// The first instant after `now` (seconds since the epoch) at which the local date is later than at `now`,
    /// in a zone where the offset from UTC at an instant is `utcOffset(instant)` seconds (east positive).
    ///
    /// Usually the next local 00:00. Where the clocks skip midnight (Havana springs forward from 00:00 to
    /// 01:00), it is the instant of the jump, when the clocks show 01:00; where midnight comes twice (Havana falls
    /// back from 01:00 to 00:00), the first one. A DST day is 23 or 25 hours long, which is why this is not
    /// `now + 24 h` and not a fixed local-to-UTC conversion with today's offset.
    ///
    /// Pure: the zone comes in as a function, so tests use zone files without touching the process's `TZ`.
    static func next(after now: Int64, utcOffset: (Int64) -> Int64) -> Int64 {
        func localDay(_ instant: Int64) -> Int64 {
            let local = instant + utcOffset(instant)
            return local >= 0 ? local / 86_400 : -((-local + 86_399) / 86_400)
        }
        let today = localDay(now)
        // Offsets lie within -12 h…+14 h, so three days on the local date is surely later.
        var before = now
        var after = now + 3 * 86_400
        // Binary search for the instant the date changes (about 18 steps). Were there a zone whose clocks fell
        // back across midnight onto the previous date, the search would still end at an instant where the date
        // moves on, just not necessarily the first.
        while after - before > 1 {
            let middle = before + (after - before) / 2
            if localDay(middle) > today { after = middle } else { before = middle }
        }
        return after
    }

    /// The C library's offset from UTC at `instant`: `TZ`, else `/etc/localtime`, as last read by `tzset()`.
    static func systemUTCOffset(at instant: Int64) -> Int64 {
        var time = time_t(instant)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int64(parts.tm_gmtoff)
    }

    /// `2026-12-03 00:00`, in local time as the C library has it.
    static func localDescription(_ instant: Int64) -> String {
        var time = time_t(instant)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return "@\(instant)" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min))"
    }

    /// The wall clock now, in whole seconds.
    static func wallClockNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }
}
