/// A Mango index (`POST /{db}/_index`): CouchDB's `json` type, kept as CouchDB keeps it — a
/// view of a design document whose `language` is `"query"` — so it replicates with the
/// database; or the `special` index every database has, `_all_docs` (by `_id`).
public struct MangoIndex: Sendable, Equatable {
    /// The design document (`_design/…`); nil for `_all_docs`.
    public var designDocument: String?
    /// The index's name (the view's).
    public var name: String
    /// Its columns with their directions (`asc`/`desc` as written; CouchDB ignores them).
    public var fields: [(name: String, direction: String)]
    /// Only documents matching this are in the index (`partial_filter_selector`).
    public var partialFilter: JSONValue?

    /// `json`, or `special` for `_all_docs`.
    public var type: String { designDocument == nil ? "special" : "json" }
    /// The column names.
    public var columns: [String] { fields.map(\.name) }

    /// `_all_docs`.
    public static let allDocs = MangoIndex(designDocument: nil, name: "_all_docs", fields: [("_id", "asc")], partialFilter: nil)

    /// An index of `fields` named `name` in design document `designDocument`.
    public init(designDocument: String?, name: String, fields: [(name: String, direction: String)], partialFilter: JSONValue?) {
        self.designDocument = designDocument
        self.name = name
        self.fields = fields
        self.partialFilter = partialFilter
    }

    public static func == (a: MangoIndex, b: MangoIndex) -> Bool {
        a.designDocument == b.designDocument && a.name == b.name && a.columns == b.columns
            && a.fields.map(\.direction) == b.fields.map(\.direction) && a.partialFilter == b.partialFilter
    }

    /// What the store registers the index by: its columns and partial filter as canonical
    /// JSON (directions left out: CouchDB ignores them, so they do not change the entries).
    public var storedDefinition: String {
        String(decoding: CanonicalJSON.encode(.object(["fields": .array(columns.map { .string($0) }),
                                                       "partial_filter_selector": partialFilter ?? .object([:])])), as: UTF8.self)
    }

    /// The definition as `GET /{db}/_index` shows it (`{"fields":[{"a":"asc"}], …}`).
    public var definition: JSONValue {
        var def: [String: JSONValue] = ["fields": .array(fields.map { .object([$0.name: .string($0.direction)]) })]
        if let partialFilter, partialFilter != .object([:]) { def["partial_filter_selector"] = partialFilter }
        return .object(def)
    }

    /// A `json` index of `fields` as `POST /_index` makes one: named `name` in design
    /// document `designDocument` (`_design/` added if missing), each defaulting to CouchDB's
    /// automatic name, a digest of the definition (the same index, the same name).
    public init(fields: [MangoSort.Field], partialFilter: JSONValue?, name: String? = nil, designDocument: String? = nil) {
        let digest = Self.automaticName(fields: fields, partialFilter: partialFilter)
        let ddoc = designDocument.map { $0.hasPrefix("_design/") ? $0 : "_design/" + $0 } ?? "_design/" + digest
        self.init(designDocument: ddoc, name: name ?? digest, fields: fields.map { ($0.path.text, $0.direction) },
                  partialFilter: partialFilter)
    }

