import FerryNet
import FerryStore
import FerrySync
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// One managed replication at work: runs its spec (continuous, one-shot or periodic with a
/// budget), waits for its conditions, restarts after failures with a growing delay, and keeps
/// its journal — which the scheduler persists — up to date.
final class ManagedReplication: Sendable {
    /// What a replication needs from the daemon around it.
    struct Environment: Sendable {
        /// The local database by name (nil = not served).
        var database: @Sendable (String) -> Database?
        /// Active or background (for periodic schedules).
        var mode: @Sendable () -> ReplicationScheduler.Mode
        /// Called after the journal changed; `durable` for a state change (persist now).
        var changed: @Sendable (_ id: String, _ durable: Bool) -> Void
        /// Seconds between WebSocket pings unless the spec says.
        var heartbeat: Double = 30
        /// The longest wait between reconnection attempts.
        var retryMaxWait: Double = 30
        /// The TLS settings peers are verified with, before the spec's pins.
        var tls = TLSClientConfiguration()
        /// Conditions are checked this often while unmet, and periodic sleeps wake this often
        /// to notice a mode change.
        var pollInterval: Double = 0.25
        var logger = Logger(label: "ferry.replications")
    }

    /// Counters since this daemon started it (`_scheduler/jobs`' `info.session`).
    struct Session: Sendable {
        var started = Date().timeIntervalSince1970
        var pushed = 0
        var pulled = 0
        var progress: ReplicationProgress?
        var activity = ActivityLevel.stopped
        /// The last error that stopped or interrupted a run.
        var lastError: ReplicationError?
    }

    private struct Inner: Sendable {
        var entry: ReplicationStore.Entry
        var session = Session()
        var task: Task<Void, Never>?
        var replicator: Replicator?
        /// The last replication error counted (one outage, many status changes).
        var countedError: ReplicationError?
        /// Waiting for the run to settle (`waitUntilSettled`).
        var settleWaiters: [CheckedContinuation<ReplicationStore.Entry, Never>] = []
    }

    let id: String
    /// What `/_up` and `/_metrics` report of it.
    let link: ReplicationLink?
    private let inner: Mutex<Inner>
    private let environment: Environment

    init(entry: ReplicationStore.Entry, environment: Environment, link: ReplicationLink?) {
        id = entry.spec.id
        inner = Mutex(Inner(entry: entry))
        self.environment = environment
        self.link = link
    }

    var entry: ReplicationStore.Entry { inner.withLock { $0.entry } }
    /// Whether it is working (not paused, completed or failed for good).
    var isRunning: Bool { inner.withLock { $0.task != nil } }
    var session: Session { inner.withLock { $0.session } }

    /// Starts working (a paused one only records that it is paused). `event`, if any, goes in
    /// the history (`restarted` at daemon start); each run records its own `started`.
    func start(_ event: String?) {
        inner.withLock { s in
            guard s.task == nil else { return }
            if s.entry.journal.paused {
                if s.entry.journal.state != .paused { s.entry.journal.record("paused", state: .paused) }
                return
            }
            // A one-shot replication that completed stays completed across restarts (CouchDB's
            // rule); only a change of its document runs it again.
            let spec = s.entry.spec
            let finished = s.entry.journal.state == .completed && !spec.continuous && spec.schedule == nil
            if let event { s.entry.journal.record(event, state: finished ? nil : .initializing) } else if !finished { s.entry.journal.state = .initializing }
            if finished { return }
            s.task = Task { [self] in
                await run()
                // Done on its own (completed, failed): no longer running. A stop() that raced
                // this has cleared it already.
                inner.withLock { $0.task = nil }
            }
        }
        environment.changed(id, true)
    }

