import FerryStore
import Foundation

/// Where a daemon keeps its managed replications: one JSON file (`DIR/_replicator.json`, or
/// `FILE.replicator.json` beside a single `--db` file), mode 0600 because it holds peer
/// credentials. Written whole to a temporary file, synced and renamed, so a daemon killed
/// at any moment leaves either the old file or the new one.
public struct ReplicationStore: Sendable {
    /// One replication document with its revision and journal.
    public struct Entry: Sendable, Equatable {
        /// The document's revision, `N-hex`, bumped by every change of the spec.
        public var revision: String
        /// What the operator asked for.
        public var spec: ReplicationSpec
        /// What happened.
        public var journal: ReplicationJournal
        /// Whether this entry lives only as long as the process (`ferry serve --replicate`).
        public var transient = false

        /// An entry.
        public init(revision: String, spec: ReplicationSpec, journal: ReplicationJournal, transient: Bool = false) {
            self.revision = revision
            self.spec = spec
            self.journal = journal
            self.transient = transient
        }
    }

    /// Why the file cannot be used.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not a replications file.
        case malformed(String)
        /// The file system refused.
        case io(String)

        public var description: String {
            switch self {
            case .malformed(let s): return "malformed replications file: \(s)"
            case .io(let s): return s
            }
        }
    }

    /// The file's path.
    public let path: String

    /// The file at `path` (it need not exist).
    public init(path: String) { self.path = path }

    /// The replications file of data directory `directory`.
    public init(dataDirectory directory: String) { path = directory + "/_replicator.json" }

    /// Every stored entry, by ID; none when the file does not exist.
    public func load() throws(Failure) -> [String: Entry] {
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) { throw .io("cannot read \(path)") }
            return [:]
        }
        let root: JSONValue
        do { root = try JSONParser.parse(Array(data), sizeLimit: 256 << 20) } catch { throw .malformed("\(error)") }
        guard let all = root.objectValue?["replications"]?.objectValue else { throw .malformed("no \"replications\" object") }
        var out: [String: Entry] = [:]
        for (id, v) in all {
            guard let o = v.objectValue, let rev = o["_rev"]?.stringValue, let spec = o["spec"]?.objectValue else {
                throw .malformed("replication \(id.debugDescription) lacks _rev or spec")
            }
            do {
                out[id] = Entry(revision: rev, spec: try ReplicationSpec(id: id, json: spec), journal: ReplicationJournal(json: o["journal"] ?? .null))
            } catch {
                throw .malformed("replication \(id.debugDescription): \(error.reason)")
            }
        }
        return out
    }

    /// Replaces the file with `entries` (transient ones left out).
    public func save(_ entries: [String: Entry]) throws(Failure) {
        var all: [String: JSONValue] = [:]
        for (id, e) in entries where !e.transient {
            all[id] = .object(["_rev": .string(e.revision), "spec": .object(e.spec.storedJSON), "journal": e.journal.json])
        }
        let bytes = CanonicalJSON.encode(.object(["replications": .object(all)])) + [10]
        try Self.writeDurably(bytes, to: path)
    }

    /// Writes `bytes` to `path` by a synced temporary file and a rename, then syncs the directory.
    static func writeDurably(_ bytes: [UInt8], to path: String) throws(Failure) {
        let tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot write \(tmp): errno \(errno)") }
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { b in b.baseAddress.map { write(fd, $0 + off, b.count - off) } ?? 0 }
            if n < 0 {
                if errno == EINTR { continue }
                close(fd)
                throw .io("cannot write \(tmp): errno \(errno)")
            }
            off += n
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw .io("cannot sync \(tmp): errno \(errno)")
        }
        close(fd)
        guard rename(tmp, path) == 0 else { throw .io("cannot rename \(tmp) to \(path): errno \(errno)") }
        let dir = open((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    /// The revision after `revision`: the generation plus one and a random suffix.
    static func nextRevision(after revision: String?) -> String {
        let generation = revision.flatMap { $0.split(separator: "-").first.flatMap { Int($0) } } ?? 0
        return "\(generation + 1)-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }
}
