/// Identifies a timer scheduled on an event loop, for cancellation.
public struct TimerHandle: Hashable, Sendable {
    let id: UInt64
}

/// A min-heap of deadlines (monotonic nanoseconds) with lazy cancellation. Loop-confined.
struct TimerQueue {
    private struct Entry { let deadline: UInt64; let id: UInt64 }
    private var heap: [Entry] = []
    private var tasks: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 1

    mutating func insert(deadline: UInt64, _ task: @escaping () -> Void) -> TimerHandle {
        let id = nextID; nextID += 1
        tasks[id] = task
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return TimerHandle(id: id)
    }

    mutating func cancel(_ h: TimerHandle) { tasks[h.id] = nil }

    /// Milliseconds until the next live deadline, rounded up; -1 when there is none.
    mutating func millisecondsUntilNext(now: UInt64) -> Int32 {
        while let top = heap.first, tasks[top.id] == nil { popTop() }
        guard let top = heap.first else { return -1 }
        if top.deadline <= now { return 0 }
        let ms = (top.deadline - now + 999_999) / 1_000_000
        return Int32(min(ms, 60_000))
    }

    /// Removes and returns the tasks whose deadline has passed, earliest first. The caller
    /// runs them, so a task may schedule or cancel timers without touching this queue mid-mutation.
    mutating func popDue(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while let top = heap.first, top.deadline <= now {
            popTop()
            if let t = tasks.removeValue(forKey: top.id) { due.append(t) }
        }
        return due
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        if !heap.isEmpty { heap[0] = last; siftDown(0) }
    }

    private mutating func siftUp(_ i: Int) {
        var i = i
        while i > 0 {
            let p = (i - 1) / 2
            if heap[p].deadline <= heap[i].deadline { break }
            heap.swapAt(p, i); i = p
        }
    }

    private mutating func siftDown(_ i: Int) {
        var i = i
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && heap[l].deadline < heap[m].deadline { m = l }
            if r < heap.count && heap[r].deadline < heap[m].deadline { m = r }
            if m == i { return }
            heap.swapAt(m, i); i = m
        }
    }
}
