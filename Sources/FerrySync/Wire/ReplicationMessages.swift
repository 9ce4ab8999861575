import FerryHTTP
import FerryStore
import FoundationEssentials

/// The JSON bodies of the replication messages (Protocol/replication.md), encoded and decoded
/// without I/O. Decoding never traps: anything malformed is a `.protocolError` naming what is
/// wrong, and bodies over `maxBodySize` are refused before parsing.
enum ReplicationMessages {
    /// The largest `changes`/`proposeChanges` body (or response) parsed.
    static let maxBodySize = 16 << 20
    /// The longest document ID accepted from the wire (Couchbase Lite's limit).
    static let maxDocumentIDLength = 255

    /// One entry of a `changes` message: `[sequence, docID, revID, deleted?, bodySize?]`.
    struct ChangeEntry: Sendable, Equatable {
        var sequence: JSONValue
        var documentID: String
        var revisionID: String
        /// 0 live; 1 deleted; Sync Gateway's bits 2 (revoked) and 4 (removed) mean lost access.
        var deletedFlags: Int = 0
        var bodySize: Int? = nil

        var isDeleted: Bool { deletedFlags & 1 != 0 }
        /// Protocol/replication.md, "changes": values other than 0, 1 and 5 are access losses, not revisions to fetch.
        var isAccessLoss: Bool { ![0, 1, 5].contains(deletedFlags) }
    }

    /// One entry of a `proposeChanges` message: `[docID, revID, remoteParent?]`.
    struct ProposedChange: Sendable, Equatable {
        var documentID: String
        var revisionID: String
        var remoteParent: String?
    }

    /// What the receiver of `proposeChanges` says about one entry (Protocol/replication.md, "proposeChanges").
    enum ProposalStatus: Sendable, Equatable {
        /// Send it (0).
        case send
        /// Already there (304).
        case alreadyHave
        /// Conflict (409), with the receiver's current revision if it said.
        case conflict(current: String?)
        /// Any other status.
        case error(Int)
    }

    /// What the receiver of `changes` says about one entry (Protocol/replication.md, "changes").
    enum ChangeAnswer: Sendable, Equatable {
        /// Send it; the receiver has these ancestors (possibly none).
        case send(knownRevisions: [String])
        /// Do not send (0 or null).
        case skip
        /// An error status for this entry (e.g. 409).
        case error(Int)
    }

    // MARK: Encoding

    static func encodeChanges(_ entries: [ChangeEntry]) -> [UInt8] {
        CanonicalJSON.encode(.array(entries.map { e in
            var a: [JSONValue] = [e.sequence, .string(e.documentID), .string(e.revisionID)]
            if e.deletedFlags != 0 || e.bodySize != nil { a.append(e.deletedFlags != 0 ? .int(Int64(e.deletedFlags)) : .bool(false)) }
            if let s = e.bodySize { a.append(.int(Int64(s))) }
            return .array(a)
        }))
    }

    static func encodeProposals(_ entries: [ProposedChange]) -> [UInt8] {
        CanonicalJSON.encode(.array(entries.map { e in
            var a: [JSONValue] = [.string(e.documentID), .string(e.revisionID)]
            if let p = e.remoteParent { a.append(.string(p)) }
            return .array(a)
        }))
    }

    /// A `changes` response: known-revision arrays, 0 for "don't send", statuses; trailing
    /// zeros dropped as Couchbase Lite does.
    static func encodeChangeAnswers(_ answers: [ChangeAnswer]) -> [UInt8] {
        var values: [JSONValue] = answers.map {
            switch $0 {
            case .send(let known): return .array(known.map { .string($0) })
            case .skip: return .int(0)
            case .error(let s): return .int(Int64(s))
            }
        }
        while values.last == .int(0) { values.removeLast() }
        return CanonicalJSON.encode(.array(values))
    }

    /// A `proposeChanges` response: 0, 304, `{"status":409,"rev":…}`; trailing zeros dropped.
    /// `conflictIncludesRev`: the proposer asked for a conflict's current revision (its
    /// `conflictIncludesRev` property); otherwise a conflict is the bare status, as a client
    /// that did not ask expects.
    static func encodeProposalStatuses(_ statuses: [ProposalStatus], conflictIncludesRev: Bool = true) -> [UInt8] {
        var values: [JSONValue] = statuses.map {
            switch $0 {
            case .send: return .int(0)
            case .alreadyHave: return .int(304)
            case .conflict(let cur?) where conflictIncludesRev: return .object(["status": .int(409), "rev": .string(cur)])
            case .conflict: return .int(409)
            case .error(let s): return .int(Int64(s))
            }
        }
        while values.last == .int(0) { values.removeLast() }
        return CanonicalJSON.encode(.array(values))
    }

    // MARK: Decoding

