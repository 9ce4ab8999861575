import FerryStore
import FerrySync
import FoundationEssentials

/// A replication document's `download` rules (Protocol/download-rules.md) as the replicator's
/// attachment download policy.
enum DownloadRules {
    /// The rules of a `download` array; throws with the first bad rule's reason.
    static func decode(_ rules: [JSONValue]) throws(ReplicationSpec.Invalid) -> [AttachmentDownloadRule] {
        var out: [AttachmentDownloadRule] = []
        for (i, r) in rules.enumerated() {
            do { out.append(try JSONDecoder().decode(AttachmentDownloadRule.self, from: Data(CanonicalJSON.encode(r)))) } catch {
                throw ReplicationSpec.Invalid("download rule \(i + 1): \(Self.reason(error))")
            }
        }
        return out
    }

    /// The policy for `rules`, or nil when there are none (every attachment fetched as the
    /// revision arrives). Rules were checked when the document was accepted.
    static func policy(_ rules: [JSONValue]) -> AttachmentDownloadPolicy? {
        guard !rules.isEmpty, let decoded = try? decode(rules) else { return nil }
        return .rules(decoded)
    }

    private static func reason(_ error: any Error) -> String {
        if let e = error as? AttachmentDownloadRule.SyntaxError { return e.message }
        if case DecodingError.dataCorrupted(let c) = error { return c.debugDescription }
        if case DecodingError.typeMismatch(_, let c) = error { return "\(c.codingPath.map(\.stringValue).joined(separator: ".")): \(c.debugDescription)" }
        return "\(error)"
    }
}
