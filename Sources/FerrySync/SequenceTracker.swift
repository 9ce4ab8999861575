import FerryStore

/// Which of the peer's sequences are fully handled, for the pull checkpoint. Entries are kept
/// in the order the peer listed them; the checkpoint is the sequence of the last entry before
/// which everything is done (stored, skipped or failed) — so sequences can be any JSON value
/// (Sync Gateway's are strings) and need no ordering of their own.
struct SequenceTracker: Sendable {
    private var window: [(key: String, sequence: JSONValue, done: Bool)] = []
    private var start = 0
    private var index: [String: Int] = [:]
    /// The last sequence up to which everything is done.
    private(set) var checkpoint: JSONValue?

    static func key(_ documentID: String, _ revisionID: String) -> String { documentID + "\u{0}" + revisionID }

    /// Whether entries are still waiting.
    var isEmpty: Bool { start == window.count }

    /// Adds a listed entry; `done` if nothing will arrive for it.
    mutating func add(documentID: String, revisionID: String, sequence: JSONValue, done: Bool) {
        let k = Self.key(documentID, revisionID)
        window.append((k, sequence, done))
        if !done { index[k] = window.count - 1 }
        advance()
    }

    /// Marks the entry for a revision done (its `rev` was stored or refused, or a `norev` came).
    /// Returns false for a revision that was never requested.
    @discardableResult
    mutating func complete(documentID: String, revisionID: String) -> Bool {
        guard let i = index.removeValue(forKey: Self.key(documentID, revisionID)) else { return false }
        window[i].done = true
        advance()
        return true
    }

    private mutating func advance() {
        while start < window.count, window[start].done {
            checkpoint = window[start].sequence
            start += 1
        }
        // Compact now and then so the window does not grow with the whole replication.
        if start > 4096 && start * 2 > window.count {
            window.removeFirst(start)
            for (k, v) in index { index[k] = v - start }
            start = 0
        }
    }
}
