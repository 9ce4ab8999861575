import ArgumentParser
import CJemalloc
import FoundationEssentials
import Glibc

/// What `ferry` exits with (`ferry sync --help`, README): 0 done, 1 failed, 2 usage,
/// 3 unreachable, 4 authentication refused, 5 TLS refused.
enum ExitStatus: Int32 {
    /// Everything asked for was done.
    case done = 0
    /// Something failed: the replication, or some of its documents (named on standard error).
    case failed = 1
    /// The command line was wrong (an unknown option, a bad value, options that exclude each other).
    case usage = 2
    /// The peer could not be reached within `--timeout` / `--max-attempts`.
    case unreachable = 3
    /// The peer refused our credentials (HTTP 401 or 403).
    case authenticationRefused = 4
    /// TLS failed: the peer's certificate was refused (pin, CA, host name) or it refused ours.
    case tlsRefused = 5

    var exitCode: ExitCode { ExitCode(rawValue) }
}

extension Ferry {
    /// ArgumentParser's `main`, except that a usage error exits 2 (the shell convention, and what
    /// `ferry sync --help` documents) rather than its default `EX_USAGE` (64).
    static func main() async {
        // Freed memory goes back to the system within a second rather than jemalloc's 10 s:
        // `ferry serve`'s peak resident size stays near what it holds (docs/performance.md).
        _ = ferry_jemalloc_return_memory_within(1000)
        do {
            var command = try await asyncParseAsRoot(nil)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            let text = fullMessage(for: error)
            if !text.isEmpty { Terminal.write(text + "\n", to: STDERR_FILENO) }
            Glibc.exit(ExitStatus.usage.rawValue)
        }
    }
}
