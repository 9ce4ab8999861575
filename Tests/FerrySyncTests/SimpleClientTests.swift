import FerryBLIP
import FerryStore
@testable import FerrySync
import Testing

/// A client without Ferry's habits pushes to a listener: one revision per `proposeChanges`
/// message, many in flight at once, each `rev` its own uncompressed message. The listener
/// answers runs of such proposals together; every answer must still be the one for its own
/// message.
@Suite("A simple client pushing one revision per message")
struct SimpleClientTests {
    @Test(.timeLimit(.minutes(5))) func proposalsInFlightTogetherEachGetTheirOwnAnswer() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        try naomi.put("taken", ["v": 1])
        let current = try #require(try naomi.db.document("taken")?.revisionID).description
        let conn = try await BLIPConnection.connect(to: naomi.url + "/_blipsync", app: SyncListener.app)
        let n = 200
        let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for i in 0..<n {
                group.addTask {
                    // Every tenth proposes a conflicting first revision of the taken document.
                    let id = i % 10 == 0 ? "taken" : "doc-\(i)"
                    let body = Array(#"[["\#(id)","1-\#(String(repeating: "a", count: 31))\#(i % 10)"]]"#.utf8)
                    let reply = try await conn.send(.request(profile: "proposeChanges", body: body))
                    let answer = String(decoding: reply.body, as: UTF8.self)
                    if answer == "[]" {
                        _ = try await conn.send(.request(profile: "rev", properties: [("id", id), ("rev", "1-\(String(repeating: "a", count: 31))\(i % 10)")],
                                                         body: Array(#"{"n":\#(i)}"#.utf8), compressed: false))
                    }
                    return (i, answer)
                }
            }
            var out: [Int: String] = [:]
            for try await (i, a) in group { out[i] = a }
            return out
        }
        for i in 0..<n {
            #expect(answers[i] == (i % 10 == 0 ? "[409]" : "[]"), "answer to proposal \(i)")
        }
        #expect(try naomi.db.documentCount() == 1 + n - n / 10)
        #expect(try naomi.body("doc-199") == ["n": 199])
        #expect(try naomi.db.document("taken")?.revisionID?.description == current, "the conflicting proposals stored nothing")
        await conn.close()
        await naomi.stop()
    }
}
