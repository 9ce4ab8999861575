/// The send queue of a session: messages in the order their next frames go out. A head index
/// makes taking the first message O(1) (an array's `removeFirst` shifts every message behind
/// it, once per frame); taken slots are cleared at once so a finished message's body is freed
/// without waiting for compaction.
struct Outbox {
    private var storage: [OutgoingMessage?] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }
    var first: OutgoingMessage? { isEmpty ? nil : storage[head] }

    /// The message at queue position `i` (0 is the head).
    subscript(i: Int) -> OutgoingMessage {
        // Slots from head on are always filled; a nil here would be a queue bug.
        guard let m = storage[head + i] else { preconditionFailure("outbox slot \(i) is empty") }
        return m
    }

    mutating func append(_ m: OutgoingMessage) { storage.append(m) }

    /// Inserts at queue position `i` (0...count).
    mutating func insert(_ m: OutgoingMessage, at i: Int) { storage.insert(m, at: head + i) }

    mutating func popFirst() -> OutgoingMessage? {
        guard head < storage.count else { return nil }
        let m = storage[head]
        storage[head] = nil
        head += 1
        compactConsumed(&storage, head: &head)
        return m
    }
}

/// Drops the consumed front (`[0, head)`) of an array used as a queue behind a head index: at
/// once when everything is consumed (keeping the capacity), else only once the consumed part is
/// at least 32 entries and half the array, so each entry is moved O(1) times on average.
@inline(__always)
func compactConsumed<Element>(_ storage: inout [Element], head: inout Int) {
    if head == storage.count {
        storage.removeAll(keepingCapacity: true)
        head = 0
    } else if head >= 32 && head * 2 >= storage.count {
        storage.removeFirst(head)
        head = 0
    }
}
