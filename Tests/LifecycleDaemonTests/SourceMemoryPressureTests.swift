import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

extension SourceTests {
    @Suite struct MemoryPressure {
        @Test func readingsAreParsedFromPSIText() {
            let text = """
                some avg10=12.50 avg60=3.01 avg300=0.75 total=987654321
                full avg10=4.25 avg60=1.00 avg300=0.20 total=123456
                """

            #expect(MemoryPressureReading.parse(text)
                == MemoryPressureReading(someAvg10: 12.5, fullAvg10: 4.25, someTotalMicroseconds: 987_654_321))
            // The CPU file before Linux 5.13 has no `full` line.
            #expect(MemoryPressureReading.parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
                == MemoryPressureReading(someAvg10: 0, fullAvg10: 0, someTotalMicroseconds: 0))
            #expect(MemoryPressureReading.parse("") == nil)
            #expect(MemoryPressureReading.parse("full avg10=1.00 avg60=0.00 avg300=0.00 total=5\n") == nil)
            #expect(MemoryPressureReading.parse("some avg10=x avg60=0.00 avg300=0.00 total=0\n") == nil)
        }

        /// Real: the trigger is written to /proc/pressure/memory and its fd watched for EPOLLPRI. A 2 s window is
        /// one the kernel accepts without CAP_SYS_RESOURCE. Real pressure is not produced: the test checks that the
        /// trigger registers and, over half a second without pressure, never wakes the loop (an fd whose trigger
        /// was refused would report EPOLLERR|EPOLLPRI at once, again and again).
        @Test(.enabled(if: access("/proc/pressure/memory", F_OK) == 0, "needs PSI"))
        func aTriggerTheKernelAcceptsIsWatchedAndQuiet() throws {
            let harness = try SourceHarness { _ in
                var config = SourceFixture.sourcesOff()
                config.memoryPressure = true
                config.pressureTrigger = "some 150000 2000000"
                return config
            }
            #expect(harness.sources.memoryPressureIsOn)
            #expect(harness.sources.descriptions[3] == "didReceiveMemoryWarning: PSI trigger 'some 150000 2000000' on /proc/pressure/memory")

            #expect(try harness.run([.wait(.milliseconds(500))]))
            #expect(harness.sources.wakeups["pressure"] == 0)
            #expect(harness.readings == [])
        }

        /// The default trigger's 1 s window needs CAP_SYS_RESOURCE; this container has root without it, so the
        /// kernel refuses it (EINVAL) and the source says why. With the capability it registers.
        @Test(.enabled(if: access("/proc/pressure/memory", F_OK) == 0, "needs PSI"))
        func theDefaultTriggerRegistersOrSaysWhyNot() throws {
            // The default's 2 s window registers everywhere; a 1 s window needs CAP_SYS_RESOURCE.
            let standard = try SourceHarness { _ in
                var config = SourceFixture.sourcesOff()
                config.memoryPressure = true
                return config
            }
            #expect(standard.sources.memoryPressureIsOn)
            #expect(standard.sources.descriptions[3] == "didReceiveMemoryWarning: PSI trigger 'some 150000 2000000' on /proc/pressure/memory")
            standard.sources.stop()

            let harness = try SourceHarness { _ in
                var config = SourceFixture.sourcesOff()
                config.memoryPressure = true
                config.pressureTrigger = "some 150000 1000000"
                return config
            }
            let line = harness.sources.descriptions[3]

            if SourceFixture.hasCapability(24) {  // CAP_SYS_RESOURCE
                #expect(harness.sources.memoryPressureIsOn)
                #expect(line == "didReceiveMemoryWarning: PSI trigger 'some 150000 1000000' on /proc/pressure/memory")
            } else {
                #expect(!harness.sources.memoryPressureIsOn)
                #expect(line.hasPrefix("didReceiveMemoryWarning: off (Failed to write the trigger 'some 150000 1000000'"
                    + " to /proc/pressure/memory: Invalid argument (a window that is not a multiple of 2 s needs CAP_SYS_RESOURCE"), "\(line)")
            }
        }

        @Test func aMissingPressureFileTurnsTheSourceOff() throws {
            let harness = try SourceHarness { directory in
                var config = SourceFixture.sourcesOff()
                config.memoryPressure = true
                config.pressureFile = directory + "/memory.pressure"
                return config
            }

            #expect(!harness.sources.memoryPressureIsOn)
            #expect(harness.sources.descriptions[3] == "didReceiveMemoryWarning: off (Failed to open \(harness.directory)/memory.pressure:"
                + " No such file or directory (no PSI: a kernel without CONFIG_PSI, or booted with psi=0))")
        }
    }
}
