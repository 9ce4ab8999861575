import FerryDiscovery
import Synchronization

/// Document IDs the server makes (`POST /{db}`, `_bulk_docs` items without `_id`, `/_uuids`),
/// as CouchDB's default `[uuids] algorithm = sequential` makes them: 26 random hex digits of
/// prefix and 6 of counter, which grows by a random 1–4093 per ID; a new random prefix once the
/// counter passes 0xfff000. Consecutive IDs sort together, so a stream of inserts fills the
/// end of the documents' B-trees instead of dirtying a random page for each one (with random
/// IDs, a commit of 10 new documents wrote ~3× the pages).
///
/// As in CouchDB, only the prefix is made from the system's random source; the increments come
/// from a fast generator seeded from it (CouchDB: `couch_rand:uniform`), so an ID costs no
/// system call, and the lock is held only to step the counter, not to format the ID.
final class SequentialUUIDs: Sendable {
    private struct State {
        var prefix: [UInt8]
        var counter: UInt32
        var increments: SplitMix64
        mutating func increment() -> UInt32 { UInt32.random(in: 1...0xffd, using: &increments) }
    }

    private let state: Mutex<State>

    /// `incrementSeed` fixes the increments (tests); by default they are seeded from the system.
    init(incrementSeed: UInt64 = UInt64.random(in: 0 ... .max)) {
        var s = State(prefix: Self.newPrefix(), counter: 0, increments: SplitMix64(seed: incrementSeed))
        s.counter = s.increment()
        state = Mutex(s)
    }

    /// The next ID: 32 lowercase hexadecimal digits.
    func next() -> String {
        var (digits, counter) = state.withLock { s in
            s.counter += s.increment()
            if s.counter >= 0xfff000 {
                s.prefix = Self.newPrefix()
                s.counter = s.increment()
            }
            return (s.prefix, s.counter)
        }
        for shift in stride(from: 20, through: 0, by: -4) { digits.append(Self.hex[Int((counter >> UInt32(shift)) & 0xf)]) }
        return String(decoding: digits, as: UTF8.self)
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// 13 random bytes as 26 hex digits.
    private static func newPrefix() -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for _ in 0..<13 {
            let b = UInt8.random(in: 0 ... .max, using: &g)
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 0xf)])
        }
        return out
    }
}
