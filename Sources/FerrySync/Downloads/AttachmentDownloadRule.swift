import FerryHTTP

/// One rule of a declarative download policy (`AttachmentDownloadPolicy.rules(_:)`): matchers
/// that all must hold, and an action. In JSON (Protocol/download-rules.md):
///
/// ```json
/// [{"contentType": "text/*", "priority": 10},
///  {"minLength": 1048577, "skip": true}]
/// ```
///
/// and on the command line (`ferry sync --download-rule`, see `init(argument:)`):
/// `contentType=text/*,priority=10` and `minLength=1MiB,skip`.
///
/// Matchers left nil match everything. `contentType` is compared without its parameters
/// (`text/plain; charset=utf-8` is `text/plain`) and ignoring case; an attachment without a
/// content type matches no `contentType` pattern. Patterns are globs in which `*` stands for any
/// run of characters and every other character for itself. Lengths are bytes, both bounds
/// inclusive.
public struct AttachmentDownloadRule: Sendable, Equatable {
    /// A glob over the attachment's MIME type, such as `text/*` or `image/png`.
    public var contentType: String?
    /// A glob over the attachment's name in `_attachments`, such as `*.jpg`.
    public var name: String?
    /// A glob over the document ID, such as `photo-*`.
    public var docID: String?
    /// Matches attachments of at least this many bytes.
    public var minLength: Int64?
    /// Matches attachments of at most this many bytes.
    public var maxLength: Int64?
    /// The download priority of a matching attachment (higher first); ignored when `skip`.
    public var priority: Int
    /// A matching attachment is not downloaded (it stays unfetched, its metadata kept).
    public var skip: Bool

    /// A rule; with no matchers it matches every attachment.
    public init(contentType: String? = nil, name: String? = nil, docID: String? = nil, minLength: Int64? = nil,
                maxLength: Int64? = nil, priority: Int = 0, skip: Bool = false) {
        self.contentType = contentType
        self.name = name
        self.docID = docID
        self.minLength = minLength
        self.maxLength = maxLength
        self.priority = priority
        self.skip = skip
    }

    /// What the rule decides for an attachment it matches.
    public var decision: AttachmentDownloadDecision { skip ? .skip : .fetch(priority: priority) }

    /// Whether every matcher of the rule holds for `attachment`.
    public func matches(_ attachment: AttachmentInfo) -> Bool {
        if let contentType {
            guard let type = attachment.contentType,
                  GlobPattern(Self.mediaType(contentType)).matches(Self.mediaType(type)) else { return false }
        }
        if let name, !GlobPattern(name).matches(attachment.name) { return false }
        if let docID, !GlobPattern(docID).matches(attachment.documentID) { return false }
        if let minLength, attachment.length < minLength { return false }
        if let maxLength, attachment.length > maxLength { return false }
        return true
    }

    /// A MIME type without parameters, trimmed and lowercased, so `Text/Plain; charset=utf-8`
    /// compares as `text/plain`.
    static func mediaType(_ s: String) -> String {
        let bare = s.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return bare.trimmingASCIIWhitespace().lowercased()
    }

    /// Why a rule (from JSON or the command line) cannot be used.
    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong, for a person.
        public let message: String
        /// An error saying `message`.
        public init(_ message: String) { self.message = message }
        /// The message.
        public var description: String { message }
    }

    /// The checks that JSON and the command line share: lengths not negative nor crossed,
    /// patterns not empty, and not both `skip` and a priority (one of them would be ignored).
    func validate() throws(SyntaxError) {
        for (key, value) in [("minLength", minLength), ("maxLength", maxLength)] {
            if let value, value < 0 { throw SyntaxError("\(key) must not be negative, got \(value)") }
        }
        if let minLength, let maxLength, minLength > maxLength {
            throw SyntaxError("minLength \(minLength) is greater than maxLength \(maxLength): the rule matches nothing")
        }
        for (key, value) in [("contentType", contentType), ("name", name), ("docID", docID)] where value?.isEmpty == true {
            throw SyntaxError("\(key) must not be empty (leave it out to match everything)")
        }
        if skip && priority != 0 { throw SyntaxError("a rule either skips or has a priority, not both") }
    }
}
