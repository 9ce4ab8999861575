/// Which index serves a query, decided as CouchDB 3.5 decides it (`mango_idx`,
/// `mango_cursor`, `mango_cursor_view:choose_best_index`): an index is usable when the
/// selector requires each of its columns that is not a sort field, and the sort is a prefix
/// of its columns (after columns the selector fixes with `$eq`); `_all_docs` when there is no
/// sort or the sort is `_id`. A partial index is only used when named in `use_index`. Among
/// usable `json` indexes the one with most leading columns the selector constrains wins, then
/// the one with fewer columns, then by name; `_all_docs` only when no `json` index is usable.
enum MangoPlanner {
    /// The chosen index, with the warnings CouchDB gives with it.
    struct Plan {
        var index: MangoIndex
        var warnings: [String]
    }

    static func plan(_ query: MangoQuery, indexes: [MangoIndex]) throws(MangoError) -> Plan {
        let sortFields = query.sort.names
        let asked = query.useIndex
        let named = indexes.filter { matches($0, asked) }
        var candidates = indexes.filter { $0.partialFilter == nil }
        for i in named where !candidates.contains(i) { candidates.append(i) }
        let usable = candidates.filter { isUsable($0, query.selector, sortFields) }
        if usable.isEmpty {
            throw MangoError("no_usable_index", "No index exists for this sort, try indexing by the sort fields.")
        }
        var warnings: [String] = []
        var pool = usable
        if !asked.isEmpty {
            let chosen = usable.filter { matches($0, asked) }
            if chosen.isEmpty {
                guard query.allowFallback else { throw .invalidIndex(asked) }
                warnings.append(asked.count == 1
                    ? "_design/\(asked[0]) was not used because it does not contain a valid index for this query."
                    : "_design/\(asked[0]), \(asked[1]) was not used because it is not a valid index for this query.")
            } else {
                pool = chosen
            }
        }
        let json = pool.filter { $0.designDocument != nil }
        guard !json.isEmpty, let best = best(json, query.selector) else {
            warnings.insert("No matching index found, create an index to optimize query time.", at: 0)
            return Plan(index: .allDocs, warnings: warnings)
        }
        return Plan(index: best, warnings: warnings)
    }

    /// Whether `index` is the one `use_index` names.
    static func matches(_ index: MangoIndex, _ asked: [String]) -> Bool {
        guard let ddoc = index.designDocument, !asked.isEmpty else { return false }
        let wanted = asked[0].hasPrefix("_design/") ? asked[0] : "_design/" + asked[0]
        return ddoc == wanted && (asked.count == 1 || asked[1] == index.name)
    }

    static func isUsable(_ index: MangoIndex, _ selector: MangoSelector, _ sortFields: [String]) -> Bool {
        guard index.designDocument != nil else {
            // `_all_docs`: any query without a sort, or one sorted by `_id` on `_id`.
            if sortFields.isEmpty { return true }
            return indexableFields(selector).contains("_id") && sortFields == ["_id"]
        }
        let required = Set(index.columns).subtracting(sortFields).subtracting(["_id", "_rev"])
        return hasRequiredFields(selector, required) && canUseSort(index.columns, sortFields, selector)
    }

    /// The top-level conjuncts of a selector.
    static func conjuncts(_ s: MangoSelector) -> [MangoSelector] {
        if case .and(let parts) = s { return parts.flatMap(conjuncts) }
        return [s]
    }

    /// Whether every field of `required` must exist in a matching document (CouchDB's
    /// `has_required_fields`: seen through `$and`, and through `$or` when every branch does).
    static func hasRequiredFields(_ selector: MangoSelector, _ required: Set<String>) -> Bool {
        if required.isEmpty { return true }
        if case .all = selector { return false }
        return remainder(selector, required).isEmpty
    }

    private static func remainder(_ s: MangoSelector, _ required: Set<String>) -> Set<String> {
        switch s {
        case .and(let parts):
            var left = required
            for p in parts { left = remainder(p, left) }
            return left
        case .or(let parts):
            var left: Set<String> = []
            for p in parts { left.formUnion(remainder(p, required)) }
            return left
        case .field(let path?, let cond):
            if case .condition("$exists", .bool(false)) = cond { return required }
            return required.subtracting([path.text])
        default:
            return required
        }
    }

    /// The sort is a prefix of the columns, once leading columns fixed by `$eq` are skipped.
    static func canUseSort(_ columns: [String], _ sortFields: [String], _ selector: MangoSelector) -> Bool {
        if sortFields.isEmpty { return true }
        var cols = columns[...]
        while let first = cols.first {
            if first == sortFields[0] { return cols.starts(with: sortFields) }
            guard isConstantField(selector, first) else { return false }
            cols = cols.dropFirst()
        }
        return false
    }

    static func isConstantField(_ selector: MangoSelector, _ field: String) -> Bool {
        conjuncts(selector).contains { c in
            if case .field(let p?, .condition("$eq", _)) = c { return p.text == field }
            return false
        }
    }

    /// Fields the selector constrains with an operator an index range can serve.
    static func indexableFields(_ selector: MangoSelector) -> Set<String> {
        var out: Set<String> = []
        for c in conjuncts(selector) {
            if case .field(let p?, .condition(let op, _)) = c,
               ["$lt", "$lte", "$eq", "$gt", "$gte", "$beginsWith", "$exists"].contains(op) {
                out.insert(p.text)
            }
        }
        return out
    }

    /// `choose_best_index`: fewest constrained fields left out of the columns' prefix, then
    /// fewest columns, then design document and name.
    static func best(_ indexes: [MangoIndex], _ selector: MangoSelector) -> MangoIndex? {
        let ranged = indexableFields(selector)
        func difference(_ i: MangoIndex) -> Int {
            ranged.count - i.columns.prefix { ranged.contains($0) }.count
        }
        return indexes.min { a, b in
            let da = difference(a), db = difference(b)
            if da != db { return da < db }
            if a.columns.count != b.columns.count { return a.columns.count < b.columns.count }
            return (a.designDocument ?? "", a.name) < (b.designDocument ?? "", b.name)
        }
    }
}

extension MangoSelector {
    /// The fields the selector constrains, split by whether an index range could serve them
    /// (`_explain`'s `selector_hints`), each list sorted.
    public var fieldHints: (indexable: [String], unindexable: [String]) {
        let indexable = MangoPlanner.indexableFields(self)
        var all: Set<String> = []
        func walk(_ s: MangoSelector) {
            switch s {
            case .and(let p), .or(let p), .nor(let p): p.forEach(walk)
            case .not(let x): walk(x)
            case .field(let path?, _): all.insert(path.text)
            default: break
            }
        }
        walk(self)
        return (indexable.sorted(), all.subtracting(indexable).sorted())
    }
}