    /// Stops working; the replicator saves its checkpoint. `event` (if any) goes in the history.
    func stop(_ event: String?, state: ReplicationJournal.State? = nil) async {
        let task = inner.withLock { s -> Task<Void, Never>? in
            defer { s.task = nil }
            return s.task
        }
        task?.cancel()
        await task?.value
        let (waiters, entry) = inner.withLock { s in
            if let event { s.entry.journal.record(event, state: state) }
            return Self.takeWaiters(&s)
        }
        if event != nil { environment.changed(id, true) }
        for w in waiters { w.resume(returning: entry) }
    }

    /// Replaces the entry (a new spec or journal flags) without touching the running task.
    func update(_ change: (inout ReplicationStore.Entry) -> Void) {
        inner.withLock { change(&$0.entry) }
    }

    // MARK: Running

    private typealias Waiters = [CheckedContinuation<ReplicationStore.Entry, Never>]

    private func record(_ type: String, _ state: ReplicationJournal.State, reason: String? = nil) {
        let waiters = inner.withLock { Self.record(&$0, type, state, reason) }
        environment.changed(id, true)
        for w in waiters.0 { w.resume(returning: waiters.1) }
    }

    /// Records under the lock; returns the settle waiters to wake (outside it) with the entry.
    private static func record(_ s: inout Inner, _ type: String, _ state: ReplicationJournal.State,
                               _ reason: String?) -> (Waiters, ReplicationStore.Entry) {
        s.entry.journal.record(type, state: state, reason: reason)
        guard [.completed, .failed, .crashing].contains(state) else { return ([], s.entry) }
        return takeWaiters(&s)
    }

    /// The settle waiters, removed, with the entry to wake them with (outside the lock).
    private static func takeWaiters(_ s: inout Inner) -> (Waiters, ReplicationStore.Entry) {
        defer { s.settleWaiters = [] }
        return (s.settleWaiters, s.entry)
    }

