import ArgumentParser
import FerryStore
import FoundationEssentials
import Glibc

/// `ferry export` / `ferry import`: documents as JSON lines, one document a line —
/// `{"_id": ID, …body…}` with attachments inline (`"data"`: base64, CouchDB's shape) — so a
/// database can be copied, diffed, prepared for shipping or filled from a script.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every live document as JSON lines: {\"_id\":ID,…body…}, attachments inline.",
        discussion: """
        One line per document, by ID; deleted documents are left out, and revisions and history \
        are not exported (ferry import makes new ones). An attachment is written with its bytes \
        as base64 ("data") and its content type; one not fetched here (a download rule skipped \
        it) stays a stub with its digest and length. Importing into an empty database \
        reproduces the documents — a way to prepare a database to ship with an app \
        (DatabaseOptions.prebuiltDatabase).

        Example:
          ferry export --db tasks.db --out tasks.jsonl
          ferry import --db shipped.db tasks.jsonl
        """)
    @OptionGroup var database: DatabaseOption
    @Option(name: [.short, .long], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var out: String?

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let db = try database.openExisting()
        defer { db.close() }
        let handle = try OutputFile(path: out)
        var after: String?
        var count = 0
        do {
            while true {
                let page = try db.allDocuments(after: after, limit: 500)
                guard let last = page.last else { break }
                var chunk: [UInt8] = []
                for d in page {
                    var props = d.properties
                    if case .object(let members)? = props["_attachments"] {
                        var inline: [String: JSONValue] = [:]
                        for (name, entry) in members { inline[name] = try await Self.inline(entry, in: db) }
                        props["_attachments"] = .object(inline)
                    }
                    props["_id"] = .string(d.id)
                    chunk += CanonicalJSON.encode(.object(props))
                    chunk.append(10)
                }
                try handle.write(chunk)
                count += page.count
                after = last.id
            }
        } catch {
            throw CommandFailure("cannot export \(database.db): \(error)")
        }
        if out != nil { warn("ferry: exported \(count) document\(count == 1 ? "" : "s") to \(out ?? "")") }
    }

    /// An attachment entry with its bytes inline, or as it is (a stub) when they are not here.
    static func inline(_ entry: JSONValue, in db: Database) async throws -> JSONValue {
        guard case .object(let meta) = entry, let text = meta["digest"]?.stringValue, let digest = try? BlobDigest(text),
              db.hasBlob(digest: digest) else { return stub(entry) }
        var bytes: [UInt8] = []
        let reader = try db.readBlob(digest: digest)
        defer { reader.close() }
        for try await chunk in reader { bytes += chunk }
        var o: [String: JSONValue] = ["data": .string(Data(bytes).base64EncodedString())]
        if let type = meta["content_type"] { o["content_type"] = type }
        return .object(o)
    }

    /// An entry without `revpos` (the importing revision decides its own).
    static func stub(_ entry: JSONValue) -> JSONValue {
        guard case .object(var meta) = entry else { return entry }
        meta["revpos"] = nil
        return .object(meta)
    }
}

