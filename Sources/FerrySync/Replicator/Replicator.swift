import FerryBLIP
import FerryHTTP
import FerryNet
import FerryStore
import FerryWebSocket
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// Replicates a local database with a peer (Couchbase Lite's `Replicator`): push, pull or
/// both, one-shot or continuous, with checkpoints, conflict resolution, retries and status.
/// A `ws(s)://` peer speaks BLIP (Couchbase Lite, Sync Gateway, Ferry); an `http(s)://` peer
/// CouchDB's replication protocol (CouchDB, Cloudant, PouchDB Server; Protocol/replication-http.md),
/// unless `peerProtocol` says otherwise.
///
/// ```swift
/// var config = ReplicatorConfiguration(database: db, target: "ws://192.168.1.20:4984/tasks")
/// config.continuous = true
/// let replicator = Replicator(configuration: config)
/// replicator.start()
/// for await status in replicator.statusChanges() { print(status.activity, status.progress) }
/// ```
///
/// Thread-safe; every method may be called from anywhere.
public final class Replicator: Sendable {
    /// The configuration it was made with.
    public let configuration: ReplicatorConfiguration
    private let logger: Logger
    private let statusBroadcaster = Broadcaster<ReplicatorStatus>()
    private let eventBroadcaster = Broadcaster<DocumentEvent>()
    private let attachmentBroadcaster: Broadcaster<AttachmentEvent>
    /// With a download policy: the attachments still to download, kept across sessions.
    private let downloads: AttachmentDownloadQueue?
    private let state = Mutex<(status: ReplicatorStatus, task: Task<Void, Never>?, connected: Bool,
                               stopWaiters: [CheckedContinuation<ReplicationError?, Never>])>(
        (ReplicatorStatus(activity: .stopped, progress: ReplicationProgress(), lastError: nil), nil, false, []))
    private let checkpointer: Checkpointer
    private let reporter: Reporter
    /// The HTTP client of a CouchDB-protocol replication (its pooled connections, TLS trust).
    private let httpClient: HTTPClient

    /// A replicator for `configuration`; call `start()` to run it. Credentials written in the
    /// target URL (`ws://user:password@host/db`, percent-encoded) are taken out of it and used
    /// as HTTP Basic authentication unless `authenticator` is set, which wins; `configuration`
    /// then holds the URL without them (so the checkpoint does not depend on the password).
    public init(configuration: ReplicatorConfiguration, logger: Logger = Logger(label: "ferry.sync.replicator")) {
        var configuration = configuration
        if let (plain, user, password) = Self.splitCredentials(configuration.target) {
            configuration.target = plain
            if configuration.authenticator == nil { configuration.authenticator = .basic(user: user, password: password) }
        }
        // A Sync Gateway given as http(s):// is reached on its WebSocket endpoint.
        if configuration.peerProtocol == .blip, let colon = configuration.target.firstIndex(of: ":"),
           ["http", "https"].contains(configuration.target[..<colon].lowercased()) {
            configuration.target = (configuration.target[..<colon].lowercased() == "https" ? "wss" : "ws") + configuration.target[colon...]
        }
        self.configuration = configuration
        var http = HTTPClient.Configuration()
        http.tls = configuration.tls
        http.userAgent = "Ferry (CouchDB replication)"
        httpClient = HTTPClient(configuration: http)
        self.logger = logger
        checkpointer = Checkpointer(configuration: configuration)
        let attachments = Broadcaster<AttachmentEvent>()
        attachmentBroadcaster = attachments
        downloads = configuration.attachmentDownloadPolicy.map { AttachmentDownloadQueue(policy: $0, onEvent: { attachments.send($0) }) }
        let statusBox = StatusSink()
        reporter = Reporter(onEvent: { statusBox.event($0) }, wantsEvents: { statusBox.wantsEvents },
                            onChange: { p, idle in statusBox.progress(p, idle) })
        statusBox.owner.withLock { $0.replicator = self }
    }

