@testable import FerryStore
import Foundation
import Testing

/// Attachments (issue 6): content-addressed blobs beside the database, streamed in and out,
/// `_attachments` metadata checked and kept for blobs not fetched, compaction.
@Suite struct AttachmentTests {
    /// The files in a database's blob folder, by kind.
    func blobFolder(_ db: Database) -> (blobs: [String], temps: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: db.path + ".attachments")) ?? []
        return (names.filter { $0.hasSuffix(".blob") }.sorted(), names.filter { $0.hasSuffix(".tmp") }.sorted())
    }

    func attachments(_ digest: BlobDigest, length: Int, revpos: Int? = nil, extra: [String: JSONValue] = [:]) -> JSONValue {
        var meta: [String: JSONValue] = ["digest": .string(digest.description), "length": .int(Int64(length))]
        if let revpos { meta["revpos"] = .int(Int64(revpos)) }
        meta.merge(extra) { _, new in new }
        return .object(["a.txt": .object(meta)])
    }

    @Test func digestsAreSHA1InBase64AsCouchbaseWritesThem() throws {
        let hello = BlobDigest(of: Array("hello".utf8))
        #expect(hello.description == "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=")
        #expect(try BlobDigest("sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=") == hello)
        #expect(BlobDigest(of: []).description == "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=")
        for bad in ["md5-XUFAKrxLKna5cZ2REBfFkg==", "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00", "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ01=",
                    "SHA1-qvTGHdzF6KLavt4PO0gs2a6pQ00=", "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ0*=", ""] {
            #expect(throws: StoreError.self) { try BlobDigest(bad) }
        }
        // The incremental hash over uneven chunks agrees with the one-shot digest.
        let (db, dir) = try freshDatabase()
        _ = dir
        let w = try db.makeBlobWriter()
        for part in ["he", "", "ll", "o"] { try w.write(Array(part.utf8)) }
        #expect(try w.finish() == BlobMetadata(digest: hello, length: 5))
    }

    @Test func contentReferencedByTwoDocumentsIsStoredOnce() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let bytes = Array("the same photo".utf8)
        let first = try db.writeBlob(bytes)
        let second = try db.writeBlob(bytes)
        #expect(first == second)
        var a = Document(id: "a"), b = Document(id: "b")
        a.setAttachment("photo.jpg", blob: first, contentType: "image/jpeg")
        b.setAttachment("copy.jpg", blob: second)
        let savedA = try db.save(a)
        let savedB = try db.save(b)
        #expect(blobFolder(db).blobs == [Hex.encode(first.digest.bytes) + ".blob"])
        let att = try db.attachments(of: savedA)
        #expect(att == [Attachment(name: "photo.jpg", digest: first.digest, length: Int64(bytes.count),
                                   contentType: "image/jpeg", revpos: 1, isFetched: true)])
        #expect(try db.attachments(of: savedB).map(\.name) == ["copy.jpg"])
        #expect(try db.readBlob(digest: first.digest).readAll() == bytes)
        // What was stored is the CouchDB shape, and reads back the same.
        let stored = try #require(try db.document("a"))
        #expect(stored["_attachments"] == .object(["photo.jpg": .object([
            "digest": .string(first.digest.description), "length": .int(Int64(bytes.count)),
            "content_type": "image/jpeg", "revpos": 1])]))
    }

    @Test func aLargeBlobStreamsInAndOutInBoundedChunks() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let chunk = 64 * 1024, chunks = 1024          // 64 MiB
        // Each chunk differs (its index in the first bytes) without building 64 MiB anywhere.
        var base = [UInt8](repeating: 0, count: chunk)
        for i in 0..<chunk { base[i] = UInt8(truncatingIfNeeded: i &* 7 &+ 3) }
        func chunkBytes(_ k: Int) -> [UInt8] {
            var c = base
            withUnsafeBytes(of: UInt64(k).littleEndian) { for (i, b) in $0.enumerated() { c[i] = b } }
            return c
        }
        let expected = try SHA1Stream()
        for k in 0..<chunks { chunkBytes(k).withUnsafeBytes { expected.update($0) } }
        let expectedDigest = BlobDigest(bytes: expected.finish())

        let source = AsyncStream<[UInt8]> { continuation in
            for k in 0..<chunks { continuation.yield(chunkBytes(k)) }
            continuation.finish()
        }
        let meta = try await db.writeBlob(from: source)
        #expect(meta == BlobMetadata(digest: expectedDigest, length: Int64(chunk * chunks)))
        #expect(blobFolder(db).temps.isEmpty)

        let reader = try db.readBlob(digest: meta.digest)
        #expect(reader.length == meta.length)
        let readHash = try SHA1Stream()
        var total: Int64 = 0, largest = 0, count = 0
        for try await piece in reader {
            largest = max(largest, piece.count)
            total += Int64(piece.count)
            count += 1
            piece.withUnsafeBytes { readHash.update($0) }
        }
        #expect(total == meta.length)
        #expect(largest <= BlobReader.chunkSize)
        #expect(count >= chunks)
        #expect(BlobDigest(bytes: readHash.finish()) == meta.digest)
    }

    @Test func aStubWithoutItsBlobIsKeptUnfetchedUntilTheBlobArrives() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let digest = BlobDigest(of: Array("hello".utf8))
        let body = #"{"title":"t","_attachments":{"greeting.txt":{"content_type":"text/plain","digest":"\#(digest)","length":5,"revpos":1,"stub":true}}}"#
        let outcome = try db.insert(ReplicatedRevision(documentID: "d", history: ["1-aa"], body: json(body)))
        #expect(outcome.status == .inserted)
        let doc = try #require(try db.document("d"))
        #expect(try db.attachments(of: doc) == [Attachment(name: "greeting.txt", digest: digest, length: 5,
                                                           contentType: "text/plain", revpos: 1, isFetched: false)])
        #expect(!db.hasBlob(digest: digest))
        #expect(throws: StoreError.notFound) { try db.readBlob(digest: digest) }
        // The download arrives later: the same revision now has its blob.
        try db.writeBlob(Array("hello".utf8))
        #expect(try db.attachments(of: doc).map(\.isFetched) == [true])
        #expect(try db.document("d")?.revisionID == rev("1-aa"))
        #expect(try db.readBlob(digest: digest).readAll() == Array("hello".utf8))
    }

    @Test func localSavesSetRevposForNewAndChangedAttachmentsOnly() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let one = try db.writeBlob(Array("one".utf8)), two = try db.writeBlob(Array("two".utf8))
        var doc = Document(id: "d", properties: ["n": 1])
        doc.setAttachment("a", blob: one)
        doc = try db.save(doc)                                   // generation 1
        doc["n"] = 2
        doc = try db.save(doc)                                   // generation 2, attachment unchanged
        #expect(try db.attachments(of: doc).map(\.revpos) == [1])
        doc.setAttachment("a", blob: two)
        doc.setAttachment("b", blob: one)
        doc = try db.save(doc)                                   // generation 3: both new or changed
        #expect(try db.attachments(of: doc).map(\.revpos) == [3, 3])
        // An attachment entry typed by hand without revpos gets it too, and counts in the ID.
        var plain = Document(id: "p", properties: ["_attachments": attachments(one.digest, length: 3)])
        plain = try db.save(plain)
        #expect(plain["_attachments"] == attachments(one.digest, length: 3, revpos: 1))
        #expect(plain.revisionID == RevisionID.make(parent: nil, deleted: false, canonicalBody: plain.canonicalJSON))
        doc.removeAttachment("a")
        doc.removeAttachment("b")
        #expect(doc["_attachments"] == nil)
    }

    @Test func badAttachmentMetadataIsRefusedWithTypedErrorsAndNothingIsWritten() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let stored = try db.writeBlob(Array("four".utf8))
        let cases: [(JSONValue, StoreError)] = [
            ("nope", .invalidAttachment(name: "", reason: "_attachments must be an object")),
            (.object(["a.txt": "x"]), .invalidAttachment(name: "a.txt", reason: "metadata must be an object")),
            (.object(["a.txt": .object(["digest": "sha1-xyz", "length": 1])]),
             .invalidAttachment(name: "a.txt", reason: #"digest "sha1-xyz" is not sha1-<base64>"#)),
            (.object(["a.txt": .object(["length": 1])]), .invalidAttachment(name: "a.txt", reason: "missing digest")),
            (attachments(stored.digest, length: -1), .invalidAttachment(name: "a.txt", reason: "length must be a non-negative integer")),
            (attachments(stored.digest, length: 5), .invalidAttachment(name: "a.txt", reason: "length 5 but the stored blob has 4 bytes")),
            (attachments(stored.digest, length: 4, extra: ["content_type": 7]),
             .invalidAttachment(name: "a.txt", reason: "content_type must be a string")),
            (attachments(stored.digest, length: 4, extra: ["data": "Zm91cg=="]),
             .invalidAttachment(name: "a.txt", reason: "inline or following data is not stored in documents; write the blob first")),
            (attachments(stored.digest, length: 4, revpos: -1),
             .invalidAttachment(name: "a.txt", reason: "revpos must be a non-negative integer")),
        ]
        for (value, error) in cases {
            #expect(throws: error) { try db.save(Document(id: "d", properties: ["_attachments": value])) }
            let body = CanonicalJSON.encode(["_attachments": value])
            #expect(throws: error) { try db.insert(ReplicatedRevision(documentID: "r", history: ["1-aa"], body: body)) }
        }
        #expect(db.lastSequence == 0)
        #expect(try db.documentCount(includeDeleted: true) == 0)
        // In a batch, only the bad revision fails.
        let results = try db.insert([
            ReplicatedRevision(documentID: "ok", history: ["1-aa"], body: CanonicalJSON.encode(["_attachments": attachments(stored.digest, length: 4)])),
            ReplicatedRevision(documentID: "bad", history: ["1-aa"], body: CanonicalJSON.encode(["_attachments": attachments(stored.digest, length: 9)])),
        ])
        #expect((try? results[0].get())?.status == .inserted)
        #expect(throws: StoreError.self) { try results[1].get() }
        #expect(try db.document("bad") == nil)
    }

    @Test func compactionKeepsReferencedBlobsIncludingConflictsAndRemovesTheRest() throws {
        let dir = TempDir()
        let path = dir.path("c.ferry")
        var db = try Database.open(at: path)
        let current = try db.writeBlob(Array("current".utf8))
        let conflicting = try db.writeBlob(Array("conflicting".utf8))
        let orphan = try db.writeBlob(Array("orphan".utf8))
        var doc = Document(id: "d")
        doc.setAttachment("a", blob: current)
        try db.save(doc)
        // A conflicting replicated leaf (kept: no resolver) references another blob.
        let branch = CanonicalJSON.encode(["_attachments": attachments(conflicting.digest, length: 11, revpos: 1)])
        let outcome = try db.insert(ReplicatedRevision(documentID: "d", history: ["1-00"], body: branch), resolver: nil)
        #expect(outcome.conflictedWith != nil)
        #expect(try db.revisionTree(of: "d")?.leaves.count == 2)
        // Written by this instance and not referenced yet: a save may be about to reference it.
        #expect(try db.compact() == CompactionResult())
        #expect(db.hasBlob(digest: orphan.digest))
        db.close()

        // An abandoned temp file, as a crash mid-write leaves it.
        let folder = path + ".attachments"
        let abandoned = folder + "/incoming-\(UUID().uuidString).tmp"
        #expect(FileManager.default.createFile(atPath: abandoned, contents: Data("half a blo".utf8)))

        db = try Database.open(at: path)
        defer { db.close() }
        let result = try db.compact()
        #expect(result.blobsRemoved == 1 && result.bytesFreed == 6 && result.tempFilesRemoved == 1)
        #expect(!db.hasBlob(digest: orphan.digest))
        #expect(db.hasBlob(digest: current.digest) && db.hasBlob(digest: conflicting.digest))
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(try db.compact() == CompactionResult())
    }

    @Test func purgeOrDeletionThenCompactRemovesTheBlob() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let one = try db.writeBlob(Array("one".utf8)), two = try db.writeBlob(Array("two".utf8))
        var p = Document(id: "purged"), d = Document(id: "deleted")
        p.setAttachment("x", blob: one)
        d.setAttachment("y", blob: two)
        try db.save(p)
        let saved = try db.save(d)
        #expect(try db.compact() == CompactionResult())          // both referenced
        try db.purge("purged")
        try db.delete(saved)                                     // the tombstone `{}` references nothing
        let result = try db.compact()
        #expect(result.blobsRemoved == 2)
        #expect(blobFolder(db).blobs.isEmpty)
    }

    @Test func blobsAreNeverHalfWrittenUnderTheirDigestName() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        // Temp names can never be taken for a blob, whatever their content.
        #expect(BlobStore.digest(fromFileName: "incoming-\(UUID().uuidString).tmp") == nil)
        let digest = BlobDigest(of: Array("x".utf8))
        #expect(BlobStore.digest(fromFileName: digest.fileName) == digest)
        // While a writer is open its bytes are only in its temp file, which compaction leaves alone.
        let w = try db.makeBlobWriter()
        try w.write(Array("streaming".utf8))
        #expect(blobFolder(db).blobs.isEmpty && blobFolder(db).temps.count == 1)
        #expect(try db.compact().tempFilesRemoved == 0)
        let meta = try w.finish()
        #expect(blobFolder(db).blobs == [meta.digest.fileName] && blobFolder(db).temps.isEmpty)
        #expect(throws: StoreError.invalidArgument("blob writer already finished")) { try w.write([1]) }
        // A cancelled or dropped writer leaves nothing.
        let cancelled = try db.makeBlobWriter()
        try cancelled.write(Array("never".utf8))
        cancelled.cancel()
        do {
            let dropped = try db.makeBlobWriter()
            try dropped.write(Array("dropped".utf8))
        }
        #expect(blobFolder(db).temps.isEmpty && blobFolder(db).blobs.count == 1)
        // A failing source stores nothing either.
        struct SourceFailed: Error {}
        let failing = AsyncThrowingStream<[UInt8], any Error> { c in
            c.yield(Array("partial".utf8))
            c.finish(throwing: SourceFailed())
        }
        await #expect(throws: SourceFailed.self) { try await db.writeBlob(from: failing) }
        #expect(blobFolder(db).temps.isEmpty && blobFolder(db).blobs.count == 1)
        db.close()
        #expect(throws: StoreError.closed) { try db.writeBlob([1]) }
        #expect(throws: StoreError.closed) { try db.readBlob(digest: meta.digest) }
    }
}

/// Compaction against writers running at the same time.
@Suite struct AttachmentConcurrencyTests {
    @Test func compactionRacingWritersNeverLosesAReferencedBlob() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let rounds = 60
        // One task writes blobs and then saves documents referencing them (the window a
        // compaction must not exploit); another compacts continuously until the writer is done.
        async let written: [BlobDigest] = Task.detached {
            var out: [BlobDigest] = []
            for i in 0..<rounds {
                let meta = try db.writeBlob(Array("blob \(i)".utf8))
                var doc = Document(id: "d\(i)")
                doc.setAttachment("x", blob: meta)
                try db.save(doc)
                out.append(meta.digest)
            }
            return out
        }.value
        let compactions = Task.detached {
            var n = 0
            while !Task.isCancelled {
                _ = try db.compact()
                n += 1
            }
            return n
        }
        let digests = try await written
        compactions.cancel()
        #expect(try await compactions.value > 0)
        #expect(try db.compact().blobsRemoved == 0)
        for (i, d) in digests.enumerated() {
            let doc = try #require(try db.document("d\(i)"))
            #expect(try db.attachments(of: doc).map(\.isFetched) == [true])
            #expect(db.hasBlob(digest: d))
        }
    }
}
