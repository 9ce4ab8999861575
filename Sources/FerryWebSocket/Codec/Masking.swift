import CFerrySystem

/// Applies a WebSocket masking key (RFC 6455 §5.3), eight bytes at a time.
public enum Masking {
    /// XORs `bytes` in place with `key`, starting at key phase `phase`; returns the next phase.
    @discardableResult
    public static func apply(key: (UInt8, UInt8, UInt8, UInt8), to bytes: UnsafeMutableRawBufferPointer, phase: Int = 0) -> Int {
        guard let base = bytes.baseAddress else { return phase }
        return copy(key: key, from: UnsafeRawBufferPointer(bytes), to: base, phase: phase)
    }

    /// Writes `source` XORed with `key` (from key phase `phase`) to `destination`, which must
    /// hold `source.count` bytes and be either `source` itself or apart from it: unmasking and
    /// copying in one pass over the bytes. Returns the next phase.
    @discardableResult
    public static func copy(key: (UInt8, UInt8, UInt8, UInt8), from source: UnsafeRawBufferPointer,
                            to destination: UnsafeMutableRawPointer, phase: Int = 0) -> Int {
        guard let src = source.baseAddress, source.count > 0 else { return phase }
        var k = key
        return withUnsafeBytes(of: &k) { kb in
            Int(ferry_mask_copy(destination.assumingMemoryBound(to: UInt8.self), src.assumingMemoryBound(to: UInt8.self),
                                source.count, kb.baseAddress!.assumingMemoryBound(to: UInt8.self), phase))
        }
    }

    /// XORs an array in place with `key`.
    public static func apply(key: (UInt8, UInt8, UInt8, UInt8), to bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { _ = apply(key: key, to: $0) }
    }

    /// A fresh masking key from the kernel CSPRNG.
    public static func randomKey() -> (UInt8, UInt8, UInt8, UInt8) {
        var k: UInt32 = 0
        if ferry_random_bytes(&k, 4) != 0 {
            // getrandom cannot fail for 4 bytes after boot; fall back to the Swift CSPRNG anyway.
            k = UInt32.random(in: .min ... .max)
        }
        return (UInt8(truncatingIfNeeded: k), UInt8(truncatingIfNeeded: k >> 8),
                UInt8(truncatingIfNeeded: k >> 16), UInt8(truncatingIfNeeded: k >> 24))
    }
}
