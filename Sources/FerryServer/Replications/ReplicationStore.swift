import FerryStore
import FoundationEssentials

/// Where a daemon keeps its managed replications: one JSON file (`DIR/_replicator.json`, or
/// `FILE.replicator.json` beside a single `--db` file), mode 0600 because it holds peer
/// credentials, replaced whole (`DurableFile`).
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
        do { try DurableFile.write(CanonicalJSON.encode(.object(["replications": .object(all)])) + [10], to: path) } catch {
            throw .io(error.description)
        }
    }

    /// The revision after `revision`: the generation plus one and a random suffix.
    public static func nextRevision(after revision: String?) -> String {
        let generation = revision.flatMap { $0.split(separator: "-").first.flatMap { Int($0) } } ?? 0
        return "\(generation + 1)-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }
}
