import Glibc

/// Swap for the tests of this process: the machine's own where it has some, else one zram device made at the first
/// use and removed when the process exits. Tests of several suites run side by side, and a device one of them
/// removed (`swapoff`) would pull another's paged-out memory back into RAM in the middle of its checks; one device
/// for the process's whole life takes nothing away from anyone.
public enum TestSwap {
    /// Whether anonymous memory can leave RAM now.
    public static var on: Bool { state.on }

    private static let state: (on: Bool, device: Int?) = prepare()

    private static func prepare() -> (on: Bool, device: Int?) {
        if machineHasSwap() { return (true, nil) }
        _ = system("modprobe zram 2>/dev/null")
        guard let file = fopen("/sys/class/zram-control/hot_add", "r") else { return (false, nil) }
        var line = [CChar](repeating: 0, count: 32)
        let read = fgets(&line, Int32(line.count), file) != nil
        fclose(file)
        let text = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard read, let device = Int(text) else { return (false, nil) }
        let made = system("echo 2G > /sys/block/zram\(device)/disksize && mkswap /dev/zram\(device) >/dev/null && swapon /dev/zram\(device)") == 0
        atexit { TestSwap.remove() }
        return (made && machineHasSwap(), device)
    }

    private static func remove() {
        guard let device = state.device else { return }
        _ = system("swapoff /dev/zram\(device) 2>/dev/null; echo \(device) > /sys/class/zram-control/hot_remove")
    }

    private static func machineHasSwap() -> Bool {
        guard let file = fopen("/proc/swaps", "r") else { return false }
        defer { fclose(file) }
        var lines = 0
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, Int32(line.count), file) != nil { lines += 1 }
        return lines > 1
    }
}