    /// Routes the reporter's callbacks to the replicator, which does not exist yet when the
    /// reporter is made. It holds the replicator weakly: the replicator holds the reporter,
    /// which holds this, and a strong reference back would keep all three alive for ever.
    private final class StatusSink: Sendable {
        struct Owner { weak var replicator: Replicator? }
        let owner = Mutex(Owner())
        func event(_ e: DocumentEvent) { owner.withLock { $0.replicator }?.eventBroadcaster.send(e) }
        var wantsEvents: Bool { owner.withLock { $0.replicator }.map { !$0.eventBroadcaster.isEmpty } ?? false }
        func progress(_ p: ReplicationProgress, _ idle: Bool) { owner.withLock { $0.replicator }?.progressChanged(p, idle: idle) }
    }

    // MARK: Observing

    /// The current status.
    public var status: ReplicatorStatus { state.withLock { $0.status } }

    /// A stream of status changes from now on (each call makes a new subscriber); it ends after
    /// the replicator stops (the `.stopped` status is its last element).
    public func statusChanges() -> AsyncStream<ReplicatorStatus> { statusBroadcaster.stream() }

    /// A stream of document events from now on (each call makes a new subscriber); it ends when
    /// the replicator stops.
    public func documentEvents() -> AsyncStream<DocumentEvent> { eventBroadcaster.stream() }

    /// Calls `listener` on every status change; returns a token for `removeStatusListener`.
    @discardableResult
    public func addStatusListener(_ listener: @escaping @Sendable (ReplicatorStatus) -> Void) -> Int {
        statusBroadcaster.addCallback(listener)
    }

    /// Stops calling a listener.
    public func removeStatusListener(_ token: Int) { statusBroadcaster.removeCallback(token) }

    /// Calls `listener` on every document event, synchronously as it happens (a stream's
    /// consumer may lag; a counter must not); returns a token for `removeDocumentListener`.
    @discardableResult
    public func addDocumentListener(_ listener: @escaping @Sendable (DocumentEvent) -> Void) -> Int {
        eventBroadcaster.addCallback(listener)
    }

    /// Stops calling a document listener.
    public func removeDocumentListener(_ token: Int) { eventBroadcaster.removeCallback(token) }

    /// A stream of attachment events from now on (each call makes a new subscriber): the
    /// attachments a download policy queued, in the order they are downloaded, and those
    /// fetched on demand. It ends when the replicator stops.
    public func attachmentEvents() -> AsyncStream<AttachmentEvent> { attachmentBroadcaster.stream() }

    /// Calls `listener` on every attachment event, synchronously as it happens; returns a token
    /// for `removeAttachmentListener`.
    @discardableResult
    public func addAttachmentListener(_ listener: @escaping @Sendable (AttachmentEvent) -> Void) -> Int {
        attachmentBroadcaster.addCallback(listener)
    }

    /// Stops calling an attachment listener.
    public func removeAttachmentListener(_ token: Int) { attachmentBroadcaster.removeCallback(token) }

    /// Documents with local changes not yet pushed (push replications; empty for pull-only).
    public func pendingDocumentIDs() throws(ReplicationError) -> Set<String> {
        guard configuration.type != .pull else { return [] }
        let db = configuration.database
        var since = checkpointer.value.local
        if since == 0, let doc = try? db.localDocument(checkpointer.localDocumentID) {
            since = Checkpointer.Value(doc.properties).local
        }
        let select = Pusher.selector(database: db, documentIDs: configuration.documentIDs.map(Set.init), filter: pushAccept)
        var out = Set<String>()
        while true {
            let page: [Change]
            do { page = try db.changes(since: since, limit: ReplicatorTuning.scanPageSize) } catch { throw .store(error) }
            guard let last = page.last else { return out }
            for c in page {
                do { if try select?(c) ?? true { out.insert(c.documentID) } } catch {
                    throw ReplicationError(wrapping: error)
                }
            }
            since = last.sequence
        }
    }

