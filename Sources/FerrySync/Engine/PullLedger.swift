import FerryStore
import Synchronization

/// Every revision a pull asked for, from the request to its end, kept in one place (LiteCore
/// gives each incoming revision one owner, `IncomingRev`, for the same reason: counts kept
/// apart drift apart).
///
/// A revision is *requested* when the answer to a `changes` or `proposeChanges` entry asks
/// for it, has *arrived* once its `rev` came, and ends *stored* (its transaction committed and
/// its completion ran) or *withdrawn* (`norev`, refused, malformed, its attachments could not
/// be fetched). From those states alone the ledger gives:
/// - **the gate**: the next `changes` message waits (`waitForRoom`) while more than `limit`
///   revisions are requested or arrived and not ended — so however many `changes` messages a
///   feeder keeps in flight, at most `limit` plus one batch are pending, and the writer's
///   queue is bounded too;
/// - **the linger hint**: `onTheWay`, the revisions requested and not arrived, for which the
///   inserter may hold a small transaction open a moment;
/// - **the checkpoint**: the last listed sequence before which every entry is done (stored,
///   skipped, given up on) — sequences can be any JSON value (Sync Gateway's are strings) and
///   need no ordering of their own;
/// - **the caught-up signal**: the peer said it is caught up and nothing is outstanding.
final class PullLedger: Sendable {
    /// What a change to the ledger means for its owner.
    struct Standing: Equatable {
        /// The peer is caught up and every revision asked for has ended.
        var idle: Bool
        /// The checkpoint has passed the one last written, and no pending transaction will
        /// write it: the owner asks the inserter for a transaction that does.
        var checkpointBehind: Bool
    }

    /// The most revisions pending before `changes` handling waits.
    let limit: Int

    private struct State {
        var sequences = SequenceWindow()
        var onTheWay = 0
        var arrived = 0
        var caughtUp = false
        /// The first error that ended the session (the peer broke the protocol, or a revision
        /// could not be stored for a reason that may pass).
        var error: ReplicationError?
        /// A transaction failed as a whole after counting its revisions done: no later
        /// transaction of this session may write the checkpoint.
        var storeFailed = false
        /// The checkpoint last handed to a transaction (which may still be committing).
        var recorded: JSONValue?
        var closed = false
        var roomWaiters: [CheckedContinuation<Bool, Never>] = []
        var doneWaiters: [(continuous: Bool, continuation: CheckedContinuation<ReplicationError?, Never>)] = []

        var pending: Int { onTheWay + arrived }
        var idle: Bool { caughtUp && pending == 0 && sequences.isEmpty }
        var checkpointBehind: Bool {
            !storeFailed && sequences.checkpoint != nil && sequences.checkpoint != recorded
        }
        var standing: Standing { Standing(idle: idle, checkpointBehind: checkpointBehind) }

        /// The waiters to wake now: gate waiters if there is room, pull waiters if the pull
        /// ended or (one-shot) is idle.
        mutating func wakeable(limit: Int) -> Wake {
            var wake = Wake()
            if closed || pending <= limit {
                wake.room = roomWaiters.map { ($0, !closed) }
                roomWaiters = []
            }
            let (ended, idle) = (closed || error != nil, self.idle)
            // This runs on every transition (each revision, twice): while the pull goes on,
            // nobody waiting for its end is woken, and their list is not rebuilt.
            if (ended || idle) && !doneWaiters.isEmpty {
                var kept: [(continuous: Bool, continuation: CheckedContinuation<ReplicationError?, Never>)] = []
                for w in doneWaiters {
                    if ended || (idle && !w.continuous) { wake.done.append(w.continuation) } else { kept.append(w) }
                }
                doneWaiters = kept
            }
            wake.error = closed ? nil : error
            return wake
        }
    }

    private struct Wake {
        var room: [(CheckedContinuation<Bool, Never>, Bool)] = []
        var done: [CheckedContinuation<ReplicationError?, Never>] = []
        var error: ReplicationError?
        func resume() {
            for (c, open) in room { c.resume(returning: open) }
            for c in done { c.resume(returning: error) }
        }
    }

    private let state: Mutex<State>

    /// A ledger whose gate holds `changes` handling while more than `limit` (at least 1)
    /// revisions are pending.
    init(limit: Int) {
        self.limit = max(1, limit)
        state = Mutex(State())
    }

    /// Runs `body` on the state, then wakes whoever may go on, outside the lock.
    private func update<T>(_ body: (inout State) -> T) -> T {
        let (result, wake) = state.withLock { s in
            let r = body(&s)
            return (r, s.wakeable(limit: limit))
        }
        wake.resume()
        return result
    }

    // MARK: Reading

    /// Revisions requested whose `rev` has not come yet.
    var onTheWay: Int { state.withLock { $0.onTheWay } }
    /// Revisions requested or arrived that have not ended.
    var pending: Int { state.withLock { $0.pending } }
    /// Callers waiting at the gate now.
    var waitingForRoom: Int { state.withLock { $0.roomWaiters.count } }
    /// The last sequence before which every listed entry is done.
    var checkpoint: JSONValue? { state.withLock { $0.sequences.checkpoint } }

    // MARK: Transitions

    /// A batch of entries was answered: `wanted[i]` says whether entry `i` was asked for.
    /// `sequences` are the entries' sequences (nil: the entries have none, as proposals, and
    /// no checkpoint is kept for them).
    @discardableResult
    func requested(_ keys: [(documentID: String, revisionID: String)], sequences: [JSONValue]?,
                   wanted: [Bool]) -> Standing {
        update { s in
            if let sequences {
                for (i, k) in keys.enumerated() {
                    s.sequences.add(documentID: k.documentID, revisionID: k.revisionID, sequence: sequences[i], done: !wanted[i])
                }
            }
            s.onTheWay += wanted.count { $0 }
            return s.standing
        }
    }

