@testable import FerrySync
import Testing

/// `Array.removeFirst(moving:)`, how the inserter splits off one transaction's items: the same
/// elements in the same order as `prefix` + `removeFirst`, and the very same objects.
@Suite struct RemoveFirstMovingTests {
    final class Box: Sendable {
        let n: Int
        init(_ n: Int) { self.n = n }
    }

    @Test(arguments: [0, 1, 5, 9, 10, 11, 40])
    func takesTheFirstNInOrderAndKeepsTheRest(n: Int) {
        let boxes = (0..<10).map(Box.init)
        var queue = boxes
        let taken = queue.removeFirst(moving: n)
        let expected = min(n, boxes.count)
        #expect(taken.count == expected && queue.count == boxes.count - expected)
        #expect(zip(taken, boxes.prefix(expected)).allSatisfy { $0 === $1 })
        #expect(zip(queue, boxes.dropFirst(expected)).allSatisfy { $0 === $1 })
        // What stays is an ordinary queue: appending and taking again keep the order.
        queue.append(Box(10))
        let rest = queue.removeFirst(moving: queue.count)
        #expect(rest.map(\.n) == Array(expected...10))
        #expect(queue.isEmpty)
    }
}
