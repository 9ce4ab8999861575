/// Attachments: content-addressed blobs beside the database (docs/store.md §10).
extension Database {
    /// A writer that streams one blob into the store; see `BlobWriter`. The blob exists under
    /// its digest only once `finish()` returns.
    public func makeBlobWriter() throws(StoreError) -> BlobWriter {
        try BlobWriter(store: blobs)
    }

    /// Stores `bytes` as a blob (once, however many documents reference it) and returns its
    /// digest and length. For large blobs prefer `writeBlob(from:)` or `makeBlobWriter()`.
    @discardableResult
    public func writeBlob(_ bytes: [UInt8]) throws(StoreError) -> BlobMetadata {
        let writer = try makeBlobWriter()
        try writer.write(bytes)
        return try writer.finish()
    }

    /// Streams a blob from a sequence of byte chunks (a download, a file), holding one chunk
    /// at a time, and returns its digest and length. If the sequence throws or the task is
    /// cancelled, nothing is stored and the error is rethrown: the sequence's own error as is,
    /// `CancellationError`, or a `StoreError` for storage failures. (Untyped because the
    /// sequence's error type is the caller's; `makeBlobWriter()` is the typed form.)
    @discardableResult
    public func writeBlob<S: AsyncSequence>(from chunks: S) async throws -> BlobMetadata where S.Element == [UInt8] {
        let writer = try makeBlobWriter()
        do {
            for try await chunk in chunks {
                try Task.checkCancellation()
                try writer.write(chunk)
            }
            return try writer.finish()
        } catch {
            writer.cancel()
            throw error
        }
    }

    /// Whether the blob with `digest` is stored here.
    public func hasBlob(digest: BlobDigest) -> Bool {
        blobs.length(of: digest) != nil
    }

    /// Opens a stored blob for reading in chunks; `.notFound` if it is not here (for example an
    /// attachment that was not fetched).
    public func readBlob(digest: BlobDigest) throws(StoreError) -> BlobReader {
        try blobs.checkOpen()
        return try BlobReader(path: blobs.path(of: digest), digest: digest)
    }

    /// The attachments of a document (any revision read from this database, or one about to be
    /// saved), sorted by name, each saying whether its blob is here (`isFetched`). Throws
    /// `.invalidAttachment` if its `_attachments` is malformed (only possible for an unsaved one).
    public func attachments(of document: Document) throws(StoreError) -> [Attachment] {
        try blobs.checkOpen()
        guard let entries = try Attachment.entries(in: document.properties) else { return [] }
        return entries.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { name, e in
            Attachment(name: name, digest: e.digest, length: e.length, contentType: e.contentType,
                       revpos: e.revpos, isFetched: blobs.length(of: e.digest) == e.length)
        }
    }

    /// Deletes every blob that no stored revision body references (current revisions,
    /// conflicting and deleted leaves, remotes' pinned revisions, of every document) and the
    /// temp files of blob writes that never finished. Runs under the writer, so no save can add
    /// a reference meanwhile. Blobs written through this instance and not yet referenced by any
    /// document are kept (the save that will reference them may not have run yet).
    @discardableResult
    public func compact() throws(StoreError) -> CompactionResult {
        try writer.withConnection { (conn) throws(StoreError) -> CompactionResult in
            let referenced = try Self.referencedDigests(conn)
            return try blobs.removeUnreferenced(keeping: referenced)
        }
    }

    /// Every digest named by a stored body. SQL preselects rows whose body or tree contains
    /// `_attachments` or a `\u` escape (which could spell that key); only those are parsed.
    /// A body that fails to parse aborts the compaction before anything is deleted.
    static func referencedDigests(_ conn: Connection) throws(StoreError) -> Set<BlobDigest> {
        let key = "X'5f6174746163686d656e7473'", escape = "X'5c75'"
        let s = try conn.prepare("""
            SELECT doc_id, body, tree FROM docs
            WHERE instr(CAST(body AS BLOB), \(key)) > 0 OR instr(CAST(body AS BLOB), \(escape)) > 0
               OR instr(tree, \(key)) > 0 OR instr(tree, \(escape)) > 0
            """)
        defer { s.reset() }
        var out = Set<BlobDigest>()
        while try s.step() {
            let id = s.string(0)
            let tree = try RevisionTreeCodec.decode(s.bytes(2), currentBody: s.bytes(1), documentID: id)
            for node in tree.nodes.values {
                guard let body = node.body else { continue }
                let props = try WriteTransaction.properties(of: body, documentID: id)
                guard case .object(let members)? = props["_attachments"] else { continue }
                for case .object(let meta) in members.values {
                    if let text = meta["digest"]?.stringValue, let d = try? BlobDigest(text) { out.insert(d) }
                }
            }
        }
        return out
    }
}
