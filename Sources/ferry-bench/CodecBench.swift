import ArgumentParser
// The session is the sans-I/O codec the connection drives; the fuzz targets use it the same way.
@_spi(Fuzzing) import FerryBLIP
import Foundation

/// `ferry-bench codec`: BLIP's message codec alone, in memory — `rev`-shaped requests (the
/// properties a replicator sends, a ~1 KiB body) framed by one `BLIPSession`, received by
/// another whose reader takes the properties a receiver reads, and each answered by an empty
/// reply. No sockets and no threads, so the per-message cost of framing, checksums and
/// properties shows without the noise of two processes on two cores.
struct CodecBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "codec",
        abstract: "BLIP's message codec in memory: ns per rev-shaped request sent and received, and per reply.")

    @Option(help: "Messages per round.") var count = 200_000
    @Option(help: "Rounds; the median is reported.") var rounds = 7

    func run() throws {
        let body = Array(String(repeating: "{\"field\":\"value of a bench document\"},", count: 28).utf8.prefix(1024))
        let revs = (0..<1000).map { i in
            (id: String(format: "doc-%06d", i), rev: "1-" + String(format: "%032x", i * 7919), sequence: String(100_000 + i))
        }
        var sendNs: [Double] = [], receiveNs: [Double] = [], replyNs: [Double] = []
        var checksum = 0
        for _ in 0..<rounds {
            let a = BLIPSession(), b = BLIPSession()
            var send = Duration.zero, receive = Duration.zero, reply = Duration.zero
            // In chunks, so the frames in hand stay in the cache as they would on a connection.
            // Framed as a connection frames (`BLIPConnection.pump`): into a head buffer kept
            // between frames, the parts then copied once — here into one flat buffer, as a
            // connection copies them into its socket's write queue.
            var head: [UInt8] = [], flat: [UInt8] = [], frames: [Range<Int>] = [], numbers: [UInt64] = []
            func append(_ h: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer) {
                let start = flat.count
                flat.append(contentsOf: h); flat.append(contentsOf: b); flat.append(contentsOf: c)
                frames.append(start..<flat.count)
            }
            frames.reserveCapacity(1000); numbers.reserveCapacity(1000)
            flat.reserveCapacity(1000 * (body.count + 128))
            for chunk in stride(from: 0, to: count, by: 1000) {
                flat.removeAll(keepingCapacity: true)
                frames.removeAll(keepingCapacity: true); numbers.removeAll(keepingCapacity: true)
                var t = ContinuousClock.now
                for i in chunk..<min(chunk + 1000, count) {
                    let r = revs[i % revs.count]
                    // A first revision's `rev`: no history.
                    let pairs: [(key: String, value: String)] = [("id", r.id), ("rev", r.rev), ("sequence", r.sequence)]
                    _ = a.send(request: .request(profile: "rev", properties: BLIPProperties(pairs: pairs), body: body))
                    while try a.nextFrame(into: &head, emit: append) {}
                }
                send += ContinuousClock.now - t
                t = ContinuousClock.now
                for f in frames {
                    guard let m = try flat.withUnsafeBytes({ try b.receive(frame: UnsafeRawBufferPointer(rebasing: $0[f])) }) else { continue }
                    // What `RevMessage.read` and the handler's dispatch read.
                    guard m.profile == "rev", let id = m.properties["id"], let rev = m.properties["rev"] else {
                        throw ValidationError("a rev lost its properties")
                    }
                    let history = m.properties["history"]?.utf8.count ?? 0
                    let deleted = m.properties["deleted"] == nil ? 0 : 1
                    let sequence = m.properties["sequence"]?.utf8.count ?? 0
                    checksum &+= id.utf8.count &+ rev.utf8.count &+ history &+ deleted &+ sequence &+ m.body.count
                    numbers.append(m.number)
                }
                receive += ContinuousClock.now - t
                guard numbers.count == frames.count else { throw ValidationError("received \(numbers.count) of \(frames.count)") }
                t = ContinuousClock.now
                var replies = 0
                for n in numbers {
                    try b.send(response: .response(), to: n)
                    while true {
                        flat.removeAll(keepingCapacity: true); frames.removeAll(keepingCapacity: true)
                        guard try b.nextFrame(into: &head, emit: append) else { break }
                        if try flat.withUnsafeBytes({ try a.receive(frame: $0) }) != nil { replies += 1 }
                    }
                }
                reply += ContinuousClock.now - t
                guard replies == numbers.count else { throw ValidationError("\(replies) replies of \(numbers.count)") }
            }
            sendNs.append(Self.ns(send, count)); receiveNs.append(Self.ns(receive, count)); replyNs.append(Self.ns(reply, count))
        }
        func median(_ v: [Double]) -> String { String(format: "%.0f", v.sorted()[v.count / 2]) }
        func all(_ v: [Double]) -> String { v.map { String(format: "%.0f", $0) }.joined(separator: " ") }
        print("BLIP codec, \(count) rev-shaped requests (4 properties with the profile, \(body.count) B body) × \(rounds) rounds, ns per message (median; all rounds)")
        print("send    (build, frame)              \(median(sendNs))  (\(all(sendNs)))")
        print("receive (parse, read properties)    \(median(receiveNs))  (\(all(receiveNs)))")
        print("reply   (send, receive)             \(median(replyNs))  (\(all(replyNs)))")
        print("checksum \(checksum)")
    }

    static func ns(_ d: Duration, _ count: Int) -> Double {
        (Double(d.components.seconds) * 1e9 + Double(d.components.attoseconds) / 1e9) / Double(count)
    }
}
