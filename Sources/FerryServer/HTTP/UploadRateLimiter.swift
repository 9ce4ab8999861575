import Synchronization

/// Limits how fast one client address may send request bodies (bytes per second, a token
/// bucket holding one second's worth): past it the daemon stops reading that address's
/// connections for the time the bytes would have taken, so a client streaming huge bodies
/// costs a bounded share of the event loops' time however many requests it starts. TCP
/// slows the sender; nothing is refused or lost.
final class UploadRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var last: ContinuousClock.Instant
    }

    private let buckets = Mutex([String: Bucket]())
    /// Bytes per second per address.
    let rate: Double

    init(bytesPerSecond: Int) { rate = Double(max(1, bytesPerSecond)) }

    /// Takes `count` bytes from `address`'s bucket; the seconds to stop reading for to stay
    /// within the rate (0 = go on).
    func consume(_ count: Int, address: String, now: ContinuousClock.Instant = .now) -> Double {
        buckets.withLock { b in
            if b.count > 10_000 { b = b.filter { now - $0.value.last < .seconds(10) } }
            var bucket = b[address] ?? Bucket(tokens: rate, last: now)
            let elapsed = now - bucket.last
            bucket.tokens = min(rate, bucket.tokens + rate * elapsed.seconds)
            bucket.last = now
            bucket.tokens -= Double(count)
            b[address] = bucket
            return bucket.tokens < 0 ? -bucket.tokens / rate : 0
        }
    }
}
