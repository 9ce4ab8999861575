import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Suspends until the process receives SIGINT or SIGTERM (which no longer terminate it while
/// this runs): how Ferry's servers stop cleanly — close listeners, finish replications, close
/// databases — instead of dying mid-write.
public func waitForTerminationSignal() async {
    let (signals, continuation) = AsyncStream<Void>.makeStream()
    // The sources live as long as this function, which is as long as they are needed.
    let sources = [SIGINT, SIGTERM].map { sig in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler { continuation.finish() }
        source.resume()
        return source
    }
    for await _ in signals {}
    sources.forEach { $0.cancel() }
}
