extension Array {
    /// Removes and returns the first `n` elements (all of them if there are no more), moving
    /// each element rather than copying it: the array's storage goes with the result, and the
    /// rest is popped off its end and back into this array, in order. `Array(prefix(n))` then
    /// `removeFirst(n)` retains every reference the taken elements hold, then releases it.
    mutating func removeFirst(moving n: Int) -> [Element] {
        let keep = Swift.max(0, n)
        var taken: [Element] = []
        swap(&taken, &self)
        guard taken.count > keep else { return taken }
        // Popped twice, so the order comes back: `reverse()` swaps by copying.
        var tail: [Element] = []
        tail.reserveCapacity(taken.count - keep)
        while taken.count > keep { tail.append(taken.removeLast()) }
        reserveCapacity(tail.count)
        while let element = tail.popLast() { append(element) }
        return taken
    }
}
