import FerryHTTP
import FerryStore

/// An error answered in CouchDB's shape (Protocol/rest.md, "Errors"):
/// `{"error":"conflict","reason":"Document update conflict."}` with the matching status.
public struct RESTError: Error, Sendable, Equatable {
    /// The HTTP status.
    public let status: Int
    /// CouchDB's short error name (`not_found`, `conflict`, `forbidden`, ...).
    public let error: String
    /// A sentence for people.
    public let reason: String
    /// Seconds the client should wait before trying again (`Retry-After`, on 429 and 503).
    public var retryAfter: Int?

    /// An error with these parts.
    public init(_ status: Int, _ error: String, _ reason: String, retryAfter: Int? = nil) {
        self.status = status
        self.error = error
        self.reason = reason
        self.retryAfter = retryAfter
    }

    /// 429 `too_many_requests`: this client or user failed to log in too often.
    public static func tooManyRequests(retryAfter: Int) -> RESTError {
        RESTError(429, "too_many_requests", "Too many failed logins; retry in \(retryAfter) s.", retryAfter: retryAfter)
    }

    /// 400 `bad_request`.
    public static func badRequest(_ reason: String) -> RESTError { RESTError(400, "bad_request", reason) }
    /// 404 `not_found`.
    public static func notFound(_ reason: String = "missing") -> RESTError { RESTError(404, "not_found", reason) }
    /// 409 `conflict`, CouchDB's wording.
    public static let conflict = RESTError(409, "conflict", "Document update conflict.")
    /// 401 `unauthorized`.
    public static func unauthorized(_ reason: String = "Name or password is incorrect.") -> RESTError {
        RESTError(401, "unauthorized", reason)
    }
    /// 403 `forbidden`.
    public static func forbidden(_ reason: String) -> RESTError { RESTError(403, "forbidden", reason) }
    /// 405 `method_not_allowed`.
    public static func methodNotAllowed(_ allowed: String) -> RESTError {
        RESTError(405, "method_not_allowed", "Only \(allowed) allowed")
    }
    /// 400 `illegal_docid` with CouchDB's reason for why `id` cannot name a document.
    /// CouchDB's answer to a database name it does not allow.
    public static func illegalDatabaseName(_ name: String) -> RESTError {
        RESTError(400, "illegal_database_name",
                  "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
    }

    public static func illegalDocumentID(_ id: String) -> RESTError {
        let reason: String
        if id.isEmpty {
            reason = "Document id must not be empty"
        } else if id == Document.designPrefix {
            reason = "Illegal document id `\(id)`"
        } else if id.hasPrefix("_") {
            reason = "Only reserved document ids may start with underscore."
        } else if id.utf8.count > 250 {
            reason = "Document id is too long"
        } else {
            reason = "Document id must not contain control characters: \(id.debugDescription)"
        }
        return RESTError(400, "illegal_docid", reason)
    }
    /// 501 `not_implemented`: a CouchDB feature Ferry does not have, named in `reason`.
    public static func notImplemented(_ reason: String) -> RESTError { RESTError(501, "not_implemented", reason) }
    /// 412 `precondition_failed`.
    public static func preconditionFailed(_ reason: String) -> RESTError { RESTError(412, "precondition_failed", reason) }
    /// 415 `bad_content_type`.
    public static func badContentType(_ reason: String) -> RESTError { RESTError(415, "bad_content_type", reason) }

    /// The store's error as CouchDB would answer it.
    public init(_ e: StoreError) {
        switch e {
        case .conflict: self = .conflict
        case let .rejected(status, message): self.init(status, status == 401 ? "unauthorized" : "forbidden", message)
        case .notFound: self = .notFound()
        case let .tooLarge(limit): self.init(413, "too_large", "the document is over the limit of \(limit) bytes")
        case let .invalidJSON(reason): self = .badRequest("invalid JSON: \(reason)")
        case .notAnObject: self = .badRequest("Document must be a JSON object")
        case let .reservedProperty(p): self = .badRequest("Bad special document member: \(p)")
        case let .invalidDocumentID(id): self = .illegalDocumentID(id)
        case let .invalidRevisionID(r): self = .badRequest("Invalid rev format: \(r.debugDescription)")
        case let .brokenHistory(reason): self = .badRequest("Invalid revision history: \(reason)")
        case let .invalidAttachment(name, reason): self = .badRequest("Invalid attachment \(name.debugDescription): \(reason)")
        case let .invalidArgument(reason): self = .badRequest(reason)
        default: self.init(500, "internal_server_error", "\(e)")
        }
    }

    /// Any error a route meets, as its answer: a `RESTError` as it is, the store's mapped by
    /// `init(_: StoreError)`, anything else 500.
    static func from(_ error: any Error) -> RESTError {
        switch error {
        case let e as RESTError: return e
        case let e as StoreError: return RESTError(e)
        default: return RESTError(500, "internal_server_error", "\(error)")
        }
    }

    /// The response carrying this error. A 401 carries no `WWW-Authenticate`, as CouchDB 3.5's
    /// do not: with one, a browser holds a page's credentialed `fetch` for its own password
    /// prompt (headless, forever) instead of answering it — a web app whose session expired
    /// would hang.
    public var response: RESTResponse {
        var r = RESTResponse.json(status, .object(["error": .string(error), "reason": .string(reason)]))
        if let retryAfter { r.headers.append(("Retry-After", String(retryAfter))) }
        return r
    }
}