    /// The peer said it has nothing more to list (for now, if continuous).
    func caughtUp() -> Standing {
        update { s in
            s.caughtUp = true
            return s.standing
        }
    }

    /// A `rev` came (before its attachments are fetched or it is stored).
    func arrived() {
        update { s in
            s.onTheWay = max(0, s.onTheWay - 1)
            s.arrived += 1
        }
    }

    /// Inside the transaction that stores these revisions (refused ones too): their entries are
    /// done. Returns the checkpoint the transaction must write, if it moved past the last one
    /// written and no earlier failure forbids it.
    func stored(_ revisions: [(documentID: String, revisionID: String)]) -> JSONValue? {
        state.withLock { s in
            guard !s.storeFailed else { return nil }
            for r in revisions { s.sequences.complete(documentID: r.documentID, revisionID: r.revisionID) }
            guard s.checkpointBehind, let cp = s.sequences.checkpoint else { return nil }
            s.recorded = cp
            return cp
        }
    }

    /// `n` arrived revisions' completion ran (stored or refused): they are no longer pending.
    @discardableResult
    func ended(_ n: Int = 1) -> Standing {
        update { s in
            s.arrived = max(0, s.arrived - n)
            return s.standing
        }
    }

    /// A revision asked for will not be stored. `arrived`: its `rev` came (and was counted by
    /// `arrived()`). `entry`: its IDs, if known; its entry is done unless `keepOpen` (a failure
    /// that may pass: the checkpoint must stop before it, so the next session asks again).
    func withdrawn(_ entry: (documentID: String, revisionID: String)?, arrived: Bool, keepOpen: Bool) -> Standing {
        update { s in
            if arrived { s.arrived = max(0, s.arrived - 1) } else { s.onTheWay = max(0, s.onTheWay - 1) }
            if let entry, !keepOpen { s.sequences.complete(documentID: entry.documentID, revisionID: entry.revisionID) }
            return s.standing
        }
    }

    /// A transaction failed as a whole: no later one of this session writes the checkpoint.
    func storeFailed() {
        state.withLock { $0.storeFailed = true }
    }

    /// Ends the session with `error` (the first one is kept); whoever waits for the pull is
    /// told it.
    func end(with error: ReplicationError) {
        update { s in s.error = s.error ?? error }
    }

    /// Closes the ledger: the gate tells every waiter, now and later, that the pull is ending,
    /// and pull waiters return.
    func close() {
        update { s in s.closed = true }
    }

    // MARK: Waiting

    /// Returns true once the pull is idle — caught up, every revision asked for ended — even
    /// for a continuous pull (which is idle between bursts of changes); false if the session
    /// ended with an error or the ledger closed first.
    func waitUntilIdle() async -> Bool {
        guard await waitUntilDone(continuous: false) == nil else { return false }
        return !state.withLock { $0.closed }
    }

    /// Returns true once at most `limit` revisions are pending; false if the ledger closed.
    func waitForRoom() async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool? in
                if s.closed { return false }
                if s.pending <= limit { return true }
                s.roomWaiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// Returns once the peer is caught up and every revision asked for has ended (one-shot;
    /// a continuous pull only returns for an error), when the session ends with an error (then
    /// that error), when the ledger closes, or when the calling task is cancelled.
    func waitUntilDone(continuous: Bool) async -> ReplicationError? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<ReplicationError?, Never>) in
                update { s in
                    // A cancelled session (stop, lost connection) stops waiting at once.
                    if Task.isCancelled { s.closed = true }
                    s.doneWaiters.append((continuous, c))
                }
            }
        } onCancel: {
            close()
        }
    }
}

/// The listed entries of a pull in the order the peer listed them, and the checkpoint they
/// give: the sequence of the last entry before which every entry is done.
struct SequenceWindow: Sendable {
    private var window: [(key: Key, sequence: JSONValue, done: Bool)] = []
    private var start = 0
    private var index: [Key: Int] = [:]
    /// The last sequence up to which everything is done.
    private(set) var checkpoint: JSONValue?

    /// An entry's IDs as they are (joining them into one string cost an allocation per entry),
    /// with their hash taken once: removing a key makes the table re-hash the keys it moves
    /// into the hole, and hashing both strings again for each was most of the ledger's cost on
    /// the pull's writer. The hash is the standard seeded one, so the table stays as hard to
    /// flood as with the strings themselves.
    private struct Key: Hashable {
        let documentID: String
        let revisionID: String
        let digest: Int

        init(_ documentID: String, _ revisionID: String) {
            self.documentID = documentID
            self.revisionID = revisionID
            var h = Hasher()
            h.combine(documentID)
            h.combine(revisionID)
            digest = h.finalize()
        }

        static func == (a: Key, b: Key) -> Bool {
            a.digest == b.digest && a.documentID == b.documentID && a.revisionID == b.revisionID
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }
    }

    private static func key(_ documentID: String, _ revisionID: String) -> Key { Key(documentID, revisionID) }

    /// Whether entries are still waiting.
    var isEmpty: Bool { start == window.count }

    /// Adds a listed entry; `done` if nothing will arrive for it.
    mutating func add(documentID: String, revisionID: String, sequence: JSONValue, done: Bool) {
        let k = Self.key(documentID, revisionID)
        window.append((k, sequence, done))
        if !done { index[k] = window.count - 1 }
        advance()
    }

    /// Marks a requested revision's entry done; false for one never requested.
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
            // `mapValues` keeps the table's layout: assigning while iterating copied it and
            // re-hashed every key.
            let shift = start
            index = index.mapValues { $0 - shift }
            start = 0
        }
    }
}
