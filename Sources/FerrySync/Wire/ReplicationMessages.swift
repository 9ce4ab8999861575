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

    /// A `changes` body: `[[sequence, docID, revID, deleted?, bodySize?], …]`. Written directly
    /// (a feed lists every document it sends; building a JSON tree of them first was 4.6 % of
    /// its samples), byte for byte what `CanonicalJSON` writes for the same arrays.
    static func encodeChanges(_ entries: [ChangeEntry]) -> [UInt8] {
        entryArray(entries) { e, out in
            CanonicalJSON.write(e.sequence, to: &out)
            out.append(UInt8(ascii: ","))
            CanonicalJSON.writeString(e.documentID, to: &out)
            out.append(UInt8(ascii: ","))
            CanonicalJSON.writeString(e.revisionID, to: &out)
            if e.deletedFlags != 0 || e.bodySize != nil {
                out.append(UInt8(ascii: ","))
                if e.deletedFlags != 0 { out.append(contentsOf: String(e.deletedFlags).utf8) } else { out.append(contentsOf: "false".utf8) }
            }
            if let size = e.bodySize {
                out.append(UInt8(ascii: ","))
                out.append(contentsOf: String(size).utf8)
            }
        }
    }

    /// A `proposeChanges` body: `[[docID, revID, remoteParent?], …]`, written directly as `encodeChanges`.
    static func encodeProposals(_ entries: [ProposedChange]) -> [UInt8] {
        entryArray(entries) { e, out in
            CanonicalJSON.writeString(e.documentID, to: &out)
            out.append(UInt8(ascii: ","))
            CanonicalJSON.writeString(e.revisionID, to: &out)
            if let parent = e.remoteParent {
                out.append(UInt8(ascii: ","))
                CanonicalJSON.writeString(parent, to: &out)
            }
        }
    }

    /// The JSON array of `entries`, each an array whose members `write` appends.
    private static func entryArray<T>(_ entries: [T], write: (T, inout [UInt8]) -> Void) -> [UInt8] {
        trimmedArray(entries, isZero: { _ in false }, capacityPerItem: 72) { e, out in
            out.append(UInt8(ascii: "["))
            write(e, &out)
            out.append(UInt8(ascii: "]"))
        }
    }

    /// A `changes` response: known-revision arrays, 0 for "don't send", statuses; trailing
    /// zeros dropped as Couchbase Lite does. Written directly (one answer per proposed document,
    /// on every batch), byte for byte what `CanonicalJSON` writes for the same array.
    static func encodeChangeAnswers(_ answers: [ChangeAnswer]) -> [UInt8] {
        trimmedArray(answers, isZero: { $0 == .skip || $0 == .error(0) }) { answer, out in
            switch answer {
            case .send(let known):
                out.append(UInt8(ascii: "["))
                for (k, rev) in known.enumerated() {
                    if k > 0 { out.append(UInt8(ascii: ",")) }
                    CanonicalJSON.writeString(rev, to: &out)
                }
                out.append(UInt8(ascii: "]"))
            case .skip: out.append(UInt8(ascii: "0"))
            case .error(let s): out.append(contentsOf: String(s).utf8)
            }
        }
    }

    /// A `proposeChanges` response: 0, 304, `{"rev":…,"status":409}`; trailing zeros dropped.
    /// `conflictIncludesRev`: the proposer asked for a conflict's current revision (its
    /// `conflictIncludesRev` property); otherwise a conflict is the bare status, as a client
    /// that did not ask expects. Written directly, as `encodeChangeAnswers`.
    static func encodeProposalStatuses(_ statuses: [ProposalStatus], conflictIncludesRev: Bool = true) -> [UInt8] {
        trimmedArray(statuses, isZero: { $0 == .send || $0 == .error(0) }) { status, out in
            switch status {
            case .send: out.append(UInt8(ascii: "0"))
            case .alreadyHave: out.append(contentsOf: "304".utf8)
            case .conflict(let cur?) where conflictIncludesRev:
                // Canonical key order: "rev" before "status".
                out.append(contentsOf: #"{"rev":"#.utf8)
                CanonicalJSON.writeString(cur, to: &out)
                out.append(contentsOf: #","status":409}"#.utf8)
            case .conflict: out.append(contentsOf: "409".utf8)
            case .error(let s): out.append(contentsOf: String(s).utf8)
            }
        }
    }

    /// The JSON array of `items`, each written by `write`, without the trailing items that are
    /// written as 0 (`isZero`): the shape of both answers (and of the lists, where none is).
    private static func trimmedArray<T>(_ items: [T], isZero: (T) -> Bool, capacityPerItem: Int = 4,
                                        write: (T, inout [UInt8]) -> Void) -> [UInt8] {
        let count = items.lastIndex { !isZero($0) }.map { $0 + 1 } ?? 0
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(2 + count * capacityPerItem)
        for (i, item) in items.prefix(count).enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            write(item, &out)
        }
        out.append(UInt8(ascii: "]"))
        return out
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
    /// `direct: false` skips the direct reader (for tests that compare the two readers).
    static func decodeChanges(_ body: [UInt8], direct: Bool = true) throws(ReplicationError) -> [ChangeEntry] {
        try decodeEntries(body, what: "changes", shape: changesShape, direct: direct, changeEntry)
    }

    /// A `proposeChanges` body (`direct` as in `decodeChanges`).
    static func decodeProposals(_ body: [UInt8], direct: Bool = true) throws(ReplicationError) -> [ProposedChange] {
        try decodeEntries(body, what: "proposeChanges", shape: proposalShape, direct: direct, proposedChange)
    }

    /// The entries of a `changes` or `proposeChanges` body, each made by `make` from its values.
    /// The usual shape is read directly (`ReplicationBodyScanner`); anything else goes through
    /// the general parser, which accepts and refuses the same bodies.
    private static func decodeEntries<T>(_ body: [UInt8], what: String, shape: String, direct: Bool,
                                         _ make: (ArraySlice<JSONValue>) throws(ReplicationError) -> T) throws(ReplicationError) -> [T] {
        if body.isEmpty { return [] }
        guard body.count <= maxBodySize else { throw .protocolError("\(what) body over \(maxBodySize) bytes") }
        var out: [T] = []
        if direct, let (values, ends) = ReplicationBodyScanner.entries(in: body) {
            out.reserveCapacity(ends.count)
            var start = 0
            for end in ends {
                out.append(try make(values[start..<end]))
                start = end
            }
            return out
        }
        let v = try parse(body, what: what)
        if v == .null { return [] }
        guard let items = v.arrayValue else { throw .protocolError("\(what) body is not an array") }
        out.reserveCapacity(items.count)
        for item in items {
            guard let a = item.arrayValue else { throw .protocolError(shape) }
            out.append(try make(a[...]))
        }
        return out
    }

    /// The errors for an entry of the wrong shape.
    private static let changesShape = "changes entry is not [seq, docID, revID, …]"
    private static let proposalShape = "proposeChanges entry is not [docID, revID, …]"

    /// One `changes` entry: `[sequence, docID, revID, deleted?, bodySize?]`.
    private static func changeEntry(_ a: ArraySlice<JSONValue>) throws(ReplicationError) -> ChangeEntry {
        guard a.count >= 3 else { throw .protocolError(changesShape) }
        let i = a.startIndex
        var e = ChangeEntry(sequence: a[i], documentID: try documentID(a[i + 1], what: "changes"),
                            revisionID: try revisionID(a[i + 2], what: "changes"))
        if a.count > 3 {
            switch a[i + 3] {
            case .bool(let b): e.deletedFlags = b ? 1 : 0
            case .int(let f) where f >= 0 && f < 256: e.deletedFlags = Int(f)
            case .null: break
            default: throw .protocolError("changes entry: bad deleted flag")
            }
        }
        if a.count > 4, let s = a[i + 4].intValue { e.bodySize = Int(s) }
        return e
    }

    /// One `proposeChanges` entry: `[docID, revID, remoteParent?]`.
    private static func proposedChange(_ a: ArraySlice<JSONValue>) throws(ReplicationError) -> ProposedChange {
        guard a.count >= 2 else { throw .protocolError(proposalShape) }
        let i = a.startIndex
        var p = ProposedChange(documentID: try documentID(a[i], what: "proposeChanges"),
                               revisionID: try revisionID(a[i + 1], what: "proposeChanges"))
        if a.count > 2, let parent = a[i + 2].stringValue, !parent.isEmpty {
            p.remoteParent = try revisionID(a[i + 2], what: "proposeChanges parent")
        }
        return p
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
