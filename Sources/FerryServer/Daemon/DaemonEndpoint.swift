#if canImport(Glibc)
import Glibc
#endif
import FerryStore
import FoundationEssentials

/// How the `ferry` command finds the daemon serving a data directory: the daemon holds an
/// exclusive lock on `DIR/_daemon.lock` for as long as it runs and writes `DIR/_daemon.json`
/// (mode 0600) with its URL and a random token that makes the bearer a server admin. Whoever
/// can read the file owns the directory anyway; the token only saves them a password. A
/// command that can take the lock knows no daemon runs and may work on the files directly.
public struct DaemonEndpoint: Sendable, Equatable {
    /// The daemon's REST base URL (loopback when it listens on every address).
    public var url: String
    /// The bearer token (`Authorization: Bearer …`).
    public var token: String
    /// The daemon's process ID.
    public var pid: Int32

    /// Why the endpoint cannot be published or found.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Another daemon serves the same data.
        case alreadyServed(String)
        /// The file system refused.
        case io(String)

        public var description: String {
            switch self {
            case .alreadyServed(let s), .io(let s): return s
            }
        }
    }

    /// The files' common prefix for a location: `DIR/_daemon` or `FILE.daemon`.
    public static func prefix(for location: DatabaseRegistry.Location) -> String {
        switch location {
        case .directory(let dir): return dir + "/_daemon"
        case .single(_, let path): return path + ".daemon"
        }
    }

    /// A lock held by a running daemon (released when the process ends, however it ends).
    public final class Lock: Sendable {
        let fd: Int32
        let prefix: String
        init(fd: Int32, prefix: String) {
            self.fd = fd
            self.prefix = prefix
        }
        /// Releases the lock and removes the endpoint file.
        public func release() {
            unlink(prefix + ".json")
            close(fd)
        }
    }

    /// Takes the lock for `prefix`; fails if another process holds it.
    public static func lock(_ prefix: String) throws(Failure) -> Lock {
        let fd = open(prefix + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot open \(prefix).lock: errno \(errno)") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            let who = (try? read(prefix)).map { " by process \($0.pid) at \($0.url)" } ?? ""
            throw .alreadyServed("these databases are already served\(who) (\(prefix).lock is locked)")
        }
        return Lock(fd: fd, prefix: prefix)
    }

    /// Writes the endpoint file under a held lock.
    public func publish(under lock: Lock) throws(Failure) {
        let o: JSONValue = .object(["url": .string(url), "token": .string(token), "pid": .int(Int64(pid))])
        do { try DurableFile.write(CanonicalJSON.encode(o) + [10], to: lock.prefix + ".json") } catch { throw .io(error.description) }
    }

    /// The running daemon's endpoint for `prefix`, or nil when none runs (the lock is free).
    public static func running(_ prefix: String) -> DaemonEndpoint? {
        let fd = open(prefix + ".lock", O_RDWR | O_CLOEXEC)
        if fd < 0 { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return try? read(prefix)
    }

    private static func read(_ prefix: String) throws -> DaemonEndpoint? {
        guard let data = FileManager.default.contents(atPath: prefix + ".json") else { return nil }
        let o = try JSONParser.parse(Array(data), sizeLimit: 1 << 16).objectValue
        guard let url = o?["url"]?.stringValue, let token = o?["token"]?.stringValue else { return nil }
        return DaemonEndpoint(url: url, token: token, pid: Int32(o?["pid"]?.intValue ?? 0))
    }

    /// A new random token (32 bytes, hex).
    public static func newToken() -> String {
        Hex.encode((0..<32).map { _ in UInt8.random(in: .min ... .max) })
    }
}
