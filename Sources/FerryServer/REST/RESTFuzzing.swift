import FerryHTTP
import FerryStore

/// The REST API's parsers of untrusted bytes, for the `FuzzREST` libFuzzer target
/// (docs/fuzzing.md): request targets (path segments, percent-escapes, query), `multipart/
/// related` bodies, `Range` fields, Basic credentials, `_find` selectors, `_revisions`
/// histories, bookmarks, replication documents and journals, `_security` objects, gzip request
/// bodies and CORS preflight fields. Not API: `@_spi(Fuzzing)`.
@_spi(Fuzzing) public enum RESTFuzzing {
    /// Runs every parser on fields cut from `input` at `0xFF` bytes; traps when a parser
    /// breaks a promise (a range outside the body, a part that is not inside the input).
    public static func run(_ input: [UInt8]) {
        let fields = input.split(separator: 0xFF, maxSplits: 5, omittingEmptySubsequences: false).map { Array($0) }
        func field(_ i: Int) -> [UInt8] { i < fields.count ? fields[i] : [] }
        func text(_ i: Int) -> String { String(decoding: field(i), as: UTF8.self) }

        // A request target, through the HTTP decoder (which refuses what no client may send).
        var decoder = HTTPRequestDecoder()
        let raw = Array("GET ".utf8) + field(0) + Array(" HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        if let events = try? decoder.feed(raw) {
            for case .head(let head) in events {
                if let request = RESTRequest(head: head, body: []) {
                    _ = request[query: "rev"]
                    for segment in request.segments { _ = try? DatabaseName(segment) }
                }
            }
        }

        // A multipart/related body with the boundary from field 1.
        let body = field(2)
        if let multipart = try? MultipartRelated(contentType: "multipart/related; boundary=" + text(1), body: body) {
            let total = multipart.parts.reduce(0) { $0 + $1.body.count }
            precondition(total <= body.count, "parts longer than the body")
        }

        // A Range field against a body of that length.
        let length = Int64(body.count)
        if case .part(let lo, let hi) = RESTRouter.byteRange(text(3), length: length) {
            precondition(lo >= 0 && lo <= hi && hi < length, "a range outside the body")
        }

        // Basic credentials.
        _ = AccessControl.basicCredentials(text(4))

        // A JSON value as a _find selector, a _revisions history, a bookmark, a query value.
        let json = field(5)
        if let value = try? JSONParser.parse(json, sizeLimit: 64 * 1024, maxDepth: 32) {
            if let selector = try? MangoSelector(json: value) {
                _ = selector.matches(value)
            }
            _ = try? MangoQuery(json: value.objectValue ?? [:])
            _ = DocumentJSON.history(from: value)
            // A replication document: what is accepted must survive its own stored form.
            if let object = value.objectValue, let spec = try? ReplicationSpec(id: "fuzz", json: object) {
                let again = try? ReplicationSpec(id: "fuzz", json: spec.storedJSON)
                precondition(again == spec, "a replication document changed through its stored form")
            }
            _ = ReplicationJournal(json: value)
            // A `_security` object: what is accepted grants consistently.
            if let security = try? SecurityObject(json: value) {
                let again = try? SecurityObject(json: security.json)
                precondition(again == security, "a security object changed through its stored form")
                _ = security.role(for: text(4), groups: [text(3)], serverAdmin: false)
            }
        }
        // A request body said to be gzip (inflated under a small limit), and a preflight's fields.
        if let head = (try? HTTPRequestDecoder().feedingHead("OPTIONS / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nOrigin: \(text(1))\r\nAccess-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: \(text(3))\r\n\r\n")),
           let request = RESTRequest(head: head, body: field(2)) {
            if let inflated = try? request.decodedBody(limit: 1 << 16) { precondition(inflated.count <= 1 << 16, "inflated past the limit") }
            _ = CORSPolicy(origins: ["*"], credentials: true).preflight(request)
        }
        _ = ReplicationSpec.parseDuration(text(3))
        _ = MangoBookmark.decode(text(4))
        _ = RESTRouter.queryJSON(text(5))
    }
}

extension HTTPRequestDecoder {
    /// The head of `text`, one whole request head (for the fuzz entry's preflight).
    fileprivate func feedingHead(_ text: String) throws -> FerryHTTP.HTTPRequestHead? {
        var d = self
        for case .head(let h) in try d.feed(Array(text.utf8)) { return h }
        return nil
    }
}
