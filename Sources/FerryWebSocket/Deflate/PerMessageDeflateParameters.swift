/// The validated parameters of one permessage-deflate offer or response element
/// (RFC 7692 §7.1): each at most once, known names only, window sizes 8…15.
public struct PerMessageDeflateParameters: Sendable, Equatable {
    /// The extension name.
    public static let extensionName = "permessage-deflate"

    /// `server_no_context_takeover` is present.
    public var serverNoContextTakeover = false
    /// `client_no_context_takeover` is present.
    public var clientNoContextTakeover = false
    /// The value of `server_max_window_bits`, nil when absent (it always needs a value).
    public var serverMaxWindowBits: Int?
    /// `client_max_window_bits` is present, with or without a value (in an offer, without a
    /// value it only says the client supports the parameter).
    public var clientMaxWindowBitsPresent = false
    /// The value of `client_max_window_bits`, nil when absent or given without a value.
    public var clientMaxWindowBits: Int?

    /// No parameters.
    public init() {}

    /// Validates `element`'s parameters. In a response (`isResponse`), `client_max_window_bits`
    /// needs a value (RFC 7692 §7.1.2.2).
    @_spi(Fuzzing) public init(_ element: ExtensionOffer, isResponse: Bool) throws(ExtensionNegotiationError) {
        var seen = Set<String>()
        for p in element.parameters {
            guard seen.insert(p.name).inserted else { throw .duplicateParameter(p.name) }
            switch p.name {
            case "server_no_context_takeover":
                guard p.value == nil else { throw .invalidValue(parameter: p.name, value: p.value) }
                serverNoContextTakeover = true
            case "client_no_context_takeover":
                guard p.value == nil else { throw .invalidValue(parameter: p.name, value: p.value) }
                clientNoContextTakeover = true
            case "server_max_window_bits":
                guard let v = p.value, let bits = Self.windowBits(v) else { throw .invalidValue(parameter: p.name, value: p.value) }
                serverMaxWindowBits = bits
            case "client_max_window_bits":
                clientMaxWindowBitsPresent = true
                if let v = p.value {
                    guard let bits = Self.windowBits(v) else { throw .invalidValue(parameter: p.name, value: v) }
                    clientMaxWindowBits = bits
                } else if isResponse {
                    throw .invalidValue(parameter: p.name, value: nil)
                }
            default:
                throw .unknownParameter(p.name)
            }
        }
    }

    /// A window size: 1*DIGIT without leading zeros, 8…15 (RFC 7692 §7.1.2.1).
    static func windowBits(_ s: String) -> Int? {
        let u = Array(s.utf8)
        guard (1...2).contains(u.count), u[0] != UInt8(ascii: "0"), u.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let n = Int(s), (8...15).contains(n) else { return nil }
        return n
    }

    /// The header element for these parameters.
    @_spi(Fuzzing) public var element: ExtensionOffer {
        var ps: [ExtensionOffer.Parameter] = []
        if serverNoContextTakeover { ps.append(.init(name: "server_no_context_takeover")) }
        if clientNoContextTakeover { ps.append(.init(name: "client_no_context_takeover")) }
        if let b = serverMaxWindowBits { ps.append(.init(name: "server_max_window_bits", value: String(b))) }
        if clientMaxWindowBitsPresent { ps.append(.init(name: "client_max_window_bits", value: clientMaxWindowBits.map(String.init))) }
        return ExtensionOffer(name: Self.extensionName, parameters: ps)
    }
}