    /// Whether a document has local changes not yet pushed.
    public func isDocumentPending(_ documentID: String) throws(ReplicationError) -> Bool {
        try pendingDocumentIDs().contains(documentID)
    }

    // MARK: Running

    /// Starts replicating in the background (no-op if running). Watch `statusChanges()`.
    public func start() {
        state.withLock { s in
            guard s.task == nil else { return }
            s.status = ReplicatorStatus(activity: .connecting, progress: ReplicationProgress(), lastError: nil)
            s.task = Task { await self.main() }
        }
        statusBroadcaster.send(status)
    }

    /// Stops: closes the connection, resolves conflicts still pending (Protocol/revisions.md,
    /// "Resolver input"), and returns when stopped. Checkpoints already saved stay; the next
    /// `start()` resumes there.
    public func stop() async {
        let task = state.withLock { $0.task }
        task?.cancel()
        await task?.value
    }

    /// Waits until the replicator stops (a one-shot replication finishes, it gives up, or
    /// `stop()`); returns the error that stopped it, if any.
    @discardableResult
    public func waitUntilStopped() async -> ReplicationError? {
        await withCheckedContinuation { c in
            let done = state.withLock { s -> ReplicationError?? in
                if s.task == nil { return .some(s.status.lastError) }
                s.stopWaiters.append(c)
                return .none
            }
            if case .some(let e) = done { c.resume(returning: e) }
        }
    }

    /// Runs to completion: starts, waits, throws the error that stopped it.
    public func run() async throws(ReplicationError) {
        start()
        if let e = await waitUntilStopped() { throw e }
    }

    /// Downloads the attachments that pulls left unfetched (skipped by a download policy, or
    /// queued and not downloaded yet) for these documents (nil = every document), from the peer,
    /// over a connection of its own; returns how many blobs were fetched. Each is checked
    /// against its length and digest before it is stored, and reported to attachment listeners.
    @discardableResult
    public func fetchAttachments(documentIDs: [String]? = nil) async throws(ReplicationError) -> Int {
        let db = configuration.database
        var ids = documentIDs ?? []
        if documentIDs == nil {
            var after: String?
            while true {
                let page: [Document]
                do { page = try db.allDocuments(after: after, limit: ReplicatorTuning.scanPageSize) } catch { throw .store(error) }
                guard let last = page.last else { break }
                ids += page.filter { $0.properties["_attachments"] != nil }.map(\.id)
                after = last.id
            }
        }
        var missing: [(document: Document, attachment: Attachment)] = []
        for id in ids {
            do {
                guard let doc = try db.document(id) else { continue }
                for a in try db.attachments(of: doc) where !a.isFetched { missing.append((doc, a)) }
            } catch { throw .store(error) }
        }
        return try await fetch(missing)
    }

    /// Downloads one attachment of a document's current revision on demand (`ferry attachment
    /// get --peer`), from the peer, over a connection of its own. Returns false when it is
    /// already here; throws `.store(.notFound)` when the document or the attachment does not
    /// exist.
    @discardableResult
    public func fetchAttachment(named name: String, documentID: String) async throws(ReplicationError) -> Bool {
        let db = configuration.database
        let doc: Document?
        let attachment: Attachment?
        do throws(StoreError) {
            doc = try db.document(documentID)
            attachment = try doc.map { (d) throws(StoreError) in try db.attachments(of: d) }?.first { $0.name == name }
        } catch { throw .store(error) }
        guard let doc, let attachment else { throw .store(.notFound) }
        return try await fetch(attachment.isFetched ? [] : [(doc, attachment)]) > 0
    }

