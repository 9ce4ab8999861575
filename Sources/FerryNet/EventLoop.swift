import CFerrySystem
import Dispatch
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Something registered with an event loop that reacts to readiness of its file descriptor.
/// Its methods are called on the loop's thread only.
public protocol Selectable: AnyObject {
    /// The file descriptor is readable (or has an error or hang-up pending).
    func readable()
    /// The file descriptor is writable.
    func writable()
}

/// A single-threaded epoll event loop. It owns its sockets: every registered `Selectable` is
/// called on the loop thread, so protocol state needs no lock. Work from other threads enters
/// through `execute(_:)`; timers through `schedule(after:_:)`.
///
/// Safety of `@unchecked Sendable`: the mutable state (`registrations`, `timers`, `scratch`) is
/// touched only on the loop thread (asserted by `preconditionInLoop`); the only state other
/// threads touch, the task queue, is behind a `Mutex`.
public final class EventLoop: @unchecked Sendable {
    /// A unit of work run on the loop thread.
    public typealias Task = @Sendable () -> Void

    private let epfd: Int32
    private let wakeFD: Int32
    private let pending = Mutex<PendingTasks>(PendingTasks())
    // `@exclusivity(unchecked)` on the loop-thread state below (registrations, timers, the
    // flags read on every write): Swift's dynamic exclusivity checks cost a runtime call per
    // access, per event. Safe: only the loop's own thread touches them, and no access stays
    // open across a callback (a registration is copied out before its `readable()` runs; due
    // timers and deferred flushes are taken out before they run).
    /// Registered descriptors, indexed by fd (descriptors are small integers the kernel
    /// reuses): a lookup per event is an array index, not a hash.
    @exclusivity(unchecked) private var registrations = Registrations()
    @exclusivity(unchecked) private var timers = TimerQueue()
    @exclusivity(unchecked) private var threadID: pthread_t?
    private let stopped = Mutex<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// A receive buffer shared by every connection of this loop: reads land here and
    /// handlers copy only what they must keep, so an idle connection holds no read buffer.
    public let sharedReadBuffer: UnsafeMutableRawBufferPointer
    /// Where TLS connections of this loop decrypt into before handing plaintext to their
    /// handlers; made on first use, so plain-TCP loops never allocate it.
    var tlsPlaintextBuffer: UnsafeMutableRawBufferPointer {
        if let b = tlsBuffer { return b }
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        tlsBuffer = b
        return b
    }
    private var tlsBuffer: UnsafeMutableRawBufferPointer?
    /// A label for logs.
    public let name: String
    /// Turns of the loop so far (epoll_wait returns); lets tests prove the loop is not spinning.
    @exclusivity(unchecked) private(set) var turns = 0

    private struct PendingTasks {
        var tasks: [Task] = []
        var wakePending = false
        var shuttingDown = false
    }

    private final class Registration {
        let selectable: Selectable
        var events: UInt32
        init(_ s: Selectable, _ e: UInt32) { selectable = s; events = e }
    }

    private struct Registrations {
        private var slots: [Registration?] = []
        subscript(fd: Int32) -> Registration? {
            get { fd >= 0 && Int(fd) < slots.count ? slots[Int(fd)] : nil }
            set {
                let i = Int(fd)
                if i >= slots.count {
                    guard newValue != nil else { return }
                    slots.append(contentsOf: repeatElement(nil, count: i - slots.count + 1))
                }
                slots[i] = newValue
            }
        }
        var descriptors: [Int32] { slots.indices.filter { slots[$0] != nil }.map { Int32($0) } }
    }

    /// Creates a loop and starts its thread.
    public init(name: String = "ferry-loop", readBufferSize: Int = 256 * 1024) throws(NetError) {
        self.name = name
        epfd = ferry_epoll_create()
        if epfd < 0 { throw .system(operation: "epoll_create1", errno: errno) }
        wakeFD = ferry_eventfd()
        if wakeFD < 0 { let e = errno; close(epfd); throw .system(operation: "eventfd", errno: e) }
        sharedReadBuffer = .allocate(byteCount: readBufferSize, alignment: 16)
        if ferry_epoll_ctl(epfd, FERRY_EPOLL_CTL_ADD, wakeFD, FERRY_EPOLLIN, UInt64(UInt32(bitPattern: wakeFD))) != 0 {
            throw .system(operation: "epoll_ctl", errno: errno)
        }
        // The thread holds the loop for as long as it runs.
        try DetachedThread.start(name: name) { [self] in run() }
    }

