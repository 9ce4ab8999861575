import Foundation

/// The package root, found from this file's path (Tests/FerryTestSupport/ is two levels down).
public let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Bytes from a hex string (pairs of hex digits, no separators).
public func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(s.utf8.count / 2)
    var it = s.utf8.makeIterator()
    func nib(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
    while let a = it.next(), let b = it.next() { out.append(nib(a) << 4 | nib(b)) }
    return out
}

/// The `name: hex` golden vectors of a file in Protocol/vectors, by name (`#` lines skipped);
/// empty if the file is missing, so a test that needs a vector fails on its absence.
public func namedHexVectors(_ file: String) -> [String: [UInt8]] {
    let url = packageRoot.appendingPathComponent("Protocol/vectors/\(file)")
    guard let text = try? String(contentsOf: url, encoding: .utf8) else { return [:] }
    var out: [String: [UInt8]] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else { continue }
        out[String(parts[0])] = hexBytes(parts[1].trimmingCharacters(in: .whitespaces))
    }
    return out
}

/// A fresh temporary directory, removed with everything in it when the value is dropped.
public final class TempDir: Sendable {
    /// The directory.
    public let url: URL
    /// Creates it under the system's temporary folder.
    public init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-test-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    /// The path of `name` inside it.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Runs blocking work (waiting for a process, reading its pipe) on its own thread, so the
/// cooperative pool that runs the tests never blocks.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { c in Thread { c.resume(returning: body()) }.start() }
}

/// A small tmpfs, mounted for one test (root only) and unmounted with it.
public final class SmallFilesystem: Sendable {
    let dir = TempDir()
    /// Where it is mounted.
    public var path: String { dir.url.path }

    /// Mounts a tmpfs of that size on a new temporary directory.
    public init(megabytes: Int) throws {
        try Self.mount(["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", dir.url.path])
    }

    /// Makes it bigger: space freed.
    public func grow(to megabytes: Int) throws {
        try Self.mount(["-o", "remount,size=\(megabytes)m", dir.url.path])
    }

    deinit { _ = try? Self.run("/bin/umount", ["-l", dir.url.path]) }

    /// Whether this process may mount one (root, with `mount`).
    public static var available: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount") }

    private static func mount(_ args: [String]) throws {
        let status = try run("/bin/mount", args)
        guard status == 0 else { throw MountFailed(arguments: args, status: status) }
    }

    private static func run(_ tool: String, _ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// `mount` exited with a failure.
public struct MountFailed: Error {
    /// What `mount` was given.
    public let arguments: [String]
    /// Its exit status.
    public let status: Int32
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; whether it held. For what a
/// test cannot be told of directly (another process's file, a daemon's background retry).
public func eventually(_ seconds: Double = 60, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