    /// Fetches the blobs of `missing` not here yet (each once), over one new connection.
    private func fetch(_ missing: [(document: Document, attachment: Attachment)]) async throws(ReplicationError) -> Int {
        guard !missing.isEmpty else { return 0 }
        let db = configuration.database
        let conn = try await connect()
        var fetched = 0
        do throws(ReplicationError) {
            for (doc, a) in missing where !db.hasBlob(digest: a.digest) {
                try await AttachmentTransfer.fetch(a.digest, length: a.length, documentID: doc.id, connection: conn, database: db)
                fetched += 1
                attachmentBroadcaster.send(AttachmentEvent(documentID: doc.id, revisionID: doc.revisionID?.description, name: a.name,
                                                           digest: a.digest, length: a.length, priority: nil, kind: .fetched))
            }
        } catch {
            await conn.close()
            throw error
        }
        await conn.close()
        return fetched
    }

    private func setActivity(_ a: ActivityLevel, error: ReplicationError?? = .none) {
        let s = state.withLock { s -> ReplicatorStatus in
            s.status.activity = a
            if case .some(let e) = error { s.status.lastError = e }
            return s.status
        }
        statusBroadcaster.send(s)
    }

    private func progressChanged(_ p: ReplicationProgress, idle: Bool) {
        let s = state.withLock { s -> ReplicatorStatus? in
            s.status.progress = p
            guard s.connected else { return nil }
            s.status.activity = idle ? .idle : .busy
            return s.status
        }
        if let s, !statusBroadcaster.isEmpty { statusBroadcaster.send(s) }
    }

    private var maxAttempts: Int {
        configuration.maxAttempts > 0 ? configuration.maxAttempts : (configuration.continuous ? .max : 10)
    }

    private func main() async {
        let resolveConflicts = configuration.type != .push
        if resolveConflicts {
            ConflictResolving.resolveAll(database: configuration.database, resolver: configuration.conflictResolver, reporter: reporter,
                                         logger: logger)
        }
        var failures = 0
        var finalError: ReplicationError?
        var first = true
        // Since when the peer has been out of reach (the start, or the last lost session).
        var offlineSince = ContinuousClock.now
        while !Task.isCancelled {
            setActivity(.connecting)
            do throws(ReplicationError) {
                _ = try configuration.parsedSelector()
                if configuration.usesCouchDBProtocol {
                    let couch = try CouchSession(configuration: configuration, client: httpClient, reporter: reporter, logger: logger)
                    try await couch.connect()
                    failures = 0
                    try await couchSession(couch, reset: first && configuration.resetCheckpoint)
                    first = false
                    break
                }
                let conn = try await connect()
                failures = 0
                try await session(conn, reset: first && configuration.resetCheckpoint)
                first = false
                if !configuration.continuous { break }
                // A continuous session only ends when the connection does.
                throw .connection("connection closed by the peer")
            } catch {
                first = false
                if Task.isCancelled { break }
                if failures == 0 { offlineSince = .now }
                failures += 1
                let delay = min(pow(2.0, Double(failures - 1)), configuration.maxAttemptWaitTime)
                let offline = (ContinuousClock.now - offlineSince) / .seconds(1)
                let outOfTime = configuration.maxOfflineTime > 0 && offline + delay > configuration.maxOfflineTime
                guard error.isTransient, failures < maxAttempts, !outOfTime else {
                    finalError = error
                    if case .connection(let why) = error {
                        finalError = .gaveUp(attempts: failures, seconds: Int(offline.rounded()), reason: why)
                    }
                    break
                }
                logger.info("replication interrupted; retrying", metadata: ["error": "\(error)", "in": "\(delay)s"])
                setActivity(.offline, error: .some(error))
                // Jitter so a mesh of peers does not reconnect in lockstep.
                try? await Task.sleep(for: .seconds(delay * Double.random(in: 0.75...1.0)))
            }
        }
        if resolveConflicts {
            ConflictResolving.resolveAll(database: configuration.database, resolver: configuration.conflictResolver, reporter: reporter,
                                         logger: logger)
        }
        let waiters = state.withLock { s -> [CheckedContinuation<ReplicationError?, Never>] in
            s.connected = false
            s.status.activity = .stopped
            s.status.lastError = finalError
            s.task = nil
            defer { s.stopWaiters = [] }
            return s.stopWaiters
        }
        statusBroadcaster.send(status)
        statusBroadcaster.endStreams()
        eventBroadcaster.endStreams()
        attachmentBroadcaster.endStreams()
        for w in waiters { w.resume(returning: finalError) }
    }

