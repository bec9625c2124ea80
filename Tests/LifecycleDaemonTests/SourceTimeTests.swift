import CSupport
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The UTC offsets of a compiled zone file (RFC 8536, TZif): enough to ask "what offset at this instant"
/// without setting the process's TZ (which every other test thread would see). Reads the 64-bit data of
/// version 2+ files; instants after the last transition keep its offset (Debian's files are "fat", with
/// explicit transitions up to 2037, so the 2026 dates used here are covered).
private struct ZoneFile {
    private var transitions: [Int64] = []
    private var typeOfTransition: [Int] = []
    private var offsets: [Int64] = []

    init(_ path: String) throws {
        let bytes = try SourceFixture.fileBytes(path)
        func u32(_ at: Int) -> UInt32 { bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        func i64(_ at: Int) -> Int64 { Int64(bitPattern: bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) }) }
        guard bytes.count > 44, bytes[0..<4].elementsEqual("TZif".utf8) else { throw SystemError(operation: "parse \(path)", errno: EINVAL) }
        func counts(_ at: Int) -> (isut: Int, isstd: Int, leap: Int, time: Int, type: Int, char: Int) {
            (Int(u32(at + 20)), Int(u32(at + 24)), Int(u32(at + 28)), Int(u32(at + 32)), Int(u32(at + 36)), Int(u32(at + 40)))
        }
        var header = 0
        var timeSize = 4
        if bytes[4] >= UInt8(ascii: "2") {
            let v1 = counts(0)
            header = 44 + v1.time * 4 + v1.time + v1.type * 6 + v1.char + v1.leap * 8 + v1.isstd + v1.isut
            timeSize = 8
        }
        let c = counts(header)
        var at = header + 44
        for _ in 0..<c.time {
            transitions.append(timeSize == 8 ? i64(at) : Int64(Int32(bitPattern: u32(at))))
            at += timeSize
        }
        for _ in 0..<c.time {
            typeOfTransition.append(Int(bytes[at]))
            at += 1
        }
        for _ in 0..<c.type {
            offsets.append(Int64(Int32(bitPattern: u32(at))))
            at += 6
        }
    }

    func utcOffset(at instant: Int64) -> Int64 {
        guard let last = transitions.lastIndex(where: { $0 <= instant }) else { return offsets[0] }
        return offsets[typeOfTransition[last]]
    }
}

/// Seconds since the epoch of a UTC date and time.
private func utc(_ year: Int32, _ month: Int32, _ day: Int32, _ hour: Int32 = 0, _ minute: Int32 = 0) -> Int64 {
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = month - 1
    parts.tm_mday = day
    parts.tm_hour = hour
    parts.tm_min = minute
    return Int64(timegm(&parts))
}

extension SourceTests {
    @Suite struct LocalMidnightComputation {
        private func next(_ zone: String, after now: Int64) throws -> Int64 {
            let file = try ZoneFile("/usr/share/zoneinfo/" + zone)
            return LocalMidnight.next(after: now, utcOffset: file.utcOffset)
        }

        @Test func anOrdinaryDayEndsAtLocalMidnight() throws {
            // 2026-03-20 12:00 CET is 11:00Z; midnight CET is 23:00Z.
            #expect(try next("Europe/Berlin", after: utc(2026, 3, 20, 11)) == utc(2026, 3, 20, 23))
            #expect(try next("Etc/UTC", after: utc(2026, 12, 2, 14, 41)) == utc(2026, 12, 3))
            // At midnight exactly, the next one is a day later.
            #expect(try next("Etc/UTC", after: utc(2026, 12, 3)) == utc(2026, 12, 4))
        }

        @Test func theSpringForwardDayIs23HoursLong() throws {
            // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00Z).
            #expect(try next("Europe/Berlin", after: utc(2026, 3, 28, 11)) == utc(2026, 3, 28, 23))
            // From the start of that day (00:00 CET = 23:00Z the day before) to its end (00:00 CEST = 22:00Z): 23 h.
            let start = utc(2026, 3, 28, 23)
            let end = try next("Europe/Berlin", after: start)
            #expect(end == utc(2026, 3, 29, 22))
            #expect(end - start == 23 * 3600)
        }

        @Test func theFallBackDayIs25HoursLong() throws {
            // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00Z).
            let start = utc(2026, 10, 24, 22)  // 00:00 CEST
            let end = try next("Europe/Berlin", after: start)
            #expect(end == utc(2026, 10, 25, 23))  // 00:00 CET
            #expect(end - start == 25 * 3600)
        }

