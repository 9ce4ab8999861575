import Dispatch
import FerryNet
import FerryStore
import FerrySync
import FoundationEssentials
import Logging
import Synchronization

/// The daemon's managed replications (Protocol/replicator.md): created once, kept in the
/// replications file, started when the daemon starts, resumed from their checkpoints after a
/// crash, paused, resumed and deleted on request, and reported in CouchDB's
/// `_scheduler/jobs` shape.
public final class ReplicationScheduler: Sendable {
    /// Which periodic interval applies (seed 003's foreground and background).
    public enum Mode: String, Sendable, CaseIterable {
        /// The app is in use: `schedule.every`.
        case active
        /// In the background: `schedule.background_every`.
        case background
    }

    /// Why a request to the scheduler is refused.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// No replication has that ID.
        case notFound(String)
        /// The revision given is not the current one (or none was given for an existing one).
        case conflict(String)
        /// The replications file could not be written.
        case io(String)

        public var description: String {
            switch self {
            case .notFound(let s), .conflict(let s), .io(let s): return s
            }
        }
    }

    /// What the scheduler needs from its daemon.
    public struct Configuration: Sendable {
        /// Where replications are kept; nil = only transient ones (nothing survives a restart).
        public var store: ReplicationStore?
        /// Seconds between WebSocket pings unless a replication says.
        public var heartbeat: Double = 30
        /// The longest wait between reconnection attempts.
        public var retryMaxWait: Double = 30
        /// How peers' certificates are verified before a replication's own pins.
        public var tls = TLSClientConfiguration()
        /// How often unmet conditions are checked again.
        public var pollInterval: Double = 0.25
        /// A configuration that keeps replications in `store`.
        public init(store: ReplicationStore?) { self.store = store }
    }

    private let configuration: Configuration
    private let links: ReplicationRegistry?
    private let resolve: @Sendable (String) -> Database?
    private let replications = Mutex<[String: ManagedReplication]>([:])
    private let modeState = ModeBox()
    /// Whether counters changed since the file was last written (they are written at most once a second).
    private let dirty = Mutex(false)
    private let flusher = Mutex<Task<Void, Never>?>(nil)
    /// One change at a time (add, remove, pause …): each awaits replicators stopping, and an
    /// `exclusively` must not interleave with another add.
    private let gate = AsyncGate()
    private let logger: Logger

    /// A scheduler for the databases `resolve` finds.
    public init(configuration: Configuration, resolve: @escaping @Sendable (String) -> Database?,
                links: ReplicationRegistry? = nil, logger: Logger = Logger(label: "ferry.replications")) {
        self.configuration = configuration
        self.links = links
        self.resolve = resolve
        self.logger = logger
    }

    private var environment: ManagedReplication.Environment {
        var e = ManagedReplication.Environment(
            database: resolve, mode: { [modeState] in modeState.value },
            changed: { [weak self] _, durable in self?.changed(durable: durable) })
        e.heartbeat = configuration.heartbeat
        e.retryMaxWait = configuration.retryMaxWait
        e.tls = configuration.tls
        e.pollInterval = configuration.pollInterval
        e.logger = logger
        return e
    }

    /// Loads the stored replications and starts them (`restarted` in their history); a
    /// completed one-shot replication stays completed.
    public func start() throws(Failure) {
        var entries: [String: ReplicationStore.Entry] = [:]
        if let store = configuration.store {
            do { entries = try store.load() } catch { throw .io("\(error)") }
        }
        let env = environment
        let started = entries.values.sorted { $0.spec.id < $1.spec.id }.map { managed($0, env) }
        replications.withLock { r in for m in started { r[m.id] = m } }
        for m in started { m.start("restarted") }
        flusher.withLock { f in
            f = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard let self else { return }
                    self.fileQueue.async { self.flushIfDirty() }
                }
            }
        }
    }

    /// Stops every replication (each saves its checkpoint; `stopped` in its history) and
    /// writes the file.
    public func stop() async {
        flusher.withLock { $0?.cancel() }
        await gate.run {
            let all = replications.withLock { Array($0.values) }
            await withTaskGroup(of: Void.self) { g in
                // Only what is working is stopped; a paused, completed or failed one keeps its state.
                for m in all where m.isRunning { g.addTask { await m.stop("stopped", state: .pending) } }
            }
            do throws(Failure) { try await saveOrThrow() } catch {
                logger.error("cannot write the replications file", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Active or background now.
    public var mode: Mode { modeState.value }

    /// Switches periodic replications to the other interval (effective at once: a run due
    /// under the new interval starts now).
    public func setMode(_ mode: Mode) {
        let old = modeState.exchange(mode)
        if old != mode { logger.info("replication mode changed", metadata: ["mode": "\(mode.rawValue)"]) }
    }

    /// Every replication now, by ID.
    public var entries: [ReplicationStore.Entry] {
        replications.withLock { Array($0.values) }.map(\.entry).sorted { $0.spec.id < $1.spec.id }
    }

    /// One replication now.
    public func entry(_ id: String) -> ReplicationStore.Entry? { replications.withLock { $0[id] }?.entry }

    /// Creates (no `revision`) or replaces (`revision` = the current one) replication `spec.id`
    /// and starts it. With `exclusively`, every other replication of the same database with
    /// another peer is stopped and deleted first, in the same file write, so there is no
    /// moment at which both run. Returns the new revision.
    @discardableResult
    public func put(_ spec: ReplicationSpec, revision: String?, exclusively: Bool = false, transient: Bool = false) async throws(Failure) -> String {
        let result: Result<String, Failure> = await gate.run {
            let old = replications.withLock { $0[spec.id] }
            if let old {
                guard let revision, revision == old.entry.revision else {
                    return .failure(.conflict("Document update conflict: replication \(spec.id) exists; give its current _rev"))
                }
            } else if revision != nil {
                return .failure(.conflict("Document update conflict: no replication \(spec.id) to update"))
            }
            var removed: [ManagedReplication] = []
            if exclusively {
                removed = replications.withLock { r in r.values.filter { $0.id != spec.id && $0.entry.spec.database == spec.database && $0.entry.spec.peer != spec.peer } }
            }
            if let old { removed.append(old) }
            await withTaskGroup(of: Void.self) { g in for m in removed { g.addTask { await m.stop(nil) } } }
            var journal = old?.entry.journal ?? ReplicationJournal()
            let newSpec = old.map { spec.keepingCredentials(of: $0.entry.spec) } ?? spec
            journal.record(old == nil ? "added" : "updated")
            if old != nil, journal.state == .completed { journal.state = .initializing }
            let rev = ReplicationStore.nextRevision(after: old?.entry.revision)
            let m = managed(.init(revision: rev, spec: newSpec, journal: journal, transient: transient), environment)
            replications.withLock { r in
                for x in removed { r[x.id] = nil }
                r[m.id] = m
            }
            for x in removed { x.link.map { links?.remove($0) } }
            do throws(Failure) { try await saveOrThrow() } catch { return .failure(error) }
            for x in removed where x.id != spec.id {
                logger.info("replication deleted by an exclusive one", metadata: ["id": "\(x.id)", "by": "\(spec.id)"])
            }
            m.start(nil)
            return .success(rev)
        }
        return try result.get()
    }

    /// Stops and deletes replication `id` (`revision` must be the current one, if given).
    public func remove(_ id: String, revision: String?) async throws(Failure) {
        let result: Result<Void, Failure> = await gate.run {
            guard let m = replications.withLock({ $0[id] }) else { return .failure(.notFound("no replication \(id)")) }
            if let revision, revision != m.entry.revision { return .failure(.conflict("Document update conflict: _rev is not the current one")) }
            // Out of the table first: it is gone for everyone from now on (a peer that left
            // is no longer listed while its connection finishes closing).
            replications.withLock { $0[id] = nil }
            m.link.map { links?.remove($0) }
            await m.stop(nil)
            do throws(Failure) { try await saveOrThrow() } catch { return .failure(error) }
            return .success(())
        }
        try result.get()
    }

    /// Pauses (stops, remembered across restarts) or resumes replication `id`.
    public func setPaused(_ id: String, _ paused: Bool) async throws(Failure) {
        let result: Result<Void, Failure> = await gate.run {
            guard let m = replications.withLock({ $0[id] }) else { return .failure(.notFound("no replication \(id)")) }
            guard m.entry.journal.paused != paused else { return .success(()) }
            if paused {
                m.update { $0.journal.paused = true }
                await m.stop("paused", state: .paused)
            } else {
                m.update { e in
                    e.journal.paused = false
                    e.journal.record("resumed")
                }
                m.start(nil)
            }
            do throws(Failure) { try await saveOrThrow() } catch { return .failure(error) }
            return .success(())
        }
        try result.get()
    }

    /// Runs `spec` once, as a transient replication, and returns its entry and the error that
    /// stopped it when it is done (`POST /_replicate`); a continuous one is started and
    /// returned at once.
    public func runOnce(_ spec: ReplicationSpec) async throws(Failure) -> (ReplicationStore.Entry, ReplicationError?) {
        try await put(spec, revision: nil, transient: true)
        guard !spec.continuous, let m = replications.withLock({ $0[spec.id] }) else {
            return (entry(spec.id) ?? ReplicationStore.Entry(revision: "", spec: spec, journal: ReplicationJournal()), nil)
        }
        let done = await m.waitUntilSettled()
        let error = m.session.lastError
        try? await remove(spec.id, revision: nil)
        return (done, error)
    }

    private func managed(_ entry: ReplicationStore.Entry, _ env: ManagedReplication.Environment) -> ManagedReplication {
        ManagedReplication(entry: entry, environment: env, link: links?.link(target: entry.spec.peer, database: entry.spec.database))
    }

    /// The session counters of replication `id`.
    func session(_ id: String) -> ManagedReplication.Session? { replications.withLock { $0[id] }?.session }

    // MARK: Persistence

    /// Every write of the file happens here, one at a time: never on an event loop or the
    /// cooperative pool, where an `fsync` on a busy disk would stall unrelated work.
    private let fileQueue = DispatchQueue(label: "ferry.replications.file")

    /// A journal changed: a state change is written at once (queued), counters within a second.
    private func changed(durable: Bool) {
        dirty.withLock { $0 = true }
        if durable { fileQueue.async { [weak self] in self?.flushIfDirty() } }
    }

    /// On `fileQueue`: writes the file if anything changed since the last write.
    private func flushIfDirty() {
        guard dirty.withLock({ d in defer { d = false }; return d }) else { return }
        do throws(Failure) { try write() } catch { logger.error("cannot write the replications file", metadata: ["error": "\(error)"]) }
    }

    /// Writes the file now (on `fileQueue`) and returns when it is on disk.
    private func saveOrThrow() async throws(Failure) {
        let r: Result<Void, Failure> = await withCheckedContinuation { c in
            fileQueue.async { [self] in
                dirty.withLock { $0 = false }
                c.resume(returning: Result { () throws(Failure) in try write() })
            }
        }
        try r.get()
    }

    /// Only on `fileQueue`.
    private func write() throws(Failure) {
        guard let store = configuration.store else { return }
        let all = replications.withLock { r in r.mapValues(\.entry) }
        do { try store.save(all) } catch { throw .io("\(error)") }
    }
}

/// The mode, shared with every replication's environment.
final class ModeBox: Sendable {
    private let mode = Mutex(ReplicationScheduler.Mode.active)
    var value: ReplicationScheduler.Mode { mode.withLock { $0 } }
    func exchange(_ new: ReplicationScheduler.Mode) -> ReplicationScheduler.Mode { mode.withLock { m in defer { m = new }; return m } }
}

/// Runs async bodies one at a time, in arrival order.
final class AsyncGate: Sendable {
    private let state = Mutex<(busy: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func run<T: Sendable>(_ body: () async -> T) async -> T {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s -> Bool in
                if s.busy { s.waiters.append(c); return false }
                s.busy = true
                return true
            }
            if go { c.resume() }
        }
        defer {
            let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
                if s.waiters.isEmpty { s.busy = false; return nil }
                return s.waiters.removeFirst()
            }
            next?.resume()
        }
        return await body()
    }
}
