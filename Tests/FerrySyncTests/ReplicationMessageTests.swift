import FerryStore
@testable import FerrySync
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
