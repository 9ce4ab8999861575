/// Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates, nothing above
/// U+10FFFF). Fed payload chunks as they arrive, it fails on the first byte that can no
/// longer start or continue a valid sequence, so a bad text message fails fast even across
/// fragments and TCP segments.
public struct UTF8Validator: Sendable {
    private var need: UInt8 = 0
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// A validator at the start of a text.
    public init() {}

    /// True when the bytes so far end on a character boundary.
    public var isComplete: Bool { need == 0 }

    /// Validates the next chunk. Returns false as soon as the text cannot be valid.
    public mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let n = bytes.count
        var i = 0
        while i < n {
            if need == 0 {
                // ASCII runs are the common case: check eight bytes per step.
                while i + 8 <= n && (base.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080) == 0 {
                    i += 8
                }
                if i >= n { break }
                let b = base.load(fromByteOffset: i, as: UInt8.self)
                i += 1
                switch b {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: need = 1; lower = 0x80; upper = 0xBF
                case 0xE0: need = 2; lower = 0xA0; upper = 0xBF
                case 0xE1...0xEC, 0xEE, 0xEF: need = 2; lower = 0x80; upper = 0xBF
                case 0xED: need = 2; lower = 0x80; upper = 0x9F
                case 0xF0: need = 3; lower = 0x90; upper = 0xBF
                case 0xF1...0xF3: need = 3; lower = 0x80; upper = 0xBF
                case 0xF4: need = 3; lower = 0x80; upper = 0x8F
                default: return false
                }
            } else {
                let b = base.load(fromByteOffset: i, as: UInt8.self)
                i += 1
                if b < lower || b > upper { return false }
                need -= 1
                lower = 0x80; upper = 0xBF
            }
        }
        return true
    }

    /// Validates a whole text at once.
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var v = UTF8Validator()
        return v.validate(bytes) && v.isComplete
    }
}
