extension Database {
    /// The database's security object (CouchDB's `_security`: who may use it, as names and
    /// roles), kept in the file beside the conflict policy and never replicated; nil when it
    /// was never set. The store keeps it as given: its meaning is the server's
    /// (FerryServer's `SecurityObject`).
    public var security: JSONValue? {
        get throws(StoreError) {
            if let cached = securityCache.withLock({ $0.loaded ? $0 : nil }) { return cached.value }
            let value = try readers.withReader { (c) throws(StoreError) -> JSONValue? in
                let s = try c.prepare("SELECT value FROM meta WHERE key = 'security'")
                defer { s.reset() }
                guard try s.step(), !s.isNull(0) else { return nil }
                do { return try JSONParser.parse(s.bytes(0)) } catch {
                    throw .corrupt(path: path, detail: "the security object is not JSON: \(error)")
                }
            }
            securityCache.withLock { $0 = (true, value) }
            return value
        }
    }

    /// Replaces the security object.
    public func setSecurity(_ value: JSONValue) throws(StoreError) {
        let text = String(decoding: CanonicalJSON.encode(value), as: UTF8.self)
        try inBatch { (b) throws(StoreError) in
            let s = try b.txn.conn.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('security', ?)")
            s.bind(1, text)
            try s.run()
        }
        writer.whenCommitted { self.securityCache.withLock { $0 = (true, value) } }
    }
}