    /// `ws://user:password@host/db` → the URL without the user information, the user and the
    /// password (percent-decoded); nil when the URL carries none. A user without a password
    /// counts as an empty password, as HTTP Basic allows.
    static func splitCredentials(_ url: String) -> (String, String, String)? {
        guard var c = URLComponents(string: url), let user = c.user else { return nil }
        let password = c.password ?? ""
        c.user = nil
        c.password = nil
        guard let plain = c.string else { return nil }
        return (plain, PercentEncoding.decode(user) ?? user, PercentEncoding.decode(password) ?? password)
    }

    private func connect() async throws(ReplicationError) -> BLIPConnection {
        var target = configuration.target
        while target.hasSuffix("/") { target.removeLast() }
        var ws = configuration.webSocket ?? BLIPConnection.webSocketConfiguration(app: ReplicationProtocol.app)
        if configuration.heartbeat > 0 {
            ws.pingInterval = configuration.heartbeat
            ws.pingTimeout = configuration.heartbeat
        }
        if case .basic(let user, let password)? = configuration.authenticator {
            ws.extraHeaders.add(name: "Authorization", value: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
        }
        for (k, v) in configuration.headers.sorted(by: { $0.key < $1.key }) { ws.extraHeaders.add(name: k, value: v) }
        var tls: TLSContext?
        if target.lowercased().hasPrefix("wss:") {
            do throws(TLSError) { tls = try TLSContext(client: configuration.tls) } catch { throw .tls(error) }
        }
        do {
            return try await BLIPConnection.connect(to: target + "/" + ReplicationProtocol.endpoint, app: ReplicationProtocol.app, webSocket: ws, tls: tls, logger: logger)
        } catch {
            throw ReplicationError(error)
        }
    }

    /// One session with a CouchDB database; returns when a one-shot replication is done (a
    /// continuous one runs until stopped or until the peer fails).
    private func couchSession(_ couch: CouchSession, reset: Bool) async throws(ReplicationError) {
        state.withLock { $0.connected = true }
        defer { state.withLock { $0.connected = false } }
        setActivity(.busy)
        try await couch.run(reset: reset)
    }

    /// Writes pushed progress still only in memory.
    private func flushPushedCheckpoint() async {
        do { try await checkpointer.flushPushed() } catch {
            logger.warning("could not save the push checkpoint", metadata: ["error": "\(error)"])
        }
    }

    /// The push filter with its parameters bound, and the selector, as the pusher takes them.
    private var pushAccept: (@Sendable (Document, DocumentFlags) -> Bool)? { configuration.pushAcceptance }

    /// One connected session: checkpoints, then push and pull side by side. Returns when a
    /// one-shot replication is done; throws when the connection fails.
    private func session(_ conn: BLIPConnection, reset: Bool) async throws(ReplicationError) {
        state.withLock { $0.connected = true }
        defer { state.withLock { $0.connected = false } }
        let c = configuration
        let db = c.database
        let remoteName = c.target
        let start: Checkpointer.Value
        do { start = try await checkpointer.start(connection: conn, reset: reset) } catch {
            await conn.close()
            throw error
        }
        setActivity(.busy)
        // The peer keeps a copy from the start, so a later restart knows it still has our state.
        await checkpointer.saveToPeer(connection: conn)

        let puller: Puller? = c.type == .push ? nil
            : Puller(role: .active(remote: remoteName, checkpointer: checkpointer, resolver: c.conflictResolver,
                                   downloads: downloads),
                     database: db, connection: conn, maxPendingRevisions: c.effectiveMaxConcurrentRevisions,
                     reporter: reporter, logger: logger)
        puller?.register()
        // The peer fetches the attachments of what we push.
        if puller == nil { conn.register(profile: ReplicationProtocol.Profile.getAttachment) { AttachmentTransfer.serve($0, database: db) } }
        let checkpointer = self.checkpointer
        let ids = c.documentIDs.map(Set.init)
        let select = Pusher.selector(database: db, documentIDs: ids, filter: pushAccept)
        let pusher: Pusher? = c.type == .pull ? nil
            : Pusher(database: db, connection: conn, mode: .propose(remote: remoteName, alsoPulling: c.type == .pushAndPull),
                     continuous: c.continuous, batchSize: c.batchSize, select: select, reporter: reporter, logger: logger) {
                sequence, settled in
                let saved: Bool
                do throws(StoreError) { saved = try await checkpointer.recordPushed(upTo: sequence, settled: settled) }
                catch { throw ReplicationError.store(error) }
                if saved { Task { await checkpointer.saveToPeer(connection: conn) } }
            }

        let result: Result<Void, ReplicationError> = await withTaskGroup(of: Result<Void, ReplicationError>?.self) { group in
            if let pusher {
                group.addTask {
                    do throws(ReplicationError) {
                        try await pusher.run(since: start.local)
                        if c.continuous { return nil }
                        if let puller {
                            // Conflicts the pull resolved made local revisions: push those too.
                            if await puller.waitUntilDone(continuous: false) == nil {
                                try await pusher.run(since: checkpointer.value.local)
                            }
                        }
                        return .success(())
                    } catch { return .failure(error) }
                }
            }
            if let puller {
                group.addTask {
                    do throws(ReplicationError) {
                        // A selector goes as Ferry's `_selector` filter (a named filter wins).
                        let selector = c.pullFilter == nil ? c.selector.map { String(decoding: CanonicalJSON.encode($0), as: UTF8.self) } : nil
                        try await puller.start(since: start.remote, continuous: c.continuous, batchSize: c.batchSize,
                                               filter: selector != nil ? "_selector" : c.pullFilter,
                                               parameters: selector.map { ["selector": $0] } ?? c.pullFilterParameters,
                                               documentIDs: c.documentIDs)
                    } catch { return .failure(error) }
                    if let error = await puller.waitUntilDone(continuous: c.continuous) { return .failure(error) }
                    if c.continuous { return nil }
                    // Caught up: the attachments the download policy queued, before the pull
                    // counts as done.
                    do throws(ReplicationError) { try await puller.downloadQueued() } catch { return .failure(error) }
                    return .success(())
                }
                if c.continuous && downloads != nil {
                    group.addTask {
                        do throws(ReplicationError) { try await puller.downloadQueuedWhenIdle() } catch { return .failure(error) }
                        return nil
                    }
                }
            }
            // The connection closing ends the session, whatever the workers are doing.
            group.addTask {
                let error = await withTaskCancellationHandler { await conn.closed() } onCancel: { Task { await conn.close() } }
                return .failure(error.map(ReplicationError.init) ?? .connection("connection closed"))
            }
            var remaining = (pusher == nil ? 0 : 1) + (puller == nil ? 0 : 1)
            var outcome: Result<Void, ReplicationError> = .success(())
            if remaining == 0 { group.cancelAll(); return outcome }
            for await r in group {
                guard let r else { continue }
                if case .failure = r { outcome = r; break }
                remaining -= 1
                if remaining == 0 { break }
            }
            if case .success = outcome {
                // The peer's copy is brought up to date while the connection is still open
                // (cancelling the group closes it): a copy left behind would look, on the next
                // start, like one from a backup.
                await self.flushPushedCheckpoint()
                await checkpointer.saveToPeer(connection: conn)
            }
            group.cancelAll()
            return outcome
        }
        // Pushed progress still only in memory is written, whatever ended the session: the
        // batches it covers completed.
        await flushPushedCheckpoint()
        await puller?.close()
        await conn.close()
        if Task.isCancelled { throw .stopped }
        try result.get()
    }
}
