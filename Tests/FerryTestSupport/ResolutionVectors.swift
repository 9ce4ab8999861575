import Foundation

/// Protocol/vectors/resolutions.json (Protocol/revisions.md, "Storing a resolution"): two
/// branches of a document and the leaves every store must hold once the default rule resolved
/// them. Made by make_resolution_vectors.py, independently of Ferry's Swift.
public struct ResolutionVector: Decodable, Sendable, CustomStringConvertible {
    /// One revision of a branch, oldest first in `branchA`/`branchB`.
    public struct Revision: Decodable, Sendable {
        /// The revision ID.
        public let rev: String
        /// Its parent (nil for a root).
        public let parent: String?
        /// Whether it is a tombstone.
        public let deleted: Bool
        /// Its body as JSON text (sorted keys, as canonical JSON orders them).
        public let bodyJSON: String

        enum CodingKeys: String, CodingKey { case rev, parent, deleted, body }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            rev = try c.decode(String.self, forKey: .rev)
            parent = try c.decodeIfPresent(String.self, forKey: .parent)
            deleted = try c.decode(Bool.self, forKey: .deleted)
            let raw = try c.decode(AnyJSON.self, forKey: .body)
            bodyJSON = raw.text
        }
    }

    /// The case's name.
    public let name: String
    /// The shared history, oldest first.
    public let base: [Revision]
    /// One branch from the base's last revision, oldest first.
    public let branchA: [Revision]
    /// The other branch.
    public let branchB: [Revision]
    /// Revision → "live", "deleted" or "closed": the leaves after resolution.
    public let leaves: [String: String]
    /// The current revision after resolution.
    public let current: String

    public var description: String { name }

    /// The kind the vectors name a leaf by: "closed", "deleted" or "live".
    public static func kind(deleted: Bool, closed: Bool) -> String {
        closed ? "closed" : deleted ? "deleted" : "live"
    }

    /// `rev`'s history (newest first) as a replicator sends it: the branch up to `rev`, then the base.
    public func history(of branch: [Revision]) -> [String] {
        (base + branch).reversed().map(\.rev)
    }

    /// Every vector of the file (empty if it is missing: a test over them then checks nothing
    /// and says so).
    public static func all() -> [ResolutionVector] {
        struct File: Decodable { let vectors: [ResolutionVector] }
        let url = packageRoot.appendingPathComponent("Protocol/vectors/resolutions.json")
        guard let data = try? Data(contentsOf: url), let file = try? JSONDecoder().decode(File.self, from: data) else { return [] }
        return file.vectors
    }
}

/// Any JSON value, re-serialised with sorted keys (the vectors' bodies are small objects).
struct AnyJSON: Decodable {
    let text: String

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { text = "null" }
        else if let b = try? c.decode(Bool.self) { text = b ? "true" : "false" }
        else if let i = try? c.decode(Int64.self) { text = String(i) }
        else if let d = try? c.decode(Double.self) { text = String(d) }
        else if let s = try? c.decode(String.self) {
            let data = try JSONEncoder().encode(s)
            text = String(decoding: data, as: UTF8.self)
        } else if let a = try? c.decode([AnyJSON].self) { text = "[" + a.map(\.text).joined(separator: ",") + "]" }
        else {
            let o = try c.decode([String: AnyJSON].self)
            let keys = o.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            var parts: [String] = []
            for k in keys {
                guard let v = o[k] else { continue }
                parts.append(String(decoding: try JSONEncoder().encode(k), as: UTF8.self) + ":" + v.text)
            }
            text = "{" + parts.joined(separator: ",") + "}"
        }
    }
}
