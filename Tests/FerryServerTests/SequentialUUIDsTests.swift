@testable import FerryServer
import Testing

/// Server-made IDs follow CouchDB's `sequential` algorithm: 32 lowercase hex digits, the last 6
/// a counter that grows by 1–4093 under a 26-digit random prefix, which changes only when the
/// counter passes 0xfff000.
@Suite struct SequentialUUIDsTests {
    @Test func idsAreHexAndSortInTheOrderTheyWereMade() {
        let uuids = SequentialUUIDs()
        let ids = (0..<5000).map { _ in uuids.next() }
        #expect(ids.allSatisfy { $0.utf8.count == 32 && $0.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } })
        #expect(Set(ids).count == ids.count)
        var prefixes = 1
        for (a, b) in zip(ids, ids.dropFirst()) {
            if a.prefix(26) == b.prefix(26) {
                let step = (Int(b.suffix(6), radix: 16) ?? -1) - (Int(a.suffix(6), radix: 16) ?? 0)
                #expect((1...0xffd).contains(step), "\(a) → \(b)")
            } else {
                prefixes += 1
            }
        }
        // 5,000 steps of at most 4,093 stay under 0xfff000 from any start: one prefix change at most.
        #expect(prefixes <= 2)
        // Two sequences (two servers, or a restart) do not share a prefix.
        #expect(SequentialUUIDs().next().prefix(26) != ids[0].prefix(26))
    }

    /// The counter's increments come from a generator seeded once, not from a system call per ID
    /// (as CouchDB's `couch_rand`): the same seed steps the counter the same way, under
    /// different random prefixes.
    @Test func incrementsComeFromTheSeededGenerator() {
        let a = SequentialUUIDs(incrementSeed: 7), b = SequentialUUIDs(incrementSeed: 7)
        let x = (0..<100).map { _ in a.next() }, y = (0..<100).map { _ in b.next() }
        #expect(x.map { $0.suffix(6) } == y.map { $0.suffix(6) })
        #expect(x[0].prefix(26) != y[0].prefix(26))
    }
}
