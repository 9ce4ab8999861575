/// A hash map from BLIP message numbers to values: open addressing, linear probing,
/// backward-shift deletion, Fibonacci hashing. Swift's `Dictionary` runs seeded SipHash for
/// every lookup, a measurable share of a small message's cost; one multiply suffices here.
/// (Plain `number & mask` would lay a window of sequential numbers out as one long probe run,
/// which every removal then walks.) Key 0 (never a message number) marks an empty slot.
struct NumberMap<Value> {
    private var keys: [UInt64]
    private var values: [Value?]
    private var mask: Int
    /// 64 − log2(capacity): the hash's top bits pick the slot.
    private var shift: UInt64
    /// Entries stored.
    private(set) var count = 0

    init() {
        keys = [UInt64](repeating: 0, count: 16)
        values = [Value?](repeating: nil, count: 16)
        mask = 15
        shift = 60
    }

    var isEmpty: Bool { count == 0 }

    @inline(__always) private func home(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The value for `key`; assigning nil removes it.
    subscript(key: UInt64) -> Value? {
        get {
            guard key != 0 else { return nil }
            var i = home(key)
            while true {
                let k = keys[i]
                if k == key { return values[i] }
                if k == 0 { return nil }
                i = (i + 1) & mask
            }
        }
        set {
            if let newValue { insert(newValue, for: key) } else { _ = removeValue(forKey: key) }
        }
    }

    /// Stores `value` for `key` (which must not be 0), replacing any value it had.
    mutating func insert(_ value: Value, for key: UInt64) {
        precondition(key != 0, "message numbers start at 1")
        if (count + 1) * 2 > keys.count { grow() }
        var i = home(key)
        while true {
            let k = keys[i]
            if k == key { values[i] = value; return }
            if k == 0 { keys[i] = key; values[i] = value; count += 1; return }
            i = (i + 1) & mask
        }
    }

    /// Removes and returns the value for `key`, if any.
    mutating func removeValue(forKey key: UInt64) -> Value? {
        guard key != 0, count > 0 else { return nil }
        var i = home(key)
        while true {
            let k = keys[i]
            if k == 0 { return nil }
            if k == key { break }
            i = (i + 1) & mask
        }
        let removed = values[i]
        // Shift later members of the probe run back so lookups never stop at a hole early.
        var hole = i
        var j = (i + 1) & mask
        while keys[j] != 0 {
            let distance = (j - home(keys[j])) & mask
            if distance >= (j - hole) & mask {
                keys[hole] = keys[j]
                values[hole] = values[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        keys[hole] = 0
        values[hole] = nil
        count -= 1
        return removed
    }

    /// Every stored value, in no particular order.
    var allValues: [Value] { values.compactMap { $0 } }

    /// Empties the map, keeping its capacity.
    mutating func removeAll() {
        guard count > 0 else { return }
        for i in keys.indices where keys[i] != 0 { keys[i] = 0; values[i] = nil }
        count = 0
    }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values
        keys = [UInt64](repeating: 0, count: oldKeys.count * 2)
        values = [Value?](repeating: nil, count: oldKeys.count * 2)
        mask = keys.count - 1
        shift -= 1
        count = 0
        for i in oldKeys.indices where oldKeys[i] != 0 {
            if let v = oldValues[i] { insert(v, for: oldKeys[i]) }
        }
    }
}
