import LifectlCommand

// lifectl: control lifecycled. Kept light (Glibc and the protocol module, no Foundation)
// because it is run often and from scripts. The command line is parsed in LifectlCommand, performed in Run.swift.

do throws(UsageError) {
    let (invocation, command) = try parse(Array(CommandLine.arguments.dropFirst()))
    run(invocation, command)
} catch {
    fail(error.message, status: error.status, lines: true)
}
