/// Carries a value that is not `Sendable` across an isolation boundary that the compiler cannot
/// see is safe: into a `@Sendable` closure, a `Task`, or a continuation. The one such box in
/// Ferry; each use site says, in a comment, which of the rules below makes its use safe.
///
/// Why it can be safe: a data race needs two threads touching the same state without ordering
/// between them. The box itself is immutable; the only question is what happens to `value`.
/// A use is safe when one of these holds:
///
/// 1. **Confinement.** Every access to `value` — on both sides of the boundary — happens on one
///    serial executor: typically an object confined to an `EventLoop` thread, boxed on that loop
///    (or before it is shared) and unboxed only in a closure that runs on the same loop
///    (`loop.execute`, a loop callback). The box only moves the reference; the loop orders the
///    uses.
/// 2. **Hand-over.** The sender makes no further use of `value` (nor of anything it shares
///    mutable state with) after boxing it, so only the receiver ever touches it. The hop itself
///    (`loop.execute`, `Task`, a continuation's resume) orders what the sender did before it
///    with what the receiver does after.
///
/// It is unsound for anything else — notably for a value used from both sides concurrently,
/// whatever its own synchronization looks like to the reader; such a type should be made
/// `Sendable` (a `Mutex`, an `Atomic`, immutability) instead of boxed.
public struct UncheckedTransfer<Value>: @unchecked Sendable {
    /// The carried value; use it only where the rule the call site cites allows.
    public let value: Value

    /// Boxes `value`. The call site states which rule (confinement or hand-over) makes it safe.
    @inlinable
    public init(_ value: Value) { self.value = value }
}
