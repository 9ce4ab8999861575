import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A small fixed set of event loops (default: one per core); connections are spread across
/// them round robin.
public final class EventLoopGroup: Sendable {
    /// The loops of this group.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)

    /// Starts `count` loops (default: the number of online CPUs).
    public init(loopCount count: Int = EventLoopGroup.coreCount, name: String = "ferry") throws(NetError) {
        var ls: [EventLoop] = []
        for i in 0..<max(1, count) { ls.append(try EventLoop(name: "\(name)-\(i)")) }
        loops = ls
    }

    /// The number of online CPUs.
    public static var coreCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        loops[counter.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Shuts every loop down and waits for their threads.
    public func shutdown() { for l in loops { l.shutdown() } }
}

extension EventLoopGroup {
    /// A process-wide group (one loop per core) for callers that do not manage their own,
    /// started on first use.
    public static let shared: EventLoopGroup = {
        do { return try EventLoopGroup(name: "ferry-shared") } catch {
            fatalError("cannot start the shared event loops: \(error)")
        }
    }()
}
