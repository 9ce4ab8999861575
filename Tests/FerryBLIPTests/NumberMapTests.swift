@testable import FerryBLIP
import Testing

/// `NumberMap` against `Dictionary` under a mixed workload: sequential windows (the usual
/// BLIP pattern), stragglers left behind, and colliding numbers that exercise backward shifts.
struct NumberMapTests {
    @Test func agreesWithDictionary() {
        var map = NumberMap<Int>()
        var reference: [UInt64: Int] = [:]
        var x: UInt64 = 88_172_645_463_325_252
        for step in 0..<200_000 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            // Mostly a sliding window of numbers, sometimes far-off keys that collide mod the size.
            let key: UInt64 = x % 10 == 0 ? (x % 64) * 1024 + 1 : UInt64(step / 4) + x % 64 + 1
            if x % 3 == 0 {
                #expect(map.removeValue(forKey: key) == reference.removeValue(forKey: key))
            } else {
                map[key] = step
                reference[key] = step
            }
            if step % 997 == 0 {
                #expect(map.count == reference.count)
                for (k, v) in reference { #expect(map[k] == v) }
            }
        }
        #expect(map.allValues.sorted() == reference.values.sorted())
        #expect(map[0] == nil)
        map.removeAll()
        #expect(map.isEmpty && map[1] == nil)
    }
}
