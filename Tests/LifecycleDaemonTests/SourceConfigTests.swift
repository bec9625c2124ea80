import LifecycleModel
import Testing
@testable import LifecycleDaemon

extension SourceTests {
    @Suite struct Configuration {
        @Test func everySourcesKeyIsParsed() {
            let text = """
                [Sources]
                TimeChange=no
                LocaleChange=off
                Battery=0
                MemoryPressure=False
                UserDefaults=yes
                LocaltimeFile=/run/tz/localtime
                LocaleFiles=/etc/locale.conf "/opt/my locale/locale"
                PowerSupplyDirectory=/tmp/power_supply
                PressureFile=/sys/fs/cgroup/lifecycled/memory.pressure
                PressureTrigger=full  50000   2000000
                """

            let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")

            #expect(diagnostics == [])
            var expected = SourcesConfig()
            expected.timeChange = false
            expected.locale = false
            expected.battery = false
            expected.memoryPressure = false
            expected.userDefaults = true
            expected.localtimePath = "/run/tz/localtime"
            expected.localeFiles = ["/etc/locale.conf", "/opt/my locale/locale"]
            expected.powerSupplyPath = "/tmp/power_supply"
            expected.pressureFile = "/sys/fs/cgroup/lifecycled/memory.pressure"
            expected.pressureTrigger = "full 50000 2000000"
            #expect(daemon.sources == expected)
            #expect(daemon.defaults == AppDefaults())
        }

        @Test func badValuesAreErrorsThatKeepTheValueInEffect() {
            let text = """
                [Sources]
                Battery=maybe
                LocaltimeFile=etc/localtime
                LocaleFiles=/etc/locale.conf relative
                PressureTrigger=some 150000 100000
                PressureTrigger=some 150000 20000000
                PressureTrigger=sometimes 1 1000000
                """

            let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")

            #expect(daemon == DaemonConfig())
            #expect(diagnostics.map(\.description) == [
                "lifecycled.conf:2: Battery=: invalid value 'maybe' (expected yes or no), using yes",
                "lifecycled.conf:3: LocaltimeFile=: 'etc/localtime' is not an absolute path, using /etc/localtime",
                "lifecycled.conf:4: LocaleFiles=: 'relative' is not an absolute path, using /etc/locale.conf /etc/default/locale",
            ] + ["some 150000 100000", "some 150000 20000000", "sometimes 1 1000000"].enumerated().map { line, value in
                "lifecycled.conf:\(line + 5): PressureTrigger=: invalid pressure trigger '\(value)' (expected some or full,"
                    + " a stall and a window in microseconds, the window 500000 to 10000000 and the stall 1 to the window,"
                    + " e.g. 'some 150000 1000000'), using some 150000 2000000"
            })
        }

        @Test func anEmptyValueRestoresTheDefaultAndDefaultsKeysStillWork() {
            let text = "[Sources]\nLocaltimeFile=/x\nLocaltimeFile=\n[Defaults]\nRestartSec=2\n"

            let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")

            #expect(diagnostics == [])
            #expect(daemon.sources == SourcesConfig())
            #expect(daemon.defaults.policy.restartDelay == .seconds(2))
        }

        @Test func unknownSectionsNameSourcesAmongTheKnownOnes() {
            let (_, diagnostics) = ConfigLoader.parseDaemon(text: "[Source]\nBattery=no\n", file: "lifecycled.conf")

            #expect(diagnostics.map(\.description) == [
                "lifecycled.conf:1: unknown section [Source], ignoring it and the keys under it (known: [Adopt], [Control], [Defaults], [Display], [Memory], [NotificationTypes], [Sources])",
            ])
        }

        @Test func preferencesFileIsAnAbsolutePath() {
            let (app, diagnostics) = ConfigLoader.parseApp(
                name: "notes", text: "[App]\nExec=/bin/true\nPreferencesFile=/var/lib/notes/prefs.json\n",
                file: "apps/notes.conf", defaults: AppDefaults())
            #expect(diagnostics == [])
            #expect(app?.preferencesFile == "/var/lib/notes/prefs.json")

            let (relative, errors) = ConfigLoader.parseApp(
                name: "notes", text: "[App]\nExec=/bin/true\nPreferencesFile=prefs.json\n",
                file: "apps/notes.conf", defaults: AppDefaults())
            #expect(relative?.preferencesFile == nil)
            #expect(errors.map(\.description) == ["apps/notes.conf:3: PreferencesFile=: 'prefs.json' is not an absolute path, ignoring"])
        }
    }
}