        @Test func whereMidnightIsSkippedTheDayStartsAtTheJump() throws {
            // Havana, 2026-03-08: at 00:00 CST (05:00Z) the clocks show 01:00 CDT; 00:00 never happens.
            #expect(try next("America/Havana", after: utc(2026, 3, 7, 17)) == utc(2026, 3, 8, 5))
        }

        @Test func whereMidnightHappensTwiceTheFirstCounts() throws {
            // Havana, 2026-11-01: at 01:00 CDT (05:00Z) the clocks go back to 00:00 CST.
            let first = try next("America/Havana", after: utc(2026, 10, 31, 16))
            #expect(first == utc(2026, 11, 1, 4))  // 00:00 CDT
            // The second 00:00 (05:00Z) is the same date: the next day change is 2026-11-02 00:00 CST.
            #expect(try next("America/Havana", after: first) == utc(2026, 11, 2, 5))
        }

        @Test func aFallBackFromMidnightToTheDayBeforeStillEndsThatDayOnce() throws {
            // Santiago, 2026-04-05: at 00:00 -03 (03:00Z) the clocks show 23:00 -04 on the 4th again.
            #expect(try next("America/Santiago", after: utc(2026, 4, 4, 15)) == utc(2026, 4, 5, 4))
        }

        /// What the daemon uses in production: localtime_r from /etc/localtime. Off when TZ overrides the machine's
        /// zone, or when /etc/localtime is missing (a bare container).
        @Test(.enabled(if: getenv("TZ") == nil, "TZ is set: the C library does not use /etc/localtime"),
              .enabled(if: access("/etc/localtime", R_OK) == 0, "no /etc/localtime to compare with"))
        func theCLibraryOffsetIsTheMachinesZone() throws {
            let zone = try ZoneFile("/etc/localtime")
            for instant in [utc(2026, 1, 15), utc(2026, 7, 15)] {
                #expect(LocalMidnight.systemUTCOffset(at: instant) == zone.utcOffset(at: instant))
            }
        }
    }