    /// The index as `GET /{db}/_index`, `_explain` and `ferry find --explain` show it.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["ddoc": designDocument.map { .string($0) } ?? .null, "name": .string(name),
                                      "type": .string(type), "def": definition]
        if designDocument != nil { o["partitioned"] = false }
        return .object(o)
    }

    /// The indexes a design document defines (none unless its `language` is `"query"`).
    public static func indexes(inDesignDocument id: String, _ body: [String: JSONValue]) -> [MangoIndex] {
        guard body["language"]?.stringValue == "query", case .object(let views)? = body["views"] else { return [] }
        return views.keys.sorted().compactMap { name -> MangoIndex? in
            guard case .object(let view)? = views[name], case .object(let map)? = view["map"],
                  case .object(let directions)? = map["fields"] else { return nil }
            // The columns' order: `options.def.fields` (CouchDB writes it beside the map, whose
            // `fields` object Ferry's JSON objects would not keep in order).
            var order = view["options"]?.objectValue?["def"]?.objectValue?["fields"]?.arrayValue?.compactMap { f -> String? in
                f.stringValue ?? f.objectValue?.keys.first
            } ?? []
            if Set(order) != Set(directions.keys) { order = directions.keys.sorted() }
            var partial: JSONValue? = map["partial_filter_selector"]
            if partial == .object([:]) || partial == .null { partial = Optional.none }
            return MangoIndex(designDocument: id, name: name, fields: order.map { ($0, directions[$0]?.stringValue ?? "asc") },
                              partialFilter: partial)
        }
    }

    /// The name CouchDB gives an index (and its design document) when the request names
    /// neither: a digest of the definition, so the same index gets the same name.
    public static func automaticName(fields: [MangoSort.Field], partialFilter: JSONValue?) -> String {
        let definition = CanonicalJSON.encode(.object(["fields": .array(fields.map { .object([$0.path.text: .string($0.direction)]) }),
                                                       "partial_filter_selector": partialFilter ?? .object([:])]))
        return Hex.encode(SHA1.digest(of: definition))
    }

    /// The design document view that holds this index, as CouchDB writes it.
    public var view: JSONValue {
        var map: [String: JSONValue] = ["fields": .object(Dictionary(fields.map { ($0.name, JSONValue.string($0.direction)) },
                                                                     uniquingKeysWith: { a, _ in a }))]
        map["partial_filter_selector"] = partialFilter ?? .object([:])
        return .object(["map": .object(map), "reduce": "_count",
                        "options": .object(["def": .object(["fields": .array(fields.map { .string($0.name) })])])])
    }
}

/// A `sort` (or an index's `fields`): field names, each ascending or descending, written as
/// `"name"` or `{"name": "asc"|"desc"}` (CouchDB's `mango_sort`).
public struct MangoSort: Sendable, Equatable {
    /// One sorted field.
    public struct Field: Sendable, Equatable {
        public var path: MangoFieldPath
        public var direction: String
    }

    /// The fields in order.
    public var fields: [Field]

    /// The fields' names.
    public var names: [String] { fields.map(\.path.text) }

    /// Whether the sort is descending (CouchDB allows one direction for all fields).
    public var descending: Bool { fields.first?.direction == "desc" }

    /// Parses CouchDB's form; `[]` (or absent) is no sort.
    public init(json: JSONValue) throws(MangoError) {
        guard case .array(let items) = json else {
            throw MangoError("invalid_sort_json", "Sort must be an array of sort specs, not: \(Self.show(json))")
        }
        var out: [Field] = []
        for item in items {
            switch item {
            case .string(let name):
                out.append(Field(path: try MangoFieldPath(name), direction: "asc"))
            case .string(""):
                throw MangoError("invalid_sort_field", "Invalid sort field: \"\"")
            case .object(let o) where o.count == 1:
                // CouchDB's `mango_sort` names any other direction an invalid field.
                guard let (name, dir) = o.first, case .string(let d) = dir, d == "asc" || d == "desc" else {
                    throw MangoError("invalid_sort_field", "Invalid sort field: \(Self.show(item))")
                }
                out.append(Field(path: try MangoFieldPath(name), direction: d))
            default:
                throw MangoError("invalid_sort_field", "Invalid sort field: \(Self.show(item))")
            }
        }
        if Set(out.map(\.direction)).count > 1 {
            throw MangoError("unsupported_mixed_sort", "Sorts currently only support a single direction for all fields.")
        }
        fields = out
    }

    /// A JSON value as text, for error reasons.
    public static func show(_ v: JSONValue) -> String { String(decoding: CanonicalJSON.encode(v), as: UTF8.self) }
}
