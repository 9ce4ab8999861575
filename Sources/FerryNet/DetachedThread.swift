import CFerrySystem
import Glibc

/// A system thread of its own (an event loop, password checks, a blocking read), named
/// as `top -H`, `perf` and /proc show it. Detached: it ends when its closure returns.
public enum DetachedThread {
    private final class Body {
        let name: String
        let run: @Sendable () -> Void
        init(name: String, run: @escaping @Sendable () -> Void) { self.name = name; self.run = run }
    }

    /// Starts `body` on a new thread called `name` (Linux shows its first 15 bytes).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(NetError) {
        // The thread owns the box: a retained reference it takes back when it starts.
        let box = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let body = Unmanaged<Body>.fromOpaque(raw).takeRetainedValue()
            _ = ferry_name_thread(String(body.name.utf8.prefix(15)) ?? "ferry")
            body.run()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw .system(operation: "pthread_create", errno: rc)
        }
        pthread_detach(thread)
    }
}