    /// Serialized: one test sets the clock, which fires every cancel-on-set timer, the other tests' too.
    @Suite(.serialized) struct TimeChange {
        /// Real: a timerfd armed one second ahead expires, and the wrapper says so (the midnight path, without
        /// moving the clock to midnight).
        @Test func theTimerWrapperReportsExpiry() throws {
            let fd = cs_realtime_timer_open()
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(cs_realtime_timer_consume(fd) == CS_TIMER_NOTHING)
            #expect(cs_realtime_timer_arm(fd, LocalMidnight.wallClockNow() + 1) == 0)
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&poller, 1, 3000) == 1)
            #expect(cs_realtime_timer_consume(fd) == CS_TIMER_EXPIRED)
        }

        /// Real, and machine-wide: sets CLOCK_REALTIME to what it already reads, which the kernel counts as a
        /// setting (TFD_TIMER_CANCEL_ON_SET fires) while the time stays put. The value written is the time read
        /// plus the CLOCK_MONOTONIC time elapsed between the read and the write, so the clock ends within well
        /// under a microsecond of where it was. Every other cancel-on-set timer on the machine (a running
        /// lifecycled's, systemd's) sees a clock change too. Time namespaces cannot help: they offset only the
        /// monotonic and boot clocks, never CLOCK_REALTIME.
        @Test(.enabled(if: SourceFixture.hasCapability(25), "needs CAP_SYS_TIME"))
        func settingTheClockToWhatItReadsIsNoSignificantChangeButRearms() throws {
            let harness = try SourceHarness { _ in
                var config = SourceFixture.sourcesOff()
                config.timeChange = true
                return config
            }
            var results: [Int32] = []
            // Ten settings in a row, as a virtual machine's clock discipline makes them: none moves the clock.
            let completed = try harness.run([
                .act {
                    for _ in 0..<10 {
                        var wall = timespec(), before = timespec(), after = timespec()
                        clock_gettime(CLOCK_MONOTONIC, &before)
                        clock_gettime(CLOCK_REALTIME, &wall)
                        clock_gettime(CLOCK_MONOTONIC, &after)
                        var nanoseconds = Int64(wall.tv_nsec) + (Int64(after.tv_sec) - Int64(before.tv_sec)) * 1_000_000_000
                            + Int64(after.tv_nsec) - Int64(before.tv_nsec)
                        wall.tv_sec += Int(nanoseconds / 1_000_000_000)
                        nanoseconds %= 1_000_000_000
                        wall.tv_nsec = Int(nanoseconds)
                        results.append(clock_settime(CLOCK_REALTIME, &wall))
                        usleep(20_000)
                    }
                },
                .wait(.milliseconds(500)),
            ])

            #expect(results == Array(repeating: 0, count: 10))
            #expect(completed)
            #expect((harness.sources.wakeups["timer"] ?? 0) >= 1, "the kernel reported the settings")
            #expect(harness.posts.filter { $0.type == "significantTimeChange" }.isEmpty, "steps under a second are not posted")
            let line = try #require(harness.sources.descriptions.first)
            #expect(line.hasPrefix("significantTimeChange: timerfd cancel-on-set, next midnight "), "re-armed: \(line)")
        }

        @Test func aStepOfASecondOrMoreEitherWayIsSignificantAndSmallerOnesAreNot() {
            let base = Duration.seconds(1_700_000_000)
            #expect(!TimeChangeSource.isSignificant(from: base, to: base))
            #expect(!TimeChangeSource.isSignificant(from: base, to: base + .microseconds(500)))
            #expect(!TimeChangeSource.isSignificant(from: base, to: base - .milliseconds(999)))
            #expect(TimeChangeSource.isSignificant(from: base, to: base + .seconds(1)))
            #expect(TimeChangeSource.isSignificant(from: base, to: base - .seconds(3600)), "daylight saving time, or a step back")
            // Small steps add up against the offset at the last post.
            let drifted = (1...2_100).reduce(base) { offset, _ in offset + .microseconds(500) }
            #expect(TimeChangeSource.isSignificant(from: base, to: drifted))
        }

        /// Real inotify on a temporary root whose `localtime` the config names, holding real zone files.
        @Test func replacingOrRewritingTheLocaltimeFilePostsTimeZone() throws {
            let berlin = try SourceFixture.fileBytes("/usr/share/zoneinfo/Europe/Berlin")
            let newYork = try SourceFixture.fileBytes("/usr/share/zoneinfo/America/New_York")
            let harness = try SourceHarness(prepare: { SourceFixture.rewrite($0 + "/localtime", bytes: berlin) }) { directory in
                var config = SourceFixture.sourcesOff()
                config.timeChange = true
                config.localtimePath = directory + "/localtime"
                return config
            }
            let path = harness.directory + "/localtime"
            func zoneChanges(_ posts: [SourcePost]) -> Int { posts.filter { $0.payload == ["reason": "timeZone"] }.count }

            let completed = try harness.run([
                .act { SourceFixture.replaceByRename(path, bytes: newYork) },              // as a package manager does
                .waitFor { zoneChanges($0) == 1 },
                .act { SourceFixture.rewrite(path, bytes: berlin) },                       // in place, as `cp` does
                .waitFor { zoneChanges($0) == 2 },
                .act {                                                       // only metadata, then the same bytes
                    chmod(path, 0o600)
                    SourceFixture.rewrite(path, bytes: berlin)
                },
                .wait(.milliseconds(300)),
                .act {                                                       // a symlink replaced, as timedatectl does
                    symlink("/usr/share/zoneinfo/Asia/Tokyo", path + ".link")
                    rename(path + ".link", path)
                },
                .waitFor { zoneChanges($0) == 3 },
                .act {                                                       // the same zone again
                    symlink("/usr/share/zoneinfo/Asia/Tokyo", path + ".link")
                    rename(path + ".link", path)
                },
                .wait(.milliseconds(300)),
            ])

            #expect(completed)
            #expect(zoneChanges(harness.posts) == 3, "\(harness.posts)")
            #expect(harness.sources.descriptions.first?.contains("\(path) via inotify") == true)
        }

        @Test func aMissingDirectoryTurnsOnlyTheZoneWatchOff() throws {
            let harness = try SourceHarness { directory in
                var config = SourceFixture.sourcesOff()
                config.timeChange = true
                config.localtimePath = directory + "/absent/localtime"
                return config
            }
            let line = try #require(harness.sources.descriptions.first)
            #expect(line.hasPrefix("significantTimeChange: timerfd cancel-on-set, next midnight "))
            #expect(line.contains("/absent/localtime off (Failed to watch \(harness.directory)/absent with inotify: No such file or directory)"), "\(line)")
        }
    }
}
