import FerryStore

/// The selector on the push side: CouchDB's replicator applies a replication's `selector` to
/// the source's changes whichever side the source is, so a push sends only the documents whose
/// current revision matches it (a deletion only if its tombstone's body does, as CouchDB's
/// `_selector` filter sees a deleted document), besides what `pushFilter` decides.
extension ReplicatorConfiguration {
    /// The selector parsed; throws (`.store(.invalidArgument)`) for one Mango refuses, so a
    /// replication with a bad selector stops at once instead of pushing nothing.
    func parsedSelector() throws(ReplicationError) -> MangoSelector? {
        guard let selector else { return nil }
        do { return try MangoSelector(json: selector) } catch {
            throw .store(.invalidArgument("bad selector: \(error.reason)"))
        }
    }

    /// What a push sends: documents `pushFilter` accepts (with its parameters) that match the
    /// selector; nil when neither is set.
    var pushAcceptance: (@Sendable (Document, DocumentFlags) -> Bool)? {
        // `main()` checks the selector before any session starts: one that does not parse
        // cannot get here, and would let nothing through if it did.
        let selector: MangoSelector?? = selector.map { try? MangoSelector(json: $0) }
        let filter = pushFilter
        guard filter != nil || selector != nil else { return nil }
        let params = pushFilterParameters
        return { doc, flags in
            if let selector {
                guard let s = selector, s.matches(doc) else { return false }
            }
            return filter?(doc, flags, params) ?? true
        }
    }
}
