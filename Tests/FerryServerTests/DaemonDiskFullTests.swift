import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// A daemon restarted on a full disk comes up and serves what it has; only the endpoint file
/// (how `ferry` commands find it) waits for space. Before, writing that file failed the start,
/// so a host whose disk filled and which then restarted stayed down for every peer (found by
/// the cluster harness: 5 hosts, seed 403, a kill during a disk-full fault). Needs root (a
/// tmpfs mount); CI runs it.
@Suite("Daemon on a full disk", .serialized, .enabled(if: SmallFilesystem.available, "needs root to mount a tmpfs"))
struct DaemonDiskFullTests {
    @Test(.timeLimit(.minutes(2)))
    func aDaemonStartsOnAFullDiskAndPublishesItsEndpointOnceThereIsSpace() async throws {
        let disk = try SmallFilesystem(megabytes: 64)
        let data = disk.path + "/data"
        let first = try await DaemonFixture(allowAnonymous: true, databases: ["notes"], data: data)
        #expect(try await first.request("PUT", "/notes/kept", json: #"{"v":"before the disk filled"}"#).status == 201)
        // Another connection keeps the WAL and its index (-wal, -shm) in place across the
        // restart, as after a kill: SQLite cannot make a WAL index on a disk with no room at
        // all, so a database closed cleanly before the disk filled does not open (left alone).
        let holder = try Database.open(at: data + "/notes.ferry")
        defer { holder.close() }
        await first.stop()

        // Fill what is left.
        #expect(FileManager.default.createFile(atPath: disk.path + "/filler", contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: disk.path + "/filler"))
        let chunk = Data(repeating: 0x78, count: 64 << 10)
        while (try? handle.write(contentsOf: chunk)) != nil {}
        try? handle.close()

        let endpointFile = data + "/_daemon.json"
        let daemon = try await DaemonFixture(allowAnonymous: true, data: data)
        #expect(!FileManager.default.fileExists(atPath: endpointFile), "the disk is full: no endpoint file yet")
        let read = try await daemon.request("GET", "/notes/kept")
        #expect(read.status == 200)
        #expect(read.object["v"] == "before the disk filled")
        let write = try await daemon.request("PUT", "/notes/new", json: #"{"v":"no room"}"#)
        #expect(!(200..<300).contains(write.status), "a write the disk cannot hold is not answered as kept: \(write.status) \(write.text)")

        // Space freed: the endpoint file appears, naming this daemon.
        try disk.grow(to: 256)
        #expect(try await eventually(60) { FileManager.default.fileExists(atPath: endpointFile) })
        let endpoint = try #require(DaemonEndpoint.running(data + "/_daemon"))
        #expect(endpoint.url.hasSuffix(":\(daemon.daemon.port)"))
        await daemon.stop()
        #expect(!FileManager.default.fileExists(atPath: endpointFile))
    }
}
