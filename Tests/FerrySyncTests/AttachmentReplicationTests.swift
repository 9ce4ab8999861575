import FerryStore
@testable import FerrySync
import Testing

@Suite("Attachments replicate")
struct AttachmentReplicationTests {
    /// Deterministic pseudo-random bytes (xorshift) so sizes are real and content varies.
    static func bytes(_ n: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        var out = [UInt8](repeating: 0, count: n)
        for i in 0..<n {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            out[i] = UInt8(truncatingIfNeeded: x)
        }
        return out
    }

    static let sizes = [("empty", 0), ("one-mib", 1 << 20), ("fifty-mib", 50 << 20)]

    /// Checks that every attachment of `id` in `db` is fetched and matches its digest.
    static func verify(_ db: Database, _ id: String, expectFetched: Bool = true) throws {
        let doc = try #require(try db.document(id))
        let atts = try db.attachments(of: doc)
        #expect(atts.count == 1)
        for a in atts {
            #expect(a.isFetched == expectFetched, "\(id)/\(a.name)")
            if expectFetched {
                let data = try db.readBlob(digest: a.digest).readAll()
                #expect(Int64(data.count) == a.length)
                #expect(BlobDigest(of: data) == a.digest, "digest of \(id)")
            }
        }
    }

    @Test func attachmentsOfEverySizeArriveIntactAndAPolicyCanDeferTheBigOnes() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        for (i, (name, size)) in Self.sizes.enumerated() {
            let meta = try molly.db.writeBlob(Self.bytes(size, seed: UInt64(i + 1)))
            var doc = Document(id: name, properties: ["type": "photo"])
            doc.setAttachment("\(name).bin", blob: meta, contentType: "application/octet-stream")
            try molly.db.save(doc)
        }
        // Push: Naomi fetches every blob from Molly before storing the revision.
        try await replicate(molly, with: naomi, .push)
        for (name, _) in Self.sizes { try Self.verify(naomi.db, name) }

        // Pull into a new peer whose policy skips attachments over 1 MiB.
        let olga = try await Peer.make("olga")
        var c = ReplicatorConfiguration(database: olga.db, target: naomi.url)
        c.type = .pull
        c.attachmentDownloadPolicy = AttachmentDownloadPolicy { $0.length <= 1 << 20 ? .fetch(priority: 0) : .skip }
        let r = Replicator(configuration: c)
        try await r.run()
        try Self.verify(olga.db, "empty")
        try Self.verify(olga.db, "one-mib")
        try Self.verify(olga.db, "fifty-mib", expectFetched: false)
        let bigDoc = try #require(try olga.db.document("fifty-mib"))
        let big = try #require(try olga.db.attachments(of: bigDoc).first)
        #expect(big.length == 50 << 20 && big.contentType == "application/octet-stream")

        // Later: fetch what was skipped.
        #expect(try await r.fetchAttachments() == 1)
        try Self.verify(olga.db, "fifty-mib")
        await molly.stop(); await naomi.stop(); await olga.stop()
    }

    /// The pre-parse test for `_attachments` finds the key at either end of a body and misses
    /// near-misses (a lone underscore, the key without its quotes, a body shorter than it).
    @Test func attachmentKeyTestFindsTheKeyAnywhere() {
        let yes = [#"{"_attachments":{}}"#, #"{"a":1,"b":{"_attachments":{}}}"#, #""_attachments""#,
                   String(repeating: "_", count: 40) + #""_attachments""#]
        let no = [#"{"a":"_x"}"#, #"{"_attachment":1}"#, "_attachments", #""_attachments"#, "", "_", #"{"__attachments":{}}"#]
        for s in yes { #expect(AttachmentTransfer.containsAttachments(Array(s.utf8)), "\(s)") }
        for s in no { #expect(!AttachmentTransfer.containsAttachments(Array(s.utf8)), "\(s)") }
    }
}
