import FoundationEssentials

/// A JSON document as the application sees it: an ID, its properties, and the revision it was
/// read at. Change `properties` and pass it to `Database.save`; the revision it was read at is
/// what concurrency control compares with the current revision.
public struct Document: Sendable, Equatable {
    /// The database this value was read from or saved in (its `uuid`); nil for a document
    /// made in memory. Not part of equality: a revision read from two copies is the same value.
    public internal(set) var databaseID: UUID?

    /// The document ID (non-empty, at most 250 bytes, not starting with `_` except a design
    /// document's `_design/NAME`).
    public let id: String
    /// The revision this value was read at; nil for a document not saved yet.
    public internal(set) var revisionID: RevisionID?
    /// The document body (no meta properties; `_attachments` allowed).
    public var properties: [String: JSONValue]
    /// Whether this revision is a tombstone.
    public internal(set) var isDeleted: Bool
    /// The sequence of the change that produced this revision (0 for an unsaved document).
    public internal(set) var sequence: Int64

    /// A new, unsaved document.
    public init(id: String, properties: [String: JSONValue] = [:]) {
        self.id = id
        self.revisionID = nil
        self.properties = properties
        self.isDeleted = false
        self.sequence = 0
    }

    /// A new, unsaved document from JSON object bytes.
    public init(id: String, json: [UInt8]) throws(StoreError) {
        self.init(id: id, properties: try JSONParser.parseObject(json))
    }

    /// A new revision of document `id` whose parent is `parent`, the revision the caller read
    /// elsewhere (a REST client's `_rev` or `If-Match`): saved with `.failOnConflict` it
    /// throws `.conflict` unless `parent` is still the current revision (nil: unless the
    /// document does not exist or is deleted).
    public init(id: String, basedOn parent: RevisionID?, properties: [String: JSONValue]) {
        self.init(id: id, revisionID: parent, properties: properties, isDeleted: false, sequence: 0)
    }

    init(id: String, revisionID: RevisionID?, properties: [String: JSONValue], isDeleted: Bool, sequence: Int64) {
        self.id = id
        self.revisionID = revisionID
        self.properties = properties
        self.isDeleted = isDeleted
        self.sequence = sequence
    }

    /// Whether two values are the same revision of the same document with the same body,
    /// wherever they were read.
    public static func == (a: Document, b: Document) -> Bool {
        a.id == b.id && a.revisionID == b.revisionID && a.properties == b.properties && a.isDeleted == b.isDeleted
            && a.sequence == b.sequence
    }

    /// This value, marked as read from or saved in the database `uuid`.
    func from(_ uuid: UUID) -> Document {
        var d = self
        d.databaseID = uuid
        return d
    }

    /// A property by name.
    public subscript(key: String) -> JSONValue? {
        get { properties[key] }
        set { properties[key] = newValue }
    }

    /// The canonical JSON of the body.
    public var canonicalJSON: [UInt8] { CanonicalJSON.encode(properties) }

    /// The document as CouchDB's clients and Mango see it: its body with `_id`, `_rev` (when
    /// it has a revision) and, for a tombstone, `_deleted: true`.
    public var jsonObject: [String: JSONValue] {
        var o = properties
        o["_id"] = .string(id)
        if let revisionID { o["_rev"] = .string(revisionID.description) }
        if isDeleted { o["_deleted"] = true }
        return o
    }

    /// The prefix of a design document's ID (`_design/NAME`), the one reserved prefix a
    /// replicated document may carry: CouchDB keeps views, filters and validation functions in
    /// them, and its replicators send them like any other document.
    public static let designPrefix = "_design/"

    /// Whether `id` names a design document (`_design/` and a non-empty name).
    public static func isDesignID(_ id: String) -> Bool {
        id.utf8.count > designPrefix.utf8.count && id.hasPrefix(designPrefix)
    }

    /// Checks a document ID: non-empty, at most 250 UTF-8 bytes, no control characters, and
    /// not starting with `_` unless it is a design document's `_design/NAME` (CouchDB reserves
    /// the others: `_local/` are local documents, kept apart and never replicated).
    public static func validateID(_ id: String) throws(StoreError) {
        let u = id.utf8
        guard !u.isEmpty, u.count <= 250, u.first != UInt8(ascii: "_") || isDesignID(id),
              !u.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { throw .invalidDocumentID(id) }
    }
}
