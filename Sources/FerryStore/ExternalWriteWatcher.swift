import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Notices commits made to the database file by other processes (other `ferry` commands on a
/// file that `ferry serve` has open): inotify on the WAL file wakes it, and the writer re-reads
/// the sequence counter, so live change feeds — continuous replications — see those changes
/// without polling. Linux only; elsewhere it does nothing.
final class ExternalWriteWatcher: Sendable {
    // Safe: set once in init and afterwards only cancelled, which Dispatch allows from any thread.
    nonisolated(unsafe) private let source: DispatchSourceRead?

    init(path: String, writer: Writer) {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0, inotify_add_watch(fd, path + "-wal", UInt32(IN_MODIFY)) >= 0 else {
            if fd >= 0 { Glibc.close(fd) }
            source = nil
            return
        }
        let queue = DispatchQueue(label: "ferry.store.watch")
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak writer] in
            // Drain the events; what changed is read from the database itself.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
            writer?.noticeExternalCommits()
            // The last write to the WAL (the commit frame) comes just before the other process
            // publishes the commit in the shared-memory index, which inotify cannot see: look
            // again shortly after, so a commit is never missed for want of a later write.
            for ms in [5, 25, 100, 400] {
                queue.asyncAfter(deadline: .now() + .milliseconds(ms)) { [weak writer] in writer?.noticeExternalCommits() }
            }
        }
        source.setCancelHandler { Glibc.close(fd) }
        source.resume()
        self.source = source
        #else
        source = nil
        #endif
    }

    func stop() { source?.cancel() }
}