/// `ferry import FILE`: creates or updates one document per JSON line, in one transaction.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or update documents from JSON lines ({\"_id\":ID,…body…}), all in one transaction.",
        discussion: """
        Each non-empty line is a JSON object with a string "_id"; the rest is the body ("_rev" \
        is ignored: the line becomes a new revision on top of whatever is current). Attachments \
        may be inline ({"data": base64, "content_type": …}) or stubs naming a digest. A line \
        whose body equals the current one (ignoring attachments' revpos) is left alone, so \
        importing the same file twice changes nothing. Every line is checked before anything is \
        written: one bad line (not JSON, no _id, bad base64) writes nothing and names its line \
        number. FILE - reads standard input. Creates the database if missing.

        Example:
          ferry import --db shipped.db tasks.jsonl
          ferry export --db a.db | ferry import --db b.db -
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "The JSON lines file (- for standard input).") var file: String

    /// One line, checked: the document ID, its body, and attachments to write.
    struct Line {
        var number: Int
        var id: String
        var properties: [String: JSONValue]
        var blobs: [(name: String, type: String?, bytes: [UInt8])]
    }

    func run() async throws {
        let data: [UInt8]?
        if file == "-" { data = StandardInput.readAll() } else { data = FileManager.default.contents(atPath: file).map { Array($0) } }
        guard let data else {
            throw CommandFailure("cannot read \(file) (\(FileManager.default.fileExists(atPath: file) ? "not readable" : "no such file"))")
        }
        var lines: [Line] = []
        var number = 0
        for raw in data.split(separator: 10, omittingEmptySubsequences: false) {
            number += 1
            let bytes = Array(raw)
            guard bytes.contains(where: { $0 != 32 && $0 != 9 && $0 != 13 }) else { continue }
            lines.append(try Self.parse(bytes, line: number, file: file))
        }
        let db = try database.open()
        defer { db.close() }
        var created = 0, updated = 0, unchanged = 0
        do {
            var documents: [Document] = []
            for var line in lines {
                for b in line.blobs {
                    var doc = Document(id: line.id, properties: line.properties)
                    doc.setAttachment(b.name, blob: try db.writeBlob(b.bytes), contentType: b.type)
                    line.properties = doc.properties
                }
                let current = try db.document(line.id, includeDeleted: true)
                if let current, !current.isDeleted, Self.comparable(current.properties) == Self.comparable(line.properties) {
                    unchanged += 1
                    continue
                }
                if current == nil || current?.isDeleted == true { created += 1 } else { updated += 1 }
                documents.append(Document(id: line.id, basedOn: current?.revisionID, properties: line.properties))
            }
            let batch = documents
            try db.inBatch { (b) throws(StoreError) in
                for d in batch { try b.save(d) }
            }
        } catch {
            throw CommandFailure("cannot import \(file): \(error) (nothing was written)")
        }
        print("ferry: imported \(lines.count) document\(lines.count == 1 ? "" : "s"): \(created) created, \(updated) updated, \(unchanged) unchanged")
    }

    /// A line's document, or `Error: FILE:LINE: …`.
    static func parse(_ bytes: [UInt8], line: Int, file: String) throws -> Line {
        var props: [String: JSONValue]
        do { props = try JSONParser.parseObject(bytes) } catch {
            throw CommandFailure("\(file):\(line): not a JSON object: \(error)")
        }
        guard case .string(let id)? = props["_id"] else { throw CommandFailure("\(file):\(line): no \"_id\" string") }
        do { try Document.validateID(id) } catch { throw CommandFailure("\(file):\(line): \(error)") }
        props["_id"] = nil
        props["_rev"] = nil
        props["_revisions"] = nil
        var blobs: [(name: String, type: String?, bytes: [UInt8])] = []
        if let attachments = props["_attachments"] {
            guard case .object(let members) = attachments else { throw CommandFailure("\(file):\(line): \"_attachments\" is not an object") }
            var stubs: [String: JSONValue] = [:]
            for (name, entry) in members {
                guard case .object(var meta) = entry else { throw CommandFailure("\(file):\(line): attachment \(name) is not an object") }
                if let data = meta["data"] {
                    guard case .string(let text) = data, let decoded = Data(base64Encoded: text) else {
                        throw CommandFailure("\(file):\(line): attachment \(name): \"data\" is not base64")
                    }
                    blobs.append((name, meta["content_type"]?.stringValue, Array(decoded)))
                } else {
                    meta["revpos"] = nil
                    stubs[name] = .object(meta)
                }
            }
            props["_attachments"] = stubs.isEmpty ? nil : .object(stubs)
        }
        return Line(number: line, id: id, properties: props, blobs: blobs)
    }

    /// A body as import compares it: attachments without `revpos` and `stub`.
    static func comparable(_ props: [String: JSONValue]) -> [String: JSONValue] {
        var p = props
        if case .object(var members)? = p["_attachments"] {
            for (name, entry) in members {
                guard case .object(var meta) = entry else { continue }
                meta["revpos"] = nil
                meta["stub"] = nil
                members[name] = .object(meta)
            }
            p["_attachments"] = .object(members)
        }
        return p
    }
}
