@testable import FerryNet
import Foundation
import Synchronization
import Testing

@Suite struct EventLoopTests {
    @Test func executeRunsOnTheLoopInOrder() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let order = Mutex<[Int]>([])
        for i in 0..<100 { loop.execute { precondition(loop.inEventLoop); order.withLock { $0.append(i) } } }
        try await loop.submit { }
        #expect(order.withLock { $0 } == Array(0..<100))
        #expect(!loop.inEventLoop)
    }

    @Test func timersFireInDeadlineOrderAndCancelledOnesDoNot() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let fired = Mutex<[String]>([])
        let (stream, cont) = AsyncStream<Void>.makeStream()
        loop.execute {
            loop.schedule(after: 0.03) { fired.withLock { $0.append("c") }; cont.finish() }
            loop.schedule(after: 0.01) { fired.withLock { $0.append("a") } }
            let t = loop.schedule(after: 0.02) { fired.withLock { $0.append("cancelled") } }
            loop.schedule(after: 0.015) { fired.withLock { $0.append("b") } }
            loop.cancel(t)
        }
        for await _ in stream {}
        #expect(fired.withLock { $0 } == ["a", "b", "c"])
    }

    @Test func shutdownRefusesNewWorkWithATypedError() async throws {
        let loop = try EventLoop()
        loop.shutdown()
        #expect(!loop.execute {})
        await #expect(throws: NetError.loopShutDown) { try await loop.submit { } }
    }
}

/// Collects a connection's events for tests.
final class Probe: ConnectionHandler, @unchecked Sendable {
    // Safety: mutated on the connection's loop only; read by tests through `events`' stream.
    let events: AsyncStream<String>
    private let cont: AsyncStream<String>.Continuation
    var received = 0
    init() { (events, cont) = AsyncStream<String>.makeStream() }
    func connectionRead(_ c: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        received += bytes.count
        cont.yield("read \(received)")
    }
    func connectionWritabilityChanged(_ c: TCPConnection, writable: Bool) { cont.yield("writable \(writable)") }
    func connectionInputClosed(_ c: TCPConnection) { cont.yield("eof") }
    func connectionClosed(_ c: TCPConnection, error: NetError?) { cont.yield("closed \(error.map { "\($0)" } ?? "ok")"); cont.finish() }
}

@Suite struct TCPTests {
    @Test func refusedConnectIsTyped() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let l = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { _ in }
        let port = l.boundAddress.port
        #expect(port != 0)
        await l.close()
        await #expect(throws: NetError.connectionRefused) {
            _ = try await TCPConnection.connect(host: "127.0.0.1", port: port, on: group.loops[0])
        }
    }

    @Test func unresolvableHostIsTyped() async throws {
        await #expect { _ = try await Resolver.resolve(host: "no-such-host.invalid", port: 1) } throws: { e in
            if case NetError.resolutionFailed? = e as? NetError { return true } else { return false }
        }
    }

    /// A peer that does not read makes the writer go unwritable at the high watermark (nothing
    /// buffers without bound); once the peer reads, it becomes writable again and every byte arrives.
    @Test func backpressureIsExplicit() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let serverProbe = Probe()
        let accepted = Mutex<TCPConnection?>(nil)
        let l = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { tcp in
            accepted.withLock { $0 = tcp }
            tcp.start(handler: serverProbe)
            tcp.pauseReading()
        }
        let loop = group.loops[0]
        let client = try await TCPConnection.connect(host: "127.0.0.1", port: l.boundAddress.port, on: loop)
        let clientProbe = Probe()
        let total = 32 << 20
        let maxBuffered = try await loop.submit { () -> Int in
            client.start(handler: clientProbe)
            var maxBuffered = 0
            let chunk = [UInt8](repeating: 7, count: 1 << 20)
            // Write until the connection says stop; a well-behaved producer stops there.
            var sent = 0
            while client.isWritable && sent < total {
                client.write(chunk); sent += chunk.count
                maxBuffered = max(maxBuffered, client.bufferedByteCount)
            }
            return sent < total ? maxBuffered : -1
        }
        #expect(maxBuffered > 0, "a peer that never reads must stop the writer before 32 MiB")
        var events = clientProbe.events.makeAsyncIterator()
        // The peer starts reading: the writer becomes writable again.
        loop.execute { accepted.withLock { $0 }?.resumeReading() }
        while let e = await events.next() { if e == "writable true" { break } }
        loop.execute { client.close() }
        var last = ""
        for await e in serverProbe.events { last = e }
        #expect(last == "closed ok")
        #expect(serverProbe.received > 0)
        await l.close()
    }

    /// A connection that paused reading must not spin when its peer hangs up (HUP is reported
    /// level-triggered whatever the interest); once resumed it reads the rest and sees EOF.
    @Test func pausedConnectionDoesNotSpinOnHangup() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let probe = Probe()
        let accepted = Mutex<TCPConnection?>(nil)
        let (acceptedStream, acceptedCont) = AsyncStream<Void>.makeStream()
        let l = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { tcp in
            tcp.start(handler: probe)
            tcp.pauseReading()
            accepted.withLock { $0 = tcp }
            acceptedCont.finish()
        }
        let client = try await TCPConnection.connect(host: "127.0.0.1", port: l.boundAddress.port, on: loop)
        for await _ in acceptedStream {}
        let clientProbe = Probe()
        try await loop.submit {
            client.start(handler: clientProbe)
            client.write(Array("bye".utf8))
            client.close()
        }
        for await _ in clientProbe.events {}           // the client side is fully closed
        // Count the loop's turns over a 50 ms timer: an idle loop takes a handful, a spinning one thousands.
        let before = try await loop.submit { loop.turns }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.execute { loop.schedule(after: 0.05) { c.resume() } }
        }
        let after = try await loop.submit { loop.turns }
        #expect(after - before < 100, "the loop spun \(after - before) turns in 50 ms")
        loop.execute { accepted.withLock { $0 }?.resumeReading() }
        var seen: [String] = []
        for await e in probe.events { seen.append(e) }
        #expect(seen == ["read 3", "eof", "closed ok"])
        await l.close()
    }
}