    /// Waits until the replication completes, fails or crashes (a one-shot `_replicate`
    /// answers then), or returns at once if it is not running.
    func waitUntilSettled() async -> ReplicationStore.Entry {
        await withCheckedContinuation { c in
            let now = inner.withLock { s -> ReplicationStore.Entry? in
                if s.task == nil || [.completed, .failed, .crashing].contains(s.entry.journal.state) { return s.entry }
                s.settleWaiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    private func run() async {
        let spec = entry.spec
        guard environment.database(spec.database) != nil else {
            record("failed", .failed, reason: "no database \(spec.database) is served")
            return
        }
        if let schedule = spec.schedule {
            await runPeriodically(spec, schedule)
        } else {
            await runUntilDone(spec)
        }
    }

    /// Continuous or one-shot: runs until done (one-shot) or stopped, starting again after a
    /// failure that retrying inside the replicator does not cure, with a growing delay.
    private func runUntilDone(_ spec: ReplicationSpec) async {
        if !spec.continuous && entry.journal.state == .completed { return }
        var failures = 0
        while !Task.isCancelled {
            guard await waitForConditions(spec) else { return }
            guard let configuration = configuration(spec, continuous: spec.continuous) else { return }
            record("started", .running)
            let error = await replicate(configuration, budget: nil)
            if Task.isCancelled { return }
            if let error {
                inner.withLock { $0.session.lastError = error }
                failures += 1
                let delay = min(5 * pow(2, Double(failures - 1)), 300)
                environment.logger.warning("replication \(id) stopped; starting again in \(Int(delay)) s", metadata: ["error": "\(error)"])
                record("crashed", .crashing, reason: "\(error); retrying in \(Int(delay)) s")
                try? await Task.sleep(for: .seconds(delay))
            } else if !spec.continuous {
                record("completed", .completed)
                return
            } else {
                failures = 0
            }
        }
    }

    /// Periodic: a push-and-pull run every interval (by mode), each within its budget; each
    /// run resumes from the checkpoint the last one saved.
    private func runPeriodically(_ spec: ReplicationSpec, _ schedule: ReplicationSpec.Schedule) async {
        while !Task.isCancelled {
            // Sleep in short steps so that a mode change takes effect at once, not after the
            // interval that was current when the sleep began.
            var announced = false
            while !Task.isCancelled {
                let interval = environment.mode() == .background ? (schedule.backgroundEvery ?? schedule.every) : schedule.every
                let due = (entry.journal.lastRun ?? 0) + interval
                let now = Date().timeIntervalSince1970
                if now >= due { break }
                if !announced {
                    record("pending", .pending, reason: "next run at \(ReplicationJournal.iso(due))")
                    announced = true
                }
                try? await Task.sleep(for: .seconds(min(environment.pollInterval, due - now)))
            }
            guard await waitForConditions(spec) else { return }
            guard let configuration = configuration(spec, continuous: false) else { return }
            inner.withLock { $0.entry.journal.lastRun = Date().timeIntervalSince1970 }
            record("started", .running)
            let began = ContinuousClock.now
            let error = await replicate(configuration, budget: schedule.budget > 0 ? schedule.budget : nil)
            if Task.isCancelled { return }
            let took = (ContinuousClock.now - began) / .seconds(1)
            if let error {
                record("crashed", .crashing, reason: "\(error)")
            } else if schedule.budget > 0 && took >= schedule.budget {
                record("budget", .pending, reason: "stopped at the \(Self.decimal(schedule.budget, trimmingZeros: true)) s budget after \(Self.decimal(took)) s")
            } else {
                record("completed", .pending, reason: "caught up in \(Self.decimal(took)) s")
            }
        }
    }

    /// Waits until the spec's conditions hold, as `pending` with the reason meanwhile. False
    /// if cancelled first.
    private func waitForConditions(_ spec: ReplicationSpec) async -> Bool {
        var last: String?
        while !Task.isCancelled {
            guard let unmet = await unmetCondition(spec) else { return true }
            if unmet != last {
                record("pending", .pending, reason: unmet)
                last = unmet
            }
            try? await Task.sleep(for: .seconds(environment.pollInterval))
        }
        return false
    }

    /// Why the spec's conditions do not hold now, or nil if they do.
    private func unmetCondition(_ spec: ReplicationSpec) async -> String? {
        let c = spec.conditions
        if !c.interfaces.isEmpty && !c.interfaces.contains(where: NetworkInterfaces.isUp) {
            return "waiting for interface \(c.interfaces.joined(separator: " or ")) to be up"
        }
        if c.reachable, let url = URLComponents(string: spec.peer), let host = url.host {
            let port = url.port ?? (["wss", "https"].contains(url.scheme?.lowercased()) ? 443 : 80)
            do {
                let conn = try await TCPConnection.connect(host: host, port: port, on: EventLoopGroup.shared.next(), timeout: 2)
                // A connection is closed on its loop; it was never started, so nothing else touches it.
                let unstarted = UncheckedTransfer(conn)
                _ = conn.loop.execute { unstarted.value.close() }
            } catch {
                return "waiting for \(host):\(port) to be reachable (\(error))"
            }
        }
        return nil
    }

    /// The replicator configuration for `spec`, or nil (recorded as failed) if it cannot be made.
    private func configuration(_ spec: ReplicationSpec, continuous: Bool) -> ReplicatorConfiguration? {
        guard let db = environment.database(spec.database) else {
            record("failed", .failed, reason: "no database \(spec.database) is served")
            return nil
        }
        var c = ReplicatorConfiguration(database: db, target: spec.peer)
        c.type = spec.direction == .push ? .push : spec.direction == .pull ? .pull : .pushAndPull
        c.continuous = continuous
        c.documentIDs = spec.documentIDs
        c.pullFilter = spec.filter
        c.pullFilterParameters = spec.queryParameters
        c.selector = spec.selector
        c.peerProtocol = spec.peerProtocol
        if let user = spec.user, let password = spec.password { c.authenticator = .basic(user: user, password: password) }
        c.tls = environment.tls
        if !spec.pins.isEmpty {
            c.tls.pins = spec.pins.compactMap { CertificatePin(.certificate, hex: $0) }
            c.tls.trust = .pinnedCertificatesOnly
        }
        switch spec.conflicts {
        case .default: break
        case .local: c.conflictResolver = .custom { _ in .local }
        case .remote: c.conflictResolver = .custom { _ in .remote }
        }
        if let b = spec.batchSize { c.batchSize = b }
        c.heartbeat = spec.heartbeat ?? environment.heartbeat
        c.maxAttemptWaitTime = environment.retryMaxWait
        // A managed replication is retried until it completes: the replicator's own retries
        // cover a peer that is down; `runUntilDone` covers the rest.
        c.maxAttempts = .max
        if let policy = DownloadRules.policy(spec.download) { c.attachmentDownloadPolicy = policy }
        return c
    }

    /// Runs one replicator to its end (or the budget, or cancellation); returns its error.
    private func replicate(_ configuration: ReplicatorConfiguration, budget: Double?) async -> ReplicationError? {
        let r = Replicator(configuration: configuration, logger: environment.logger)
        link?.attach(r)
        r.addStatusListener { [weak self] s in self?.statusChanged(s) }
        r.addDocumentListener { [weak self] e in self?.event(e) }
        inner.withLock { $0.replicator = r }
        defer { inner.withLock { $0.replicator = nil } }
        r.start()
        let budgetTask = budget.map { b in
            Task {
                try? await Task.sleep(for: .seconds(b))
                if !Task.isCancelled { await r.stop() }
            }
        }
        let error = await withTaskCancellationHandler {
            await r.waitUntilStopped()
        } onCancel: {
            Task { await r.stop() }
        }
        budgetTask?.cancel()
        if Task.isCancelled { await r.stop() }
        return error
    }

    private func statusChanged(_ s: ReplicatorStatus) {
        let (changed, waiters) = inner.withLock { st -> (Bool, (Waiters, ReplicationStore.Entry)?) in
            st.session.progress = s.progress
            st.session.activity = s.activity
            guard st.task != nil else { return (false, nil) }
            if s.activity == .offline, let e = s.lastError, st.countedError != e {
                st.countedError = e
                st.session.lastError = e
                st.entry.journal.lastError = "\(e)"
                st.entry.journal.lastErrorTime = Date().timeIntervalSince1970
                // Once per outage, not at every retry.
                environment.logger.warning("replication \(id): \(st.entry.spec.peer) unreachable; retrying", metadata: ["error": "\(e)"])
                return (true, Self.record(&st, "crashed", .crashing, "\(e)"))
            }
            if (s.activity == .busy || s.activity == .idle) && st.entry.journal.state == .crashing {
                st.countedError = nil
                environment.logger.notice("replication \(id): \(st.entry.spec.peer) reachable again")
                return (true, Self.record(&st, "running", .running, "reconnected"))
            }
            return (false, nil)
        }
        environment.changed(id, changed)
        if let (list, entry) = waiters { for w in list { w.resume(returning: entry) } }
    }

    private func event(_ e: DocumentEvent) {
        inner.withLock { st in
            if case .pushed = e.kind {
                st.session.pushed += 1
                st.entry.journal.docsPushed += 1
            } else if case .pulled = e.kind {
                st.session.pulled += 1
                st.entry.journal.docsPulled += 1
            } else if case .failed(let error) = e.kind {
                st.entry.journal.fail(e.documentID, "\(error)")
            }
        }
        environment.changed(id, false)
    }

    /// `x` with three decimals (`2.105`), or as few as it needs (`2`, `0.5`) when `trimmingZeros`.
    static func decimal(_ x: Double, trimmingZeros: Bool = false) -> String {
        guard x.isFinite else { return "\(x)" }
        let thousandths = Int64((abs(x) * 1000).rounded())
        var text = "\(x < 0 && thousandths > 0 ? "-" : "")\(thousandths / 1000)"
        var fraction = String(thousandths % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        if trimmingZeros { while fraction.last == "0" { fraction.removeLast() } }
        if !fraction.isEmpty { text += "." + fraction }
        return text
    }
}