    static func parse(_ body: [UInt8], what: String) throws(ReplicationError) -> JSONValue {
        guard body.count <= maxBodySize else { throw .protocolError("\(what) body over \(maxBodySize) bytes") }
        do { return try JSONParser.parse(body, sizeLimit: maxBodySize) } catch {
            throw .protocolError("\(what) body is not JSON: \(error)")
        }
    }

    static func documentID(_ v: JSONValue, what: String) throws(ReplicationError) -> String {
        guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= maxDocumentIDLength else {
            throw .protocolError("\(what): bad document ID")
        }
        return s
    }

    static func revisionID(_ v: JSONValue, what: String) throws(ReplicationError) -> String {
        guard let s = v.stringValue, (try? RevisionID(s)) != nil else { throw .protocolError("\(what): bad revision ID") }
        return s
    }

    /// A `changes` body; `null` (Sync Gateway's caught-up signal) and `[]` are empty.
    static func decodeChanges(_ body: [UInt8]) throws(ReplicationError) -> [ChangeEntry] {
        if body.isEmpty { return [] }
        let v = try parse(body, what: "changes")
        if v == .null { return [] }
        guard let items = v.arrayValue else { throw .protocolError("changes body is not an array") }
        var out: [ChangeEntry] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard let a = item.arrayValue, a.count >= 3 else { throw .protocolError("changes entry is not [seq, docID, revID, …]") }
            var e = ChangeEntry(sequence: a[0], documentID: try documentID(a[1], what: "changes"),
                                revisionID: try revisionID(a[2], what: "changes"))
            if a.count > 3 {
                switch a[3] {
                case .bool(let b): e.deletedFlags = b ? 1 : 0
                case .int(let i) where i >= 0 && i < 256: e.deletedFlags = Int(i)
                case .null: break
                default: throw .protocolError("changes entry: bad deleted flag")
                }
            }
            if a.count > 4, let s = a[4].intValue { e.bodySize = Int(s) }
            out.append(e)
        }
        return out
    }

    static func decodeProposals(_ body: [UInt8]) throws(ReplicationError) -> [ProposedChange] {
        if body.isEmpty { return [] }
        let v = try parse(body, what: "proposeChanges")
        if v == .null { return [] }
        guard let items = v.arrayValue else { throw .protocolError("proposeChanges body is not an array") }
        var out: [ProposedChange] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard let a = item.arrayValue, a.count >= 2 else { throw .protocolError("proposeChanges entry is not [docID, revID, …]") }
            var p = ProposedChange(documentID: try documentID(a[0], what: "proposeChanges"),
                                   revisionID: try revisionID(a[1], what: "proposeChanges"))
            if a.count > 2, let parent = a[2].stringValue, !parent.isEmpty {
                p.remoteParent = try revisionID(a[2], what: "proposeChanges parent")
            }
            out.append(p)
        }
        return out
    }

    /// A `changes` response for `count` entries (missing trailing entries mean 0).
    static func decodeChangeAnswers(_ body: [UInt8], count: Int) throws(ReplicationError) -> [ChangeAnswer] {
        var out = [ChangeAnswer](repeating: .skip, count: count)
        if body.isEmpty { return out }
        guard let items = try parse(body, what: "changes response").arrayValue, items.count <= count else {
            throw .protocolError("changes response is not an array of at most \(count) entries")
        }
        for (i, item) in items.enumerated() {
            switch item {
            case .null: out[i] = .skip
            case .int(0): out[i] = .skip
            case .int(let s): out[i] = .error(Int(s))
            case .array(let revs):
                out[i] = .send(knownRevisions: revs.compactMap { $0.stringValue })
            default: throw .protocolError("changes response entry \(i) is not an array or a number")
            }
        }
        return out
    }

    static func decodeProposalStatuses(_ body: [UInt8], count: Int) throws(ReplicationError) -> [ProposalStatus] {
        var out = [ProposalStatus](repeating: .send, count: count)
        if body.isEmpty { return out }
        guard let items = try parse(body, what: "proposeChanges response").arrayValue, items.count <= count else {
            throw .protocolError("proposeChanges response is not an array of at most \(count) entries")
        }
        for (i, item) in items.enumerated() {
            let status: Int
            var rev: String?
            if let s = item.intValue { status = Int(s) }
            else if let o = item.objectValue, let s = o["status"]?.intValue { status = Int(s); rev = o["rev"]?.stringValue }
            else if item == .null { status = 0 }
            else { throw .protocolError("proposeChanges response entry \(i) is not a status") }
            switch status {
            case 0: out[i] = .send
            case 304: out[i] = .alreadyHave
            case 409: out[i] = .conflict(current: rev)
            default: out[i] = .error(status)
            }
        }
        return out
    }

    /// The `history` property: ancestor IDs, newest first, comma-separated (spaces tolerated).
    static func decodeHistory(_ text: String?) -> [String] {
        guard let text, !text.isEmpty else { return [] }
        return text.split(separator: ",").map { $0.trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
    }
}
