/// The JSON form (Protocol/download-rules.md). Decoding is strict: an unknown key (a typo such as
/// `contentype` would otherwise widen the rule to every attachment), a wrong type or a rule
/// `validate()` refuses is an error. Lengths may be integers or size strings (`"1MiB"`);
/// they are written as integers.
extension AttachmentDownloadRule: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case contentType, name, docID, minLength, maxLength, priority, skip
    }

    /// Any key, to find the unknown ones.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Decodes one rule object.
    public init(from decoder: any Decoder) throws {
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        let any = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = any.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                debugDescription: "unknown key \(unknown.debugDescription) in a download rule; known: \(CodingKeys.allCases.map(\.rawValue).joined(separator: ", "))"))
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(contentType: try c.decodeIfPresent(String.self, forKey: .contentType),
                  name: try c.decodeIfPresent(String.self, forKey: .name),
                  docID: try c.decodeIfPresent(String.self, forKey: .docID),
                  minLength: try Self.decodeLength(c, .minLength),
                  maxLength: try Self.decodeLength(c, .maxLength),
                  priority: try c.decodeIfPresent(Int.self, forKey: .priority) ?? 0,
                  skip: try c.decodeIfPresent(Bool.self, forKey: .skip) ?? false)
        do { try validate() } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    /// A length given as a number of bytes or as a size string such as `"1MiB"`.
    private static func decodeLength(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Int64? {
        guard c.contains(key) else { return nil }
        if let n = try? c.decode(Int64.self, forKey: key) { return n }
        guard let s = try? c.decode(String.self, forKey: key) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: c,
                debugDescription: "\(key.rawValue) must be a number of bytes or a size such as \"1MiB\"")
        }
        do { return try parseSize(s, key: key.rawValue) } catch {
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: error.message)
        }
    }

    /// Encodes the matchers that are set, then `skip: true` or the priority.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(contentType, forKey: .contentType)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(docID, forKey: .docID)
        try c.encodeIfPresent(minLength, forKey: .minLength)
        try c.encodeIfPresent(maxLength, forKey: .maxLength)
        if skip { try c.encode(true, forKey: .skip) } else { try c.encode(priority, forKey: .priority) }
    }
}