    deinit {
        sharedReadBuffer.deallocate()
        tlsBuffer?.deallocate()
        close(epfd)
        close(wakeFD)
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        guard let id = threadID else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    /// Traps when not on the loop thread (debug builds only).
    @inlinable
    public func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "not on the event loop thread", file: file, line: line)
    }

    /// Runs `task` on the loop thread, soon. Safe from any thread. After shutdown the task is
    /// dropped and `false` returned.
    @discardableResult
    public func execute(_ task: @escaping Task) -> Bool {
        let needsWake: Bool? = pending.withLock { p in
            if p.shuttingDown { return nil }
            p.tasks.append(task)
            if p.wakePending { return false }
            p.wakePending = true
            return true
        }
        guard let wake = needsWake else { return false }
        if wake && !inEventLoop {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        return true
    }

    /// Runs `body` on the loop and returns its result to an async caller.
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            let accepted = execute { c.resume(with: Result { try body() }) }
            if !accepted { c.resume(throwing: NetError.loopShutDown) }
        }
    }

    /// Schedules `task` to run on the loop after `delay` seconds. Call on the loop thread.
    @discardableResult
    public func schedule(after delay: Double, _ task: @escaping () -> Void) -> TimerHandle {
        preconditionInLoop()
        let deadline = ferry_monotonic_ns() &+ UInt64(max(0, delay) * 1e9)
        return timers.insert(deadline: deadline, task)
    }

    /// Cancels a timer scheduled with `schedule(after:_:)`. Call on the loop thread.
    public func cancel(_ timer: TimerHandle) {
        preconditionInLoop()
        timers.cancel(timer)
    }

    /// Registers `s` for the given epoll interest (`FERRY_EPOLLIN` / `FERRY_EPOLLOUT`). Loop thread only.
    public func register(fd: Int32, _ s: Selectable, readable: Bool, writable: Bool) throws(NetError) {
        preconditionInLoop()
        let ev = Self.mask(readable: readable, writable: writable)
        if ferry_epoll_ctl(epfd, FERRY_EPOLL_CTL_ADD, fd, ev, UInt64(UInt32(bitPattern: fd))) != 0 {
            throw .system(operation: "epoll_ctl(ADD)", errno: errno)
        }
        registrations[fd] = Registration(s, ev)
    }

    /// Changes the interest of a registered descriptor. Loop thread only.
    public func reregister(fd: Int32, readable: Bool, writable: Bool) {
        preconditionInLoop()
        guard let r = registrations[fd] else { return }
        let ev = Self.mask(readable: readable, writable: writable)
        if ev == r.events { return }
        r.events = ev
        _ = ferry_epoll_ctl(epfd, FERRY_EPOLL_CTL_MOD, fd, ev, UInt64(UInt32(bitPattern: fd)))
    }

    /// Removes a descriptor from the loop (before it is closed). Loop thread only.
    public func deregister(fd: Int32) {
        preconditionInLoop()
        if registrations[fd] != nil {
            registrations[fd] = nil
            _ = ferry_epoll_ctl(epfd, FERRY_EPOLL_CTL_DEL, fd, 0, 0)
        }
    }

    private static func mask(readable: Bool, writable: Bool) -> UInt32 {
        // RDHUP only with IN: a connection that paused reading must not be woken, level-
        // triggered, by a peer's FIN it is not going to read yet.
        var ev: UInt32 = 0
        if readable { ev |= FERRY_EPOLLIN | FERRY_EPOLLRDHUP }
        if writable { ev |= FERRY_EPOLLOUT }
        return ev
    }

    /// Stops the loop: tasks already queued run, then registered selectables are told to
    /// close through `readable()` no more; the thread exits. Waits for the thread unless
    /// called on it. Safe from any thread; idempotent.
    public func shutdown() {
        let first = stopped.withLock { s -> Bool in let f = !s; s = true; return f }
        if first {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        if !inEventLoop {
            finished.wait()
            finished.signal()
        }
    }

    /// Hooks run on the loop thread when it shuts down, so owners can fail pending work.
    private var shutdownHooks: [ObjectIdentifier: () -> Void] = [:]

    /// Registers `hook` to run on the loop thread at shutdown. Loop thread only.
    public func onShutdown(_ owner: AnyObject, _ hook: @escaping () -> Void) {
        preconditionInLoop()
        shutdownHooks[ObjectIdentifier(owner)] = hook
    }

    /// Removes a hook added with `onShutdown`. Loop thread only.
    public func removeShutdownHook(_ owner: AnyObject) {
        preconditionInLoop()
        shutdownHooks[ObjectIdentifier(owner)] = nil
    }

    private func run() {
        threadID = pthread_self()
        let maxEvents = 256
        let datas = UnsafeMutablePointer<UInt64>.allocate(capacity: maxEvents)
        let evs = UnsafeMutablePointer<UInt32>.allocate(capacity: maxEvents)
        defer { datas.deallocate(); evs.deallocate() }
        while !stopped.withLock({ $0 }) {
            runPendingTasks()
            let timeout = timers.millisecondsUntilNext(now: ferry_monotonic_ns())
            let n = ferry_epoll_wait(epfd, datas, evs, Int32(maxEvents), hasPendingTasks ? 0 : timeout)
            turns &+= 1
            if n < 0 { continue }
            for i in 0..<Int(n) {
                let fd = Int32(bitPattern: UInt32(truncatingIfNeeded: datas[i]))
                if fd == wakeFD {
                    var v: UInt64 = 0
                    _ = read(wakeFD, &v, 8)
                    continue
                }
                let e = evs[i]
                // Look up each time: an earlier callback in this batch may have closed it.
                if let r = registrations[fd], e & (FERRY_EPOLLOUT) != 0 {
                    r.selectable.writable()
                }
                if let r = registrations[fd], e & (FERRY_EPOLLIN | FERRY_EPOLLERR | FERRY_EPOLLHUP | FERRY_EPOLLRDHUP) != 0 {
                    r.selectable.readable()
                }
            }
            for task in timers.popDue(now: ferry_monotonic_ns()) { task() }
        }
        // Shutdown: refuse new tasks, run what was queued, let owners fail their pending work.
        let remaining = pending.withLock { p -> [Task] in
            p.shuttingDown = true
            let t = p.tasks; p.tasks = []; return t
        }
        for t in remaining { t() }
        let hooks = shutdownHooks
        shutdownHooks = [:]
        for (_, h) in hooks { h() }
        for fd in registrations.descriptors { _ = ferry_epoll_ctl(epfd, FERRY_EPOLL_CTL_DEL, fd, 0, 0) }
        registrations = Registrations()
        timers = TimerQueue()
        threadID = nil
        finished.signal()
    }

    private var hasPendingTasks: Bool { pending.withLock { !$0.tasks.isEmpty } }

    private func runPendingTasks() {
        // Bounded: tasks queued by these tasks run next turn, so I/O is never starved.
        let batch = pending.withLock { p -> [Task] in
            p.wakePending = false
            if p.tasks.isEmpty { return [] }
            let t = p.tasks; p.tasks = []; return t
        }
        runningTasks = true
        for t in batch { t() }
        runningTasks = false
        flushDeferred()
    }

    /// True while a batch of tasks runs: connections written to then flush once at its end.
    @exclusivity(unchecked) private(set) var runningTasks = false
    /// Connections that queued bytes during the current batch of tasks.
    @exclusivity(unchecked) private var deferredFlushes: [TCPConnection] = []

    /// Has `connection` flushed when the current batch of tasks ends: replies handed to the
    /// loop one task each (e.g. from a storage thread) then leave in one `writev`, not one
    /// system call per reply. Loop thread only.
    func deferFlush(_ connection: TCPConnection) {
        deferredFlushes.append(connection)
    }

    private func flushDeferred() {
        guard !deferredFlushes.isEmpty else { return }
        let connections = deferredFlushes
        deferredFlushes = []
        for c in connections { c.flushDeferredWrites() }
    }
}
