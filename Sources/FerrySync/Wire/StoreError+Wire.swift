import FerryBLIP
import FerryStore

extension StoreError {
    /// The HTTP-style status a refusal is reported with on the wire (Protocol/replication.md, "rev": 409
    /// conflict, 403 rejected by validation, 400 malformed, 503 for a failure that may pass
    /// (disk full, I/O: the sender retries it later), 500 anything else).
    var wireStatus: Int {
        if isTransient { return 503 }
        switch self {
        case .rejected(let status, _): return status
        case .conflict: return 409
        case .invalidJSON, .notAnObject, .reservedProperty, .invalidDocumentID, .invalidRevisionID,
             .brokenHistory, .invalidArgument: return 400
        case .tooLarge: return 413
        case .notFound: return 404
        default: return 500
        }
    }

    /// The message sent with the status (a validator's own message for a rejection).
    var wireMessage: String {
        if case .rejected(_, let message) = self { return message }
        return description
    }
}

extension BLIPIncomingRequest {
    /// Answers with `HTTP`/`status` (Sync Gateway's domain for replication errors).
    func respondHTTPError(_ status: Int, _ message: String) {
        guard !self.message.isNoReply else { return }
        respondError(domain: ReplicationProtocol.Domain.http, code: status, message: message)
    }
}
