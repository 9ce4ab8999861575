import FerryStore
import FoundationEssentials

/// Writes a multipart body (RFC 2046 §5.1) as CouchDB sends one: `--B` CRLF, a part's header
/// fields, an empty line, its content, CRLF; `--B--` at the end. The boundary is 32 random hex
/// digits (128 bits), so it occurring inside an attachment is not a practical concern, as in
/// CouchDB (couch_uuids:random()).
struct MultipartWriter {
    /// The boundary between parts.
    let boundary: String
    private var bytes: [UInt8] = []

    /// A writer with a fresh random boundary (or `boundary`, for tests).
    init(boundary: String? = nil) {
        self.boundary = boundary ?? UUID().uuidString.replacing("-", with: "").lowercased()
    }

    /// `multipart/<subtype>; boundary="…"`.
    func contentType(_ subtype: String) -> String { "multipart/\(subtype); boundary=\"\(boundary)\"" }

    /// Appends one part.
    mutating func part(_ headers: [(name: String, value: String)], _ content: [UInt8]) {
        bytes += Array("--\(boundary)\r\n".utf8)
        for h in headers { bytes += Array("\(h.name): \(h.value)\r\n".utf8) }
        bytes += [13, 10]
        bytes += content
        bytes += [13, 10]
    }

    /// The body, closed by the final delimiter.
    /// One revision of a `multipart/mixed` answer (`open_revs`, `_bulk_get`): its JSON alone,
    /// or, with attachments following, a nested `multipart/related` part with `extra` fields.
    mutating func revision(_ json: [String: JSONValue], attachments: [AttachmentRendering.Part],
                           extra: [(name: String, value: String)] = []) {
        let bytes = CanonicalJSON.encode(.object(json))
        if attachments.isEmpty {
            part([("Content-Type", "application/json")], bytes)
        } else {
            let (type, body) = Self.related(json: bytes, parts: attachments)
            part([("Content-Type", type)] + extra, body)
        }
    }

    func finished() -> [UInt8] { bytes + Array("--\(boundary)--".utf8) }

    /// A document with attachments that follow as CouchDB writes one (`multipart/related`):
    /// the JSON first, then each attachment with its name, type and length.
    static func related(json: [UInt8], parts: [AttachmentRendering.Part], boundary: String? = nil) -> (contentType: String, body: [UInt8]) {
        var w = MultipartWriter(boundary: boundary)
        w.part([("Content-Type", "application/json")], json)
        for p in parts {
            w.part([("Content-Disposition", "attachment; filename=\(quoted(p.name))"), ("Content-Type", p.contentType),
                    ("Content-Length", String(p.bytes.count))], p.bytes)
        }
        return (w.contentType("related"), w.finished())
    }

    /// A quoted-string (RFC 9110 §5.6.4) for a header parameter; control characters (which
    /// would end the header line) become `_`: the name is informative, parts pair by order.
    static func quoted(_ s: String) -> String {
        let safe = String(String.UnicodeScalarView(s.unicodeScalars.map { $0.value < 32 || $0.value == 127 ? "_" : $0 }))
        return "\"" + safe.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }
}
