import Synchronization

/// Bounds the memory request bodies hold across every connection of a daemon: bytes of a body
/// count from when they arrive until its request is answered, against a total and against the
/// client address they came from. A body that would go past either is refused (503, and the
/// connection closes), so clients that stream large bodies — an attack, or many uploads at
/// once — cannot make the daemon hold more than `total` bytes of them, nor one address more
/// than `perAddress`. The first `free` bytes of each body count only against its address, so
/// a flood of large bodies from elsewhere never refuses ordinary small writes.
final class RequestBodyBudget: Sendable {
    private struct State {
        var total = 0
        var perAddress: [String: Int] = [:]
    }

    private let state = Mutex(State())
    /// Bytes all bodies may hold together (past each one's free part).
    let total: Int
    /// Bytes the bodies from one address may hold together.
    let perAddress: Int
    /// Bytes of each body that count against its address only.
    let free: Int

    init(total: Int, perAddress: Int, free: Int = 64 * 1024) {
        self.total = total
        self.perAddress = perAddress
        self.free = free
    }

    /// Counts `count` more bytes of a body that holds `held` already, from `address`; false
    /// (nothing counted) when that would pass a bound.
    func take(_ count: Int, held: Int, address: String) -> Bool {
        let counted = max(0, held + count - free) - max(0, held - free)
        return state.withLock { s in
            let mine = s.perAddress[address, default: 0]
            guard mine + count <= perAddress, s.total + counted <= total else { return false }
            s.perAddress[address] = mine + count
            s.total += counted
            return true
        }
    }

    /// Gives back a body of `held` bytes from `address`.
    func release(_ held: Int, address: String) {
        guard held > 0 else { return }
        state.withLock { s in
            let left = s.perAddress[address, default: 0] - held
            s.perAddress[address] = left > 0 ? left : nil
            s.total -= max(0, held - free)
        }
    }

    /// Bytes held now, in all.
    var held: Int { state.withLock { $0.perAddress.values.reduce(0, +) } }
}
