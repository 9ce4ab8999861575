import FerryStore
@_spi(Fuzzing) @testable import FerrySync
import FerryTestSupport
import Foundation
import Testing

@Suite("Replication message bodies (Protocol/vectors/replication.txt)")
struct ReplicationMessageTests {
    typealias M = ReplicationMessages

    static func vectors() throws -> [String: [UInt8]] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("Protocol/vectors/replication.txt"), encoding: .utf8)
        var out: [String: [UInt8]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: "\t", maxSplits: 1)
            if parts.count == 2 { out[String(parts[0])] = Array(parts[1].utf8) }
        }
        return out
    }

    let changes = [M.ChangeEntry(sequence: 1, documentID: "a", revisionID: "1-aa"),
                   M.ChangeEntry(sequence: 2, documentID: "b", revisionID: "2-bb", deletedFlags: 1)]
    let proposals = [M.ProposedChange(documentID: "a", revisionID: "2-bb", remoteParent: "1-aa"),
                     M.ProposedChange(documentID: "c", revisionID: "1-cc")]
    let answers: [M.ChangeAnswer] = [.send(knownRevisions: []), .skip, .send(knownRevisions: ["1-aa"]), .skip]
    let statuses: [M.ProposalStatus] = [.send, .conflict(current: "3-cc"), .alreadyHave, .send]

    @Test func encodeByteForByte() throws {
        let v = try Self.vectors()
        #expect(M.encodeChanges(changes) == v["changes"])
        #expect(M.encodeChanges([]) == v["changes-caught-up"])
        #expect(M.encodeProposals(proposals) == v["proposeChanges"])
        #expect(M.encodeChangeAnswers(answers) == v["changes-response"])
        #expect(M.encodeProposalStatuses(statuses) == v["proposeChanges-response"])
        #expect(M.encodeProposalStatuses([.send, .send]) == v["proposeChanges-response-all-send"])
        #expect(CanonicalJSON.encode(.object(["local": 120, "remote": 57])) == v["checkpoint"])
    }

    @Test func decodeTheVectors() throws {
        let v = try Self.vectors()
        #expect(try M.decodeChanges(try #require(v["changes"])) == changes)
        #expect(try M.decodeChanges(try #require(v["changes-caught-up"])).isEmpty)
        #expect(try M.decodeChanges(Array("null".utf8)).isEmpty, "Sync Gateway's caught-up signal")
        #expect(try M.decodeProposals(try #require(v["proposeChanges"])) == proposals)
        #expect(try M.decodeChangeAnswers(try #require(v["changes-response"]), count: 4) == answers)
        #expect(try M.decodeProposalStatuses(try #require(v["proposeChanges-response"]), count: 4) == statuses)
        #expect(try M.decodeProposalStatuses(try #require(v["proposeChanges-response-all-send"]), count: 2) == [.send, .send])
    }

    @Test func peerVariantsAreAccepted() throws {
        // Sync Gateway: bit-field deleted flags, bodySize, string sequences; LC: boolean flags.
        let e = try M.decodeChanges(Array(#"[["12:34","a","1-aa",false,120],[5,"b","2-bb",true],[6,"c","3-cc",4]]"#.utf8))
        #expect(e[0].sequence == "12:34" && e[0].bodySize == 120 && !e[0].isDeleted)
        #expect(e[1].isDeleted && !e[1].isAccessLoss)
        #expect(e[2].isAccessLoss)
        #expect(M.decodeHistory("3-cc, 2-bb,1-aa") == ["3-cc", "2-bb", "1-aa"])
    }

    @Test(arguments: [#"{"a":1}"#, #"[[1,"a"]]"#, #"[[1,"","1-aa"]]"#, #"[[1,"a","zz"]]"#, #"[[1,"a","1-aa","x"]]"#, "[1", #"[["a"]]"#])
    func malformedBodiesAreTypedErrors(_ body: String) {
        #expect(throws: ReplicationError.self) { try M.decodeChanges(Array(body.utf8)) }
    }

    @Test func oversizeBodiesAreRefusedBeforeParsing() {
        let big = [UInt8](repeating: UInt8(ascii: " "), count: M.maxBodySize + 1)
        #expect(throws: ReplicationError.self) { try M.decodeChanges(big) }
        #expect(throws: ReplicationError.self) { try M.decodeChangeAnswers(Array("[0,0,0]".utf8), count: 2) }
    }
}

@Suite("proposeChanges answers")
struct ProposalStatusTests {
    @Test func aConflictCarriesItsRevisionOnlyWhenTheProposerAskedForIt() {
        let statuses: [ReplicationMessages.ProposalStatus] = [.send, .conflict(current: "2-abc"), .alreadyHave]
        #expect(String(decoding: ReplicationMessages.encodeProposalStatuses(statuses, conflictIncludesRev: true), as: UTF8.self)
                == #"[0,{"rev":"2-abc","status":409},304]"#)
        #expect(String(decoding: ReplicationMessages.encodeProposalStatuses(statuses, conflictIncludesRev: false), as: UTF8.self)
                == "[0,409,304]")
    }
}

/// The direct reader and writers of the `changes`/`proposeChanges` bodies against the general
/// JSON parser and `CanonicalJSON`: the same bodies give the same entries or the same error,
/// and the same answers give the same bytes.
@Suite("Replication bodies, direct against general")
struct ReplicationBodyDifferentialTests {
    typealias M = ReplicationMessages

    static let bodies: [String] = [
        // The usual shapes, as Ferry, Couchbase Lite and Sync Gateway write them.
        #"[[1,"a","1-aa"],[2,"b","2-bb",1]]"#, #"[["a","2-bb","1-aa"],["c","1-cc"]]"#,
        #"[["12:34","a","1-aa",false,120],[5,"b","2-bb",true],[6,"c","3-cc",4]]"#,
        " [ [ 1 , \"a\" , \"1-aa\" ] ,\n\t[2,\"b\",\"2-bb\",null] ] \r\n", "[]", " [ ] ", #"[["a","1-aa",""]]"#,
        #"[[0,"doc-000001","1-0123456789abcdef0123456789abcdef01234567",0,1024]]"#,
        // Outside the direct reader's shape, valid JSON: the general parser decides.
        "null", #"[["d\u00e9j\u00e0","1-aa"]]"#, #"[["déjà","1-aa"]]"#, #"[["a\"b","1-aa"]]"#, #"[[1.5,"a","1-aa"]]"#,
        #"[[-1,"a","1-aa"]]"#, #"[[1e3,"a","1-aa"]]"#, #"[[{"x":1},"a","1-aa"]]"#, #"[[["x"],"a","1-aa"]]"#,
        #"[[99999999999999999999,"a","1-aa"]]"#, #"[[1,"a","1-aa",1.0,2.0]]"#, #"[[1,"a","1-aa",true,12.5]]"#,
        // Malformed or refused, by either reader.
        "", "[", "[[", "[[]]", "[[1]]", #"[[1,"a"]]"#, #"[[1,"","1-aa"]]"#, #"[[1,"a","zz"]]"#, #"[[1,"a","1-aa","x"]]"#,
        "[1", #"[["a"]]"#, #"{"a":1}"#, #"[[01,"a","1-aa"]]"#, #"[[1,"a","1-aa"]]x"#, #"[[1,"a","1-aa"],]"#,
        #"[[1,"a","1-aa"]"#, #"[[1,"a","1-aa" "b"]]"#, #"[[tru,"a","1-aa"]]"#, #"[[truex,"a","1-aa"]]"#,
        #"[[1,"a","1-aa",300]]"#, "[[1,\"a\tb\",\"1-aa\"]]", #"[["a","1-aa","zz"]]"#, #"[["a","1-aa",5]]"#, "[[],[]]",
        #"[[1,""# + String(repeating: "x", count: 300) + #"","1-aa"]]"#,
    ]

    @Test(arguments: bodies)
    func bothReadersAgree(_ body: String) {
        #expect(ReplicationWire.readersAgree(profile: "changes", body: Array(body.utf8)))
        #expect(ReplicationWire.readersAgree(profile: "proposeChanges", body: Array(body.utf8)))
    }

    @Test func theDirectReaderTakesTheUsualShape() {
        for body in Self.bodies.prefix(8) {
            #expect(ReplicationBodyScanner.entries(in: Array(body.utf8)) != nil, "\(body)")
        }
        for body in [#"[["déjà","1-aa"]]"#, #"[[1.5,"a","1-aa"]]"#, #"[[1,"a","1-aa"]]x"#, "null"] {
            #expect(ReplicationBodyScanner.entries(in: Array(body.utf8)) == nil, "\(body)")
        }
    }

    /// The writers before they wrote directly: `CanonicalJSON` of the values.
    static func reference(_ answers: [M.ChangeAnswer]) -> [UInt8] {
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

    static func reference(_ statuses: [M.ProposalStatus], conflictIncludesRev: Bool) -> [UInt8] {
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

    /// `changes` and `proposeChanges` bodies, written directly, are byte for byte the canonical
    /// JSON of the same arrays: random entries with escapes, non-ASCII IDs, sequences of every
    /// JSON kind, flags and body sizes.
    @Test func listsMatchCanonicalJSON() {
        var rng = SystemRandomNumberGenerator()
        let ids = ["a", "doc-000123", "\u{e9}t\u{e9}", "q\"u\\o", "tab\there\u{1}", ""]
        let sequences: [JSONValue] = [0, 7, .int(Int64.max), .int(-3), "12:34", .string("a\"b"), 1.5, .null, .array([1, "x"]),
                                      .object(["b": 1, "a": [true]])]
        for _ in 0..<500 {
            let changes = (0..<Int.random(in: 0...5, using: &rng)).map { _ in
                M.ChangeEntry(sequence: sequences.randomElement(using: &rng) ?? 0, documentID: ids.randomElement(using: &rng) ?? "",
                              revisionID: ids.randomElement(using: &rng) ?? "", deletedFlags: [0, 0, 1, 2, 4, 5].randomElement(using: &rng) ?? 0,
                              bodySize: Bool.random(using: &rng) ? nil : Int.random(in: 0...100_000, using: &rng))
            }
            let reference = CanonicalJSON.encode(.array(changes.map { e in
                var a: [JSONValue] = [e.sequence, .string(e.documentID), .string(e.revisionID)]
                if e.deletedFlags != 0 || e.bodySize != nil { a.append(e.deletedFlags != 0 ? .int(Int64(e.deletedFlags)) : .bool(false)) }
                if let s = e.bodySize { a.append(.int(Int64(s))) }
                return .array(a)
            }))
            #expect(M.encodeChanges(changes) == reference, "\(changes)")
            let proposals = (0..<Int.random(in: 0...5, using: &rng)).map { _ in
                M.ProposedChange(documentID: ids.randomElement(using: &rng) ?? "", revisionID: ids.randomElement(using: &rng) ?? "",
                                 remoteParent: Bool.random(using: &rng) ? nil : ids.randomElement(using: &rng))
            }
            let proposalReference = CanonicalJSON.encode(.array(proposals.map { e in
                .array([.string(e.documentID), .string(e.revisionID)] + (e.remoteParent.map { [JSONValue.string($0)] } ?? []))
            }))
            #expect(M.encodeProposals(proposals) == proposalReference, "\(proposals)")
        }
    }

    @Test func theWritersMatchCanonicalJSON() {
        var rng = SystemRandomNumberGenerator()
        let revs = ["1-aa", "2-\u{e9}\u{e0}", "3-a\"b\\c", "4-\n\t\u{7f}\u{1}", ""]
        for _ in 0..<500 {
            let n = Int.random(in: 0...6, using: &rng)
            let answers: [M.ChangeAnswer] = (0..<n).map { _ in
                switch Int.random(in: 0...3, using: &rng) {
                case 0: return .skip
                case 1: return .error([0, 409, 500].randomElement(using: &rng) ?? 0)
                default: return .send(knownRevisions: (0..<Int.random(in: 0...3, using: &rng)).map { _ in revs.randomElement(using: &rng) ?? "" })
                }
            }
            #expect(M.encodeChangeAnswers(answers) == Self.reference(answers), "\(answers)")
            let statuses: [M.ProposalStatus] = (0..<n).map { _ in
                switch Int.random(in: 0...4, using: &rng) {
                case 0: return .send
                case 1: return .alreadyHave
                case 2: return .conflict(current: nil)
                case 3: return .conflict(current: revs.randomElement(using: &rng))
                default: return .error([0, 403, 500].randomElement(using: &rng) ?? 0)
                }
            }
            for withRev in [true, false] {
                #expect(M.encodeProposalStatuses(statuses, conflictIncludesRev: withRev) == Self.reference(statuses, conflictIncludesRev: withRev),
                        "\(statuses)")
            }
        }
    }
}
