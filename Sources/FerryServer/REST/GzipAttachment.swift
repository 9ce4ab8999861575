import FerryHTTP

/// Attachments CouchDB sends gzip-encoded (`"encoding":"gzip"`, `Content-Encoding: gzip` on a
/// multipart part): CouchDB compresses `[attachments] compressible_types` (text/*, JSON, XML,
/// JavaScript by default) and its replicator forwards them encoded. Ferry stores attachments
/// decoded (one blob per content, the same digest whichever way the bytes came, and BLIP peers
/// that know nothing of `encoding` read the right bytes), so the REST layer decodes here.
/// The gzip itself is FerryHTTP's `Gzip`.
enum GzipAttachment {
    /// The gzip member(s) in `bytes`, decoded. `expectedLength` (the `length` the entry
    /// states) bounds the output: a body that inflates past it is refused before it is held
    /// (a decompression bomb costs at most that much), and one that ends short is refused too.
    static func decode(_ bytes: ArraySlice<UInt8>, expectedLength: Int64?, name: String) throws(RESTError) -> [UInt8] {
        let limit = Int(min(expectedLength ?? Int64(maxDecoded), Int64(maxDecoded)))
        let out: [UInt8]
        do { out = try Gzip.decode(bytes, limit: limit) } catch {
            switch error {
            case .tooLarge: throw .badRequest("attachment \(name.debugDescription) inflates past \(limit) bytes")
            case .malformed: throw .badRequest("attachment \(name.debugDescription) is not complete gzip data")
            }
        }
        if let expectedLength, Int64(out.count) != expectedLength {
            throw .badRequest("attachment \(name.debugDescription) states length \(expectedLength) but decodes to \(out.count) bytes")
        }
        return out
    }

    /// The largest decoded attachment inflated in memory when the entry states no length (a
    /// request body is already capped; this caps what it may inflate to).
    static let maxDecoded = 256 << 20

    /// Whether CouchDB would store (and so serve) an attachment of `contentType` gzip-encoded:
    /// its default `[attachments] compressible_types` (`text/*, application/javascript,
    /// application/json, application/xml`), parameters ignored.
    static func isCompressible(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = MediaType.essence(contentType)
        return type.hasPrefix("text/") || ["application/javascript", "application/json", "application/xml"].contains(type)
    }

    /// Whether an `Accept-Encoding` field takes gzip (RFC 9110 §12.5.3: `gzip`, `x-gzip` or
    /// `*`, with a `q` above 0).
    static func accepted(by acceptEncoding: String?) -> Bool {
        guard let acceptEncoding else { return false }
        for item in acceptEncoding.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingASCIIWhitespace().lowercased() }
            guard let coding = parts.first, ["gzip", "x-gzip", "*"].contains(coding) else { continue }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return q > 0
        }
        return false
    }

    /// `bytes` as one gzip member (for tests and for clients that ask for gzip).
    static func encode(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] { Gzip.encode(bytes, level: level) }
}
