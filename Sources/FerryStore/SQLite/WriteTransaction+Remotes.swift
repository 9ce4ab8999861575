/// Remote peers' numbers and the purge count that replication bookkeeping reads.
extension WriteTransaction {
    // MARK: - Remotes

    /// `meta.purges` (see `Database.purgeCount()`).
    func purgeCount() throws(StoreError) -> Int64 {
        try Self.purgeCount(conn)
    }

    static func purgeCount(_ conn: Connection) throws(StoreError) -> Int64 {
        let s = try conn.prepare(AcknowledgedRevisions.purgesSQL)
        defer { s.reset() }
        return try s.step() ? s.int64(0) : 0
    }

    /// The number of a remote (peer address / replication ID), created on first use.
    func remoteKey(_ address: String) throws(StoreError) -> Int {
        // A batch of pulled revisions asks once per revision; the answer cannot change within
        // the transaction (and a rolled-back one takes this cache with it).
        if let key = remoteKeys[address] { return key }
        let q = try conn.prepare("SELECT remote_key FROM remotes WHERE address = ?")
        q.bind(1, address)
        let key: Int
        if try q.step() {
            key = q.int(0)
            q.reset()
        } else {
            q.reset()
            let i = try conn.prepare("INSERT INTO remotes (address) VALUES (?)")
            i.bind(1, address)
            try i.run()
            key = Int(conn.lastInsertRowID)
        }
        remoteKeys[address] = key
        return key
    }
}
