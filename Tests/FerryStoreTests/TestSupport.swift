@testable import FerryStore
@_exported import FerryTestSupport
import Foundation


/// Tab-separated vector lines of a file in Protocol/vectors, comments skipped.
func vectorLines(_ name: String) throws -> [[String]] {
    let text = try String(contentsOf: packageRoot.appendingPathComponent("Protocol/vectors/\(name)"), encoding: .utf8)
    return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
}

/// Opens a fresh database in a new temp dir; keep the dir alive as long as the database.
func freshDatabase(_ options: DatabaseOptions = DatabaseOptions()) throws -> (Database, TempDir) {
    let dir = TempDir()
    return (try Database.open(at: dir.path("test.ferry"), options: options), dir)
}

func json(_ s: String) -> [UInt8] { Array(s.utf8) }

func rev(_ s: String) -> RevisionID {
    // Test literals are valid by construction; a bad one fails the test loudly.
    guard let r = try? RevisionID(s) else { fatalError("bad test revision \(s)") }
    return r
}

/// A deterministic generator (SplitMix64) so property tests can print and replay their seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Sends one revision of `id` from `a` to `b` the way a replicator would: the revision with its
/// history and body, inserted with `resolver`.
@discardableResult
func send(_ id: String, revision: RevisionID, from a: Database, to b: Database,
          resolver: ConflictResolver? = .default) throws -> InsertOutcome {
    guard let tree = try a.revisionTree(of: id), let node = tree.nodes[revision] else { throw StoreError.notFound }
    let history = tree.history(of: revision).map(\.description)
    return try b.insert(ReplicatedRevision(documentID: id, history: history, body: node.body ?? json("{}"),
                                           isDeleted: node.isDeleted), resolver: resolver)
}

/// Pushes the current revision of `id` from `a` to `b` (what Couchbase's push does).
@discardableResult
func pushCurrent(_ id: String, from a: Database, to b: Database, resolver: ConflictResolver? = .default) throws -> InsertOutcome {
    guard let cur = try a.revisionTree(of: id)?.current else { throw StoreError.notFound }
    return try send(id, revision: cur.revisionID, from: a, to: b, resolver: resolver)
}

/// Sends every leaf of `id` from `a` to `b`, lowest first.
func pushAllLeaves(_ id: String, from a: Database, to b: Database, resolver: ConflictResolver? = nil) throws {
    guard let tree = try a.revisionTree(of: id) else { return }
    for leaf in tree.leaves.reversed() {
        try send(id, revision: leaf.revisionID, from: a, to: b, resolver: resolver)
    }
}

/// What two trees must agree on: every revision with its parent, and each leaf's deleted flag
/// and body.
struct TreeShape: Equatable, CustomStringConvertible {
    var nodes: [String: String]
    var leaves: [String: String]
    init(_ t: RevisionTree) {
        nodes = Dictionary(uniqueKeysWithValues: t.nodes.map { ($0.key.description, $0.value.parent?.description ?? "-") })
        leaves = Dictionary(uniqueKeysWithValues: t.leaves.map {
            ($0.revisionID.description, ($0.isDeleted ? "deleted " : "") + String(decoding: $0.body ?? [], as: UTF8.self))
        })
    }
    var description: String { "nodes \(nodes.sorted { $0.key < $1.key }) leaves \(leaves.sorted { $0.key < $1.key })" }
}
