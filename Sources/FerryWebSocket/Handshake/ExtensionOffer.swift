/// One element of a `Sec-WebSocket-Extensions` header (RFC 6455 §9.1): an extension name and
/// its parameters, in order. Names are lower-cased (tokens compare case-insensitively); values
/// given as quoted strings are unquoted.
@_spi(Fuzzing) public struct ExtensionOffer: Sendable, Equatable {
    /// One `name[=value]` parameter.
    public struct Parameter: Sendable, Equatable {
        /// The parameter name, lower-cased.
        public var name: String
        /// The value, nil when the parameter has none.
        public var value: String?
        /// Creates a parameter.
        public init(name: String, value: String? = nil) { self.name = name; self.value = value }
    }

    /// The extension name, lower-cased (e.g. `permessage-deflate`).
    public var name: String
    /// The parameters, in the order given.
    public var parameters: [Parameter]

    /// Creates an offer (or a response element).
    public init(name: String, parameters: [Parameter] = []) { self.name = name; self.parameters = parameters }

    /// The element as it is written in a header: `name; p1; p2=v`.
    public var headerValue: String {
        var s = name
        for p in parameters {
            s += "; " + p.name
            if let v = p.value { s += "=" + v }
        }
        return s
    }

    /// Parses every `Sec-WebSocket-Extensions` field value (several fields are one comma-joined
    /// list). Empty list elements are skipped, as RFC 9110 §5.6.1 asks of recipients.
    /// Throws `.malformedHeader` for anything outside the grammar:
    /// `extension = token *( OWS ";" OWS token [ "=" ( token / quoted-string ) ] )`.
    public static func parse(_ fieldValues: [String]) throws(ExtensionNegotiationError) -> [ExtensionOffer] {
        var out: [ExtensionOffer] = []
        for value in fieldValues {
            var scanner = Scanner(Array(value.utf8))
            try scanner.parseList(into: &out)
        }
        return out
    }

    /// Whether `byte` is an RFC 9110 `tchar`.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// A cursor over one field value.
    private struct Scanner {
        let bytes: [UInt8]
        var i = 0
        init(_ b: [UInt8]) { bytes = b }

        var atEnd: Bool { i >= bytes.count }
        var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

        mutating func skipSpace() { while let b = peek, b == 0x20 || b == 0x09 { i += 1 } }

        mutating func token() -> String? {
            let start = i
            while let b = peek, ExtensionOffer.isTokenByte(b) { i += 1 }
            return i > start ? String(decoding: bytes[start..<i], as: UTF8.self).lowercased() : nil
        }

        /// A quoted-string after its opening quote; returns the unescaped content.
        mutating func quotedRest() throws(ExtensionNegotiationError) -> String {
            var out: [UInt8] = []
            while let b = peek {
                i += 1
                switch b {
                case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let e = peek, e == 0x09 || (e >= 0x20 && e != 0x7F) else { throw .malformedHeader("bad escape in a quoted string") }
                    out.append(e); i += 1
                case 0x09, 0x20...0x7E, 0x80...0xFF: out.append(b)
                default: throw .malformedHeader("control character in a quoted string")
                }
            }
            throw .malformedHeader("unterminated quoted string")
        }

        mutating func parseList(into out: inout [ExtensionOffer]) throws(ExtensionNegotiationError) {
            while true {
                skipSpace()
                if atEnd { return }
                if peek == UInt8(ascii: ",") { i += 1; continue }
                guard let name = token() else { throw .malformedHeader("expected an extension name at byte \(i)") }
                var ext = ExtensionOffer(name: name)
                skipSpace()
                while peek == UInt8(ascii: ";") {
                    i += 1
                    skipSpace()
                    guard let pname = token() else { throw .malformedHeader("expected a parameter name at byte \(i)") }
                    skipSpace()
                    var value: String?
                    if peek == UInt8(ascii: "=") {
                        i += 1
                        skipSpace()
                        if peek == UInt8(ascii: "\"") {
                            i += 1
                            value = try quotedRest()
                        } else {
                            let start = i
                            while let b = peek, ExtensionOffer.isTokenByte(b) { i += 1 }
                            guard i > start else { throw .malformedHeader("expected a value for \(pname)") }
                            value = String(decoding: bytes[start..<i], as: UTF8.self)
                        }
                        skipSpace()
                    }
                    ext.parameters.append(Parameter(name: pname, value: value))
                }
                out.append(ext)
                if atEnd { return }
                guard peek == UInt8(ascii: ",") else { throw .malformedHeader("unexpected byte at \(i)") }
                i += 1
            }
        }
    }
}
