import FerryHTTP

/// The command-line form (`ferry sync --download-rule`): `key=value` pairs and the bare word
/// `skip`, separated by commas — `contentType=text/*,priority=10`, `minLength=1MiB,skip`.
extension AttachmentDownloadRule: CustomStringConvertible {
    /// Parses the command-line form. Keys are those of the JSON form (any case); lengths take a
    /// unit (`B`, `KiB`, `MiB`, `GiB`, or `K`, `M`, `G` for the same binary multiples); `skip`
    /// may also be written `skip=true`. Patterns cannot contain commas.
    public init(argument: String) throws(SyntaxError) {
        self.init()
        let example = "write it like contentType=text/*,priority=10 or minLength=1MiB,skip"
        guard !argument.trimmingASCIIWhitespace().isEmpty else { throw SyntaxError("the download rule is empty; \(example)") }
        var seen = Set<CodingKeys>()
        for part in argument.split(separator: ",", omittingEmptySubsequences: false) {
            let item = part.trimmingASCIIWhitespace()
            guard !item.isEmpty else { throw SyntaxError("empty item in \(argument.debugDescription); \(example)") }
            let keyText: String, value: String?
            if let eq = item.firstIndex(of: "=") {
                keyText = item[..<eq].trimmingASCIIWhitespace()
                value = item[item.index(after: eq)...].trimmingASCIIWhitespace()
            } else {
                keyText = item
                value = nil
            }
            guard let key = CodingKeys.allCases.first(where: { $0.rawValue.lowercased() == keyText.lowercased() }) else {
                throw SyntaxError("unknown key \(String(keyText).debugDescription); known: \(CodingKeys.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            guard seen.insert(key).inserted else { throw SyntaxError("\(key.rawValue) is given twice") }
            if key == .skip {
                switch value.map({ $0.lowercased() }) {
                case nil, "true": skip = true
                case "false": skip = false
                case let v?: throw SyntaxError("skip takes no value (or true/false), got \(v.debugDescription)")
                }
                continue
            }
            guard let value, !value.isEmpty else { throw SyntaxError("\(key.rawValue) needs a value: \(key.rawValue)=…") }
            let v = String(value)
            switch key {
            case .contentType: contentType = v
            case .name: name = v
            case .docID: docID = v
            case .minLength: minLength = try Self.parseSize(v, key: key.rawValue)
            case .maxLength: maxLength = try Self.parseSize(v, key: key.rawValue)
            case .priority:
                guard let p = Int(v) else { throw SyntaxError("priority must be an integer, got \(v.debugDescription)") }
                priority = p
            case .skip: break
            }
        }
        try validate()
    }

    /// The command-line form of the rule (lengths in bytes); `init(argument:)` reads it back.
    public var description: String {
        var parts: [String] = []
        if let contentType { parts.append("contentType=\(contentType)") }
        if let name { parts.append("name=\(name)") }
        if let docID { parts.append("docID=\(docID)") }
        if let minLength { parts.append("minLength=\(minLength)") }
        if let maxLength { parts.append("maxLength=\(maxLength)") }
        parts.append(skip ? "skip" : "priority=\(priority)")
        return parts.joined(separator: ",")
    }

    /// Binary multiples by unit, lowercased; `K`, `M`, `G` mean the same as `KiB`, `MiB`, `GiB`
    /// (decimal `KB`/`MB` are refused rather than guessed).
    private static let units: [String: Int64] = ["": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
                                                 "g": 1 << 30, "gib": 1 << 30]

    /// A size: a whole number of bytes, optionally followed by a unit (`1MiB`, `512K`, `300 B`).
    static func parseSize(_ text: String, key: String) throws(SyntaxError) -> Int64 {
        let s = text.trimmingASCIIWhitespace()
        let digits = s.prefix { $0.isASCII && $0.isNumber }
        let unit = s[digits.endIndex...].trimmingASCIIWhitespace().lowercased()
        let usage = "\(key) must be a whole number of bytes with an optional unit B, KiB, MiB, GiB, K, M or G, got \(text.debugDescription)"
        guard !digits.isEmpty, let n = Int64(digits), let multiple = units[unit] else { throw SyntaxError(usage) }
        let (bytes, overflow) = n.multipliedReportingOverflow(by: multiple)
        guard !overflow else { throw SyntaxError("\(key) \(text.debugDescription) is too large") }
        return bytes
    }
}
