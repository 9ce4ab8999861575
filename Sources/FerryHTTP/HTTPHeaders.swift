/// One HTTP header field as received or to be sent (name case preserved).
public struct HTTPHeader: Sendable, Equatable {
    /// The field name.
    public var name: String
    /// The field value, trimmed.
    public var value: String
    /// Creates a header.
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// HTTP header fields in order, with case-insensitive lookup: what the WebSocket handshake's
/// hooks and configuration take (`UpgradeDecision`, `WebSocketConfiguration.extraHeaders`).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    /// The fields in order.
    public private(set) var fields: [HTTPHeader] = []

    /// Creates headers from name/value pairs.
    public init(_ pairs: [(String, String)] = []) {
        fields = pairs.map { HTTPHeader(name: $0.0, value: $0.1) }
    }

    /// Appends a field.
    public mutating func add(name: String, value: String) { fields.append(HTTPHeader(name: name, value: value)) }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// The first value of `name`.
    public subscript(_ name: String) -> String? { fields.first { $0.name.caseInsensitiveEquals(name) }?.value }

    /// The comma-separated tokens of every `name` field, trimmed (e.g. `Connection: keep-alive, Upgrade`).
    public func tokens(_ name: String) -> [String] {
        HTTPHeaders.tokens(of: values(name))
    }

    /// The pairs, as the heads hold them.
    public var pairs: [(name: String, value: String)] { fields.map { ($0.name, $0.value) } }

    public func makeIterator() -> IndexingIterator<[HTTPHeader]> { fields.makeIterator() }

    /// The comma-separated tokens of `values`, trimmed, empty ones dropped.
    static func tokens(of values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { $0.trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
    }
}

extension StringProtocol {
    /// ASCII case-insensitive equality (header names and tokens are ASCII).
    public func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) }
    }

    /// Without leading and trailing spaces and tabs (HTTP's optional white space, and the
    /// separators of the other ASCII formats Ferry reads).
    public func trimmingASCIIWhitespace() -> String { trimming { $0 == " " || $0 == "\t" } }

    /// Without leading and trailing white space, line ends included (Unicode's White_Space):
    /// for a line read from a file or typed on the command line.
    public func trimmingWhitespace() -> String { trimming(where: \.isWhitespace) }

    /// Without the leading and trailing characters for which `isTrimmed` holds.
    public func trimming(where isTrimmed: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !isTrimmed($0) }), let last = lastIndex(where: { !isTrimmed($0) }) else { return "" }
        return String(self[first...last])
    }
}
