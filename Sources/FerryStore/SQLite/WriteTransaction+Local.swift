/// Local (non-replicated) documents: one row each, a generation counter as revision.
extension WriteTransaction {
    func putLocal(_ id: String, properties: [String: JSONValue], expectedRevision: String?) throws(StoreError) -> String {
        guard !id.isEmpty, id.utf8.count <= 250 else { throw .invalidDocumentID(id) }
        let body = CanonicalJSON.encode(properties)
        guard body.count <= options.maxDocumentSize else { throw .tooLarge(limit: options.maxDocumentSize) }
        let q = try conn.prepare("SELECT generation FROM local_docs WHERE doc_id = ?")
        q.bind(1, id)
        let current: Int? = try q.step() ? q.int(0) : nil
        q.reset()
        if let expectedRevision, expectedRevision != current.map({ "0-\($0)" }) {
            throw .conflict(documentID: id)
        }
        let next = (current ?? 0) + 1
        let s = try conn.prepare("INSERT OR REPLACE INTO local_docs (doc_id, generation, body) VALUES (?, ?, ?)")
        s.bind(1, id)
        s.bind(2, next)
        s.bindText(3, body)
        try s.run()
        return "0-\(next)"
    }

    func deleteLocal(_ id: String) throws(StoreError) {
        let s = try conn.prepare("DELETE FROM local_docs WHERE doc_id = ?")
        s.bind(1, id)
        try s.run()
        guard conn.changes > 0 else { throw .notFound }
    }
}
