/// One HTTP header field as received (name case preserved).
public struct HTTPHeader: Sendable, Equatable {
    /// The field name.
    public var name: String
    /// The field value, trimmed.
    public var value: String
    /// Creates a header.
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// HTTP header fields with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    /// The fields in order of arrival.
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
        values(name).flatMap { $0.split(separator: ",") }.map { $0.trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
    }

    public func makeIterator() -> IndexingIterator<[HTTPHeader]> { fields.makeIterator() }
}

/// A parsed HTTP/1.1 request head (what the server's upgrade hook sees).
public struct HTTPRequestHead: Sendable, Equatable {
    /// The method, e.g. `GET`.
    public var method: String
    /// The request target as sent, e.g. `/db/_blipsync?client=x`.
    public var target: String
    /// `HTTP/1.1`.
    public var version: String
    /// The header fields.
    public var headers: HTTPHeaders

    /// The path part of the target, without the query.
    public var path: String { String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "") }
    /// The query string after `?`, if any.
    public var query: String? {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count > 1 ? String(parts[1]) : nil
    }
}

/// A parsed HTTP/1.1 response head (what the client sees of the upgrade answer).
public struct HTTPResponseHead: Sendable, Equatable {
    /// `HTTP/1.1`.
    public var version: String
    /// The status code.
    public var status: Int
    /// The reason phrase.
    public var reason: String
    /// The header fields.
    public var headers: HTTPHeaders
}

extension StringProtocol {
    func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A)
        }
    }

    func trimmingASCIIWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
