import Dispatch

/// A count's rate of growth over the last few seconds: recent enough to follow a replication
/// that speeds up or stalls, long enough that one slow batch does not make the figure jump.
struct RateMeter: Sendable {
    /// Seconds of samples kept.
    var window: Double = 5
    private var samples: [(time: Double, count: Int)] = []

    /// An empty meter.
    init(window: Double = 5) { self.window = window }

    /// Records the count at `time` (seconds, monotonic). A count lower than the last one means
    /// the work started over, so what came before is forgotten rather than read as negative speed.
    mutating func record(_ count: Int, at time: Double) {
        if let last = samples.last, count < last.count { samples.removeAll() }
        samples.append((time, count))
        while samples.count > 2, let first = samples.first, time - first.time > window { samples.removeFirst() }
    }

    /// Per second; nil until the samples span half a second (a rate from two samples a few
    /// milliseconds apart would be noise).
    var perSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= 0.5 else { return nil }
        return Double(last.count - first.count) / (last.time - first.time)
    }

    /// Now, in seconds on the monotonic clock (wall-clock jumps would distort rates).
    static var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
