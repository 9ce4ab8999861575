import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Testing

/// The document commands (issue 23): each runs the built `ferry` on real database files and
/// checks its output and exit status, errors included.
@Suite("ferry document commands")
struct DocumentCommandTests {
    /// `ferry ARGS --db PATH`.
    static func ferry(_ db: String, _ args: String...) async throws -> (status: Int32, out: String, err: String) {
        try await runFerry(args + ["--db", db])
    }

    /// The JSON object a command printed (one line).
    static func object(_ text: String) -> [String: JSONValue] {
        (try? JSONParser.parseObject(Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8))) ?? [:]
    }

    /// The JSON objects a command printed, one a line.
    static func objects(_ text: String) -> [[String: JSONValue]] {
        text.split(separator: "\n").map { object(String($0)) }
    }

    /// A database with document `doc` in conflict: `1-…` then two children, `2-aa` (body
    /// `{"v":"a"}`) and `2-bb` (`{"v":"b"}`), kept as they are (no resolver), the way a
    /// replicator whose resolver declined leaves them. Returns the three revision IDs.
    static func conflicted(_ path: String) throws -> (root: String, a: String, b: String) {
        let db = try Database.open(at: path)
        defer { db.close() }
        let root = try db.save(Document(id: "doc", properties: ["v": 0])).revisionID?.description ?? ""
        try db.insert(ReplicatedRevision(documentID: "doc", history: ["2-aa", root], body: Array(#"{"v":"a"}"#.utf8)), resolver: nil)
        try db.insert(ReplicatedRevision(documentID: "doc", history: ["2-bb", root], body: Array(#"{"v":"b"}"#.utf8)), resolver: nil)
        return (root, "2-aa", "2-bb")
    }

    @Test func putGetRevAndRevs() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let r1 = try await Self.ferry(db, "put", "task", #"{"title":"milk"}"#)
        #expect(r1.status == 0, "\(r1.err)")
        let rev1 = r1.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(rev1.hasPrefix("1-"))
        let rev2 = try await Self.ferry(db, "put", "task", #"{"title":"eggs"}"#).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(rev2.hasPrefix("2-"))

        let get = try await Self.ferry(db, "get", "task")
        #expect(get.status == 0 && Self.object(get.out) == ["_id": "task", "_rev": .string(rev2), "title": "eggs"])
        #expect(try await Self.ferry(db, "get", "task", "--json").out == get.out)
        let byRev = try await Self.ferry(db, "get", "task", "--rev", rev2)
        #expect(byRev.out == get.out)

        // An inner revision's body is not kept; an unknown or malformed one is an error.
        let inner = try await Self.ferry(db, "get", "task", "--rev", rev1)
        #expect(inner.status == 1 && inner.out.isEmpty && inner.err.contains("Error: the body of \(rev1) of task is not kept"), "\(inner.err)")
        let unknown = try await Self.ferry(db, "get", "task", "--rev", "7-abcdef")
        #expect(unknown.status == 1 && unknown.err.contains("Error: task has no revision 7-abcdef"), "\(unknown.err)")
        let malformed = try await Self.ferry(db, "get", "task", "--rev", "seven")
        #expect(malformed.status == 1 && malformed.err.contains("is not a revision ID"), "\(malformed.err)")
        let missing = try await Self.ferry(db, "get", "nope")
        #expect(missing.status == 1 && missing.err == "Error: no document nope\n", "\(missing.err)")

        // The tree: newest first, the current one marked.
        let tree = try await Self.ferry(db, "get", "task", "--revs")
        #expect(tree.status == 0)
        #expect(tree.out == "* \(rev2)\t\(rev1)\tcurrent,leaf\n  \(rev1)\t-\t\n", "\(tree.out)")
        #expect(try await Self.ferry(db, "revs", "task").out == tree.out, "ferry revs is the same as get --revs")
        let json = Self.object(try await Self.ferry(db, "get", "task", "--revs", "--json").out)
        #expect(json["current"] == .string(rev2) && json["conflicts"] == [] && json["deleted"] == false)
        let revisions = json["revisions"]?.arrayValue ?? []
        #expect(revisions.count == 2)
        #expect(revisions.first?.objectValue?["generation"] == 2 && revisions.first?.objectValue?["leaf"] == true)
        #expect(revisions.last?.objectValue?["parent"] == .null && revisions.last?.objectValue?["body"] == false)

        // A deleted document: get refuses it, --rev shows the tombstone, the tree says deleted.
        let del = try await Self.ferry(db, "delete", "task")
        let tomb = del.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(del.status == 0 && tomb.hasPrefix("3-"))
        let gone = try await Self.ferry(db, "get", "task")
        #expect(gone.status == 1 && gone.err == "Error: task is deleted\n", "\(gone.err)")
        #expect(Self.object(try await Self.ferry(db, "get", "task", "--rev", tomb).out) == ["_id": "task", "_rev": .string(tomb), "_deleted": true])
        #expect(try await Self.ferry(db, "revs", "task").out.hasPrefix("* \(tomb)\t\(rev2)\tcurrent,leaf,deleted\n"))
        let again = try await Self.ferry(db, "delete", "task")
        #expect(again.status == 1 && again.err.contains("Error: task is deleted"))
        let both = try await Self.ferry(db, "get", "task", "--rev", tomb, "--revs")
        #expect(both.status.isUsageError && both.err.contains("--rev and --revs exclude each other"))
    }

    @Test func readingCommandsRefuseAMissingDatabaseAndCreateNothing() async throws {
        let dir = TempDir()
        let db = dir.path("absent.db")
        let reads: [[String]] = [["get", "x"], ["get", "x", "--revs"], ["revs", "x"], ["ls"], ["conflicts"], ["query", "--type", "t"],
                                 ["info"], ["export"], ["compact"], ["purge", "x"], ["delete", "x"], ["resolve", "x", "--keep", "1-aa"],
                                 ["attachment", "ls", "x"], ["attachment", "get", "x", "n"], ["attachment", "rm", "x", "n"]]
        for args in reads {
            let r = try await runFerry(args + ["--db", db])
            #expect(r.status == 1, "\(args): \(r.status) \(r.err)")
            #expect(r.err == "Error: no database at \(db) (give --db PATH; put, import and sync create one)\n", "\(args): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: db), "\(args) created the database")
        }
        // A writing command creates it.
        #expect(try await Self.ferry(db, "put", "x", "{}").status == 0)
        #expect(FileManager.default.fileExists(atPath: db))
    }

    @Test func putRefusesBadJSONWithOneLineAndWritesNothing() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        for bad in ["{", "[1,2]", #"{"a":1,"a":2}"#, #"{"_rev":"1-aa"}"#] {
            let r = try await Self.ferry(db, "put", "doc", bad)
            #expect(r.status == 1, "\(bad): \(r.err)")
            #expect(r.err.hasPrefix("Error: ") && r.err.split(separator: "\n").count == 1, "\(bad): \(r.err)")
            #expect(r.out.isEmpty)
        }
        #expect(try await Self.ferry(db, "ls").out.isEmpty)
    }

    @Test func attachmentsPutListRemove() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let file = dir.path("notes.txt")
        try Data("hello".utf8).write(to: URL(fileURLWithPath: file))
        let put = try await Self.ferry(db, "put", "report", #"{"title":"Q3"}"#, "--attach", "notes.txt=\(file):text/plain",
                                       "--attach", "raw=\(file)")
        #expect(put.status == 0, "\(put.err)")
        let ls = try await Self.ferry(db, "attachment", "ls", "report")
        #expect(ls.out == "notes.txt\ttext/plain\t5\tfetched\nraw\t-\t5\tfetched\n", "\(ls.out)")
        let json = Self.objects(try await Self.ferry(db, "attachment", "ls", "report", "--json").out)
        #expect(json.first == ["name": "notes.txt", "content_type": "text/plain", "length": 5, "digest": "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=",
                               "revpos": 1, "fetched": true])
        #expect(try await Self.ferry(db, "attachment", "get", "report", "notes.txt").out == "hello")

        // A missing file: one line, exit 1, and no new revision.
        let missing = try await Self.ferry(db, "put", "report", #"{"title":"Q4"}"#, "--attach", "x=\(dir.path("nope.bin"))")
        #expect(missing.status == 1)
        #expect(missing.err == "Error: cannot read attachment file \(dir.path("nope.bin")) (no such file)\n", "\(missing.err)")
        #expect(Self.object(try await Self.ferry(db, "get", "report").out)["title"] == "Q3")
        let bad = try await Self.ferry(db, "put", "report", "{}", "--attach", "noequals")
        #expect(bad.status.isUsageError && bad.err.contains("--attach takes NAME=PATH[:TYPE]"))

        // rm: a new revision without it; the other stays; a second rm is an error.
        let rm = try await Self.ferry(db, "attachment", "rm", "report", "raw")
        #expect(rm.status == 0 && rm.out.hasPrefix("2-"), "\(rm.err)")
        #expect(try await Self.ferry(db, "attachment", "ls", "report").out == "notes.txt\ttext/plain\t5\tfetched\n")
        let rm2 = try await Self.ferry(db, "attachment", "rm", "report", "raw")
        #expect(rm2.status == 1 && rm2.err == "Error: report has no attachment raw\n", "\(rm2.err)")
        let noDoc = try await Self.ferry(db, "attachment", "rm", "nodoc", "raw")
        #expect(noDoc.status == 1 && noDoc.err == "Error: no document nodoc\n")
        // The older revision still lists it.
        let old = put.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await Self.ferry(db, "attachment", "ls", "report", "--rev", old).status == 1, "an inner revision keeps no body")
    }

    @Test func conflictsAreListedShownAndResolvedByKeep() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let (root, a, b) = try Self.conflicted(db)

        #expect(try await Self.ferry(db, "conflicts").out == "doc\t\(b)\t\(a)\n")
        #expect(Self.objects(try await Self.ferry(db, "conflicts", "--json").out) == [["id": "doc", "rev": .string(b), "conflicts": [.string(a)]]])
        let tree = try await Self.ferry(db, "get", "doc", "--revs")
        #expect(tree.out == "* \(b)\t\(root)\tcurrent,leaf\n  \(a)\t\(root)\tleaf,conflict\n  \(root)\t-\t\n", "\(tree.out)")
        #expect(Self.object(try await Self.ferry(db, "get", "doc", "--rev", a).out) == ["_id": "doc", "_rev": .string(a), "v": "a"])

        // Errors: a revision that is not a leaf, one that does not exist, neither option.
        let inner = try await Self.ferry(db, "resolve", "doc", "--keep", root)
        #expect(inner.status == 1 && inner.err == "Error: \(root) is not a leaf of doc (its leaves: \(b), \(a))\n", "\(inner.err)")
        let unknown = try await Self.ferry(db, "resolve", "doc", "--keep", "2-cc")
        #expect(unknown.status == 1 && unknown.err.contains("2-cc is not a leaf of doc"))
        let none = try await Self.ferry(db, "resolve", "doc")
        #expect(none.status.isUsageError && none.err.contains("give one of --keep REV and --merge FILE"))
        let nodoc = try await Self.ferry(db, "resolve", "nodoc", "--keep", a)
        #expect(nodoc.status == 1 && nodoc.err == "Error: no document nodoc\n")

        // Keep the losing leaf: it wins as it is, the other leaf is closed (not removed).
        let keep = try await Self.ferry(db, "resolve", "doc", "--keep", a)
        #expect(keep.status == 0 && keep.out == "\(a)\n", "\(keep.err)")
        #expect(Self.object(try await Self.ferry(db, "get", "doc").out) == ["_id": "doc", "_rev": .string(a), "v": "a"])
        #expect(try await Self.ferry(db, "conflicts").out == "No conflicted documents.\n")
        #expect(try await Self.ferry(db, "conflicts", "--json").out.isEmpty)
        let revs = try await Self.ferry(db, "revs", "doc").out
        let lines = revs.split(separator: "\n").map(String.init)
        #expect(lines.contains("* \(a)\t\(root)\tcurrent,leaf") && lines.contains("  \(b)\t\(root)\t"), "\(revs)")
        #expect(lines.contains { $0.hasSuffix("\t\(b)\tleaf,closed") }, "\(revs)")
        let twice = try await Self.ferry(db, "resolve", "doc", "--keep", a)
        #expect(twice.status == 1 && twice.err.contains("Error: doc has no conflicts"), "\(twice.err)")
    }

    @Test func resolveByMerge() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let (_, _, b) = try Self.conflicted(db)
        let bad = dir.path("bad.json")
        try Data("{\"v\":".utf8).write(to: URL(fileURLWithPath: bad))
        let badJSON = try await Self.ferry(db, "resolve", "doc", "--merge", bad)
        #expect(badJSON.status == 1 && badJSON.err.hasPrefix("Error: \(bad) is not a JSON object: invalid JSON"), "\(badJSON.err)")
        let absent = try await Self.ferry(db, "resolve", "doc", "--merge", dir.path("nope.json"))
        #expect(absent.status == 1 && absent.err == "Error: cannot read \(dir.path("nope.json")) (no such file)\n", "\(absent.err)")
        #expect(try await Self.ferry(db, "conflicts").out.hasPrefix("doc\t"), "the failed resolutions changed nothing")

        let merged = dir.path("merged.json")
        try Data(#"{"v":["a","b"]}"#.utf8).write(to: URL(fileURLWithPath: merged))
        let r = try await Self.ferry(db, "resolve", "doc", "--merge", merged)
        #expect(r.status == 0 && r.out.hasPrefix("3-"), "\(r.err)")
        let rev = r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Self.object(try await Self.ferry(db, "get", "doc").out) == ["_id": "doc", "_rev": .string(rev), "v": ["a", "b"]])
        let tree = Self.object(try await Self.ferry(db, "revs", "doc", "--json").out)
        #expect(tree["conflicts"] == [])
        // On top of the higher leaf, whichever side it is on.
        let node = tree["revisions"]?.arrayValue?.first { $0.objectValue?["rev"] == .string(rev) }
        #expect(node?.objectValue?["parent"] == .string(b), "\(tree)")
    }

    @Test func queryByTypeAndFields() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let docs = [("t1", #"{"type":"task","done":false,"prio":1,"owner":{"name":"molly"}}"#),
                    ("t2", #"{"type":"task","done":true,"prio":3,"owner":{"name":"naomi"}}"#),
                    ("t3", #"{"type":"task","done":false,"prio":2,"due":null}"#),
                    ("n1", #"{"type":"note","text":"a=b"}"#)]
        for (id, body) in docs { #expect(try await Self.ferry(db, "put", id, body).status == 0) }
        func ids(_ args: String...) async throws -> String {
            let r = try await runFerry(["query", "--db", db] + args)
            #expect(r.status == 0, "\(args): \(r.err)")
            return r.out.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }.joined(separator: ",")
        }
        #expect(try await ids("--type", "task") == "t1,t2,t3")
        #expect(try await ids("--type", "task", "--where", "done=false") == "t1,t3")
        #expect(try await ids("--where", "prio>=2") == "t2,t3")
        #expect(try await ids("--where", "prio<2") == "t1")
        #expect(try await ids("--where", "prio!=2", "--where", "done=false") == "t1")
        #expect(try await ids("--where", "owner.name=naomi") == "t2")
        #expect(try await ids("--where", #"owner.name="molly""#) == "t1")
        #expect(try await ids("--where", "text=a=b") == "n1")
        #expect(try await ids("--where", "due=null") == "t3")
        #expect(try await ids("--exists", "owner") == "t1,t2")
        #expect(try await ids("--type", "task", "--limit", "2") == "t1,t2")
        #expect(try await ids("--type", "nothing") == "")

        let json = Self.objects(try await Self.ferry(db, "query", "--where", "prio=3", "--json").out)
        #expect(json.count == 1 && json.first?["_id"] == "t2" && json.first?["owner"] == ["name": "naomi"])
        #expect(json.first?["_rev"]?.stringValue?.hasPrefix("1-") == true)

        let badWhere = try await Self.ferry(db, "query", "--where", "prio")
        #expect(badWhere.status.isUsageError && badWhere.err.contains("--where takes FIELD OP VALUE"))
        let badPath = try await Self.ferry(db, "query", "--where", "a..b=1")
        #expect(badPath.status == 1 && badPath.err.hasPrefix("Error: cannot query: invalid_field_name"), "\(badPath.err)")
        // Mango's comparisons: true is not 1.
        #expect(try await Self.ferry(db, "put", "b1", #"{"flag":true}"#).status == 0)
        #expect(try await ids("--where", "flag=1") == "")
        #expect(try await ids("--where", "flag=true") == "b1")
        let nothing = try await Self.ferry(db, "query")
        #expect(nothing.status.isUsageError)
        let badLimit = try await Self.ferry(db, "query", "--type", "task", "--limit", "0")
        #expect(badLimit.status.isUsageError)
    }

    @Test func findAndIndexesOnTheShell() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        for (id, body) in [("a", #"{"type":"task","prio":3}"#), ("b", #"{"type":"task","prio":1}"#),
                           ("c", #"{"type":"task","prio":2}"#), ("n", #"{"type":"note"}"#)] {
            #expect(try await Self.ferry(db, "put", id, body).status == 0)
        }
        // A sort needs an index, as on CouchDB.
        let sortQuery = #"{"selector":{"type":"task"},"sort":["prio"],"fields":["_id","prio"]}"#
        let refused = try await Self.ferry(db, "find", sortQuery)
        #expect(refused.status == 1 && refused.err.contains("no_usable_index"), "\(refused.err)")
        let added = try await Self.ferry(db, "index", "add", "prio", "--name", "by-prio", "--ddoc", "tasks")
        #expect(added.status == 0 && added.out == "created\t_design/tasks\tby-prio\n", "\(added.out) \(added.err)")
        #expect(try await Self.ferry(db, "index", "add", "prio", "--name", "by-prio", "--ddoc", "tasks").out.hasPrefix("exists\t"))
        let sorted = try await Self.ferry(db, "find", sortQuery)
        #expect(sorted.status == 0, "\(sorted.err)")
        #expect(Self.objects(sorted.out).map { $0["_id"] ?? .null } == ["b", "c", "a"])
        #expect(Self.objects(sorted.out).first == ["_id": "b", "prio": 1])
        #expect(sorted.err.contains("bookmark: "))
        let explained = Self.object(try await Self.ferry(db, "find", "--explain", sortQuery).out)
        #expect(explained["index"]?.objectValue?["name"] == "by-prio")
        // A bare selector, and --all across pages.
        let all = try await Self.ferry(db, "find", "--all", #"{"selector":{"type":{"$gt":null}},"limit":1}"#)
        #expect(Self.objects(all.out).compactMap { $0["_id"]?.stringValue } == ["a", "b", "c", "n"], "\(all.out)")
        #expect(Self.objects(try await Self.ferry(db, "find", #"{"prio":{"$gte":2}}"#).out).count == 2)
        let listed = try await Self.ferry(db, "index", "ls")
        #expect(listed.out.contains("_design/tasks\tby-prio\tjson\t{\"fields\":[{\"prio\":\"asc\"}]}"), "\(listed.out)")
        #expect(try await Self.ferry(db, "index", "rm", "tasks", "by-prio").status == 0)
        #expect(try await Self.ferry(db, "index", "rm", "tasks", "by-prio").status == 1)
        #expect(try await Self.ferry(db, "find", sortQuery).status == 1)
        #expect(try await Self.ferry(db, "find", "[1]").status.isUsageError)
    }

    @Test func purgeRemovesAllTrace() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        #expect(try await Self.ferry(db, "put", "gone", #"{"a":1}"#).status == 0)
        #expect(try await Self.ferry(db, "put", "kept", #"{"a":2}"#).status == 0)
        let purge = try await Self.ferry(db, "purge", "gone")
        #expect(purge.status == 0 && purge.err == "ferry: purged gone\n", "\(purge.err)")
        #expect(try await Self.ferry(db, "ls", "--deleted").out.hasPrefix("kept\t"))
        #expect(try await Self.ferry(db, "ls", "--deleted").out.split(separator: "\n").count == 1, "no tombstone left")
        let again = try await Self.ferry(db, "purge", "gone")
        #expect(again.status == 1 && again.err == "Error: no document gone\n")

        // One leaf of a conflict: the other stays, current, and the conflict is gone.
        let cdb = dir.path("c.db")
        let (root, a, b) = try Self.conflicted(cdb)
        let notLeaf = try await Self.ferry(cdb, "purge", "doc", "--rev", root)
        #expect(notLeaf.status == 1 && notLeaf.err.contains("\(root) is not a leaf of doc"), "\(notLeaf.err)")
        let unknown = try await Self.ferry(cdb, "purge", "doc", "--rev", "9-99")
        #expect(unknown.status == 1 && unknown.err == "Error: doc has no revision 9-99 (ferry revs doc lists them)\n", "\(unknown.err)")
        let one = try await Self.ferry(cdb, "purge", "doc", "--rev", b)
        #expect(one.status == 0 && one.out == "\(a)\n", "\(one.err)")
        #expect(try await Self.ferry(cdb, "revs", "doc").out == "* \(a)\t\(root)\tcurrent,leaf\n  \(root)\t-\t\n")
        #expect(try await Self.ferry(cdb, "conflicts", "--json").out.isEmpty)
        // The last branch: the document goes.
        let last = try await Self.ferry(cdb, "purge", "doc", "--rev", a)
        #expect(last.status == 0 && last.out.isEmpty && last.err == "ferry: purged doc\n")
        #expect(try await Self.ferry(cdb, "get", "doc").err == "Error: no document doc\n")
    }

    @Test func compactRemovesUnreferencedAttachmentFiles() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let file = dir.path("big.bin")
        try Data(repeating: 7, count: 100_000).write(to: URL(fileURLWithPath: file))
        #expect(try await Self.ferry(db, "put", "doc", "{}", "--attach", "big=\(file)").status == 0)
        let nothing = try await Self.ferry(db, "compact")
        #expect(nothing.status == 0 && nothing.out.hasPrefix("removed 0 unreferenced attachment files (0 B)\non disk: "), "\(nothing.out)")
        #expect(try await Self.ferry(db, "purge", "doc").status == 0)
        let c = try await Self.ferry(db, "compact", "--json")
        #expect(c.status == 0, "\(c.err)")
        let o = Self.object(c.out)
        #expect(o["blobs_removed"] == 1 && o["bytes_freed"] == 100_000, "\(c.out)")
        let before = o["bytes_before"]?.intValue ?? 0, after = o["bytes_after"]?.intValue ?? 0
        #expect(before - after >= 100_000, "\(c.out)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: db + ".attachments").filter { $0.hasSuffix(".blob") }.isEmpty)
    }

    @Test func infoCountsSizesAndCheckpoints() async throws {
        let dir = TempDir()
        let db = dir.path("t.db")
        let file = dir.path("a.txt")
        try Data("12345".utf8).write(to: URL(fileURLWithPath: file))
        for id in ["a", "b", "c"] { #expect(try await Self.ferry(db, "put", id, "{}", "--attach", "f=\(file)").status == 0) }
        #expect(try await Self.ferry(db, "delete", "c").status == 0)
        let info = try await Self.ferry(db, "info")
        #expect(info.status == 0, "\(info.err)")
        #expect(info.out.contains("documents:    2 (1 deleted, 0 conflicted)\n"), "\(info.out)")
        #expect(info.out.contains("update seq:   4\n") && info.out.contains("attachments:  1 files, 5 B (5 bytes)\n"))
        #expect(info.out.contains("checkpoints:  none\n"))
        let o = Self.object(try await Self.ferry(db, "info", "--json").out)
        #expect(o["documents"] == 2 && o["deleted"] == 1 && o["conflicted"] == 0 && o["update_seq"] == 4)
        #expect((o["file_size"]?.intValue ?? 0) > 0 && o["attachments"] == ["files": 1, "size": 5] && o["checkpoints"] == [])

        // After a sync, both sides hold a checkpoint: the replicator's names the peer.
        let serverDB = dir.path("srv.db")
        let server = try await ServeProcess(["--db", serverDB, "--name", "srv", "--allow-anonymous", "--no-advertise"])
        let url = "\(server.wsURL)/srv"
        let sync = try await runFerry(["sync", url, "--db", db])
        #expect(sync.status == 0, "\(sync.err)")
        let mine = Self.object(try await Self.ferry(db, "info", "--json").out)["checkpoints"]?.arrayValue ?? []
        #expect(mine.count == 1)
        #expect(mine.first?.objectValue?["side"] == "replicator" && mine.first?.objectValue?["peer"] == .string(url))
        #expect(mine.first?.objectValue?["local"] == 4, "\(mine)")
        #expect(try await Self.ferry(db, "info").out.contains("checkpoints:\n  with \(url): pushed up to our seq 4, pulled up to its seq "))
        let theirs = Self.object(try await Self.ferry(serverDB, "info", "--json").out)
        #expect(theirs["documents"] == 2 && theirs["deleted"] == 1)
        #expect(theirs["checkpoints"]?.arrayValue?.first?.objectValue?["side"] == "listener", "\(theirs)")
        await server.stop()
    }

    @Test func exportThenImportReproducesTheDocuments() async throws {
        let dir = TempDir()
        let a = dir.path("a.db"), b = dir.path("b.db")
        let file = dir.path("pic.bin")
        let bytes = (0..<3000).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        #expect(try await Self.ferry(a, "put", "p1", #"{"type":"photo","n":1,"tags":["x","y"]}"#, "--attach", "pic=\(file):image/png").status == 0)
        #expect(try await Self.ferry(a, "put", "p2", #"{"type":"photo","n":2.5,"s":"é\n"}"#).status == 0)
        #expect(try await Self.ferry(a, "put", "gone", "{}").status == 0)
        #expect(try await Self.ferry(a, "delete", "gone").status == 0)

        let out = dir.path("dump.jsonl")
        let export = try await Self.ferry(a, "export", "--out", out)
        #expect(export.status == 0 && export.err == "ferry: exported 2 documents to \(out)\n", "\(export.err)")
        let text = try String(contentsOfFile: out, encoding: .utf8)
        let lines = Self.objects(text)
        #expect(lines.count == 2 && lines.first?["_id"] == "p1" && lines.last?["_id"] == "p2")
        #expect(lines.first?["_attachments"] == ["pic": ["content_type": "image/png", "data": .string(Data(bytes).base64EncodedString())]])
        #expect(try await Self.ferry(a, "export").out == text, "standard output gets the same lines")

        let imp = try await Self.ferry(b, "import", out)
        #expect(imp.status == 0 && imp.out == "ferry: imported 2 documents: 2 created, 0 updated, 0 unchanged\n", "\(imp.err)")
        func bodies(_ db: String) async throws -> [String: JSONValue] {
            var out: [String: JSONValue] = [:]
            for o in Self.objects(try await Self.ferry(db, "ls", "--json").out) { out[o["id"]?.stringValue ?? ""] = o["body"] }
            return out
        }
        #expect(try await bodies(a) == bodies(b))
        #expect(try await runFerryBytes(["attachment", "get", "p1", "pic", "--db", b]) == bytes)

        // Again: nothing changes. An edited line updates.
        #expect(try await Self.ferry(b, "import", out).out == "ferry: imported 2 documents: 0 created, 0 updated, 2 unchanged\n")
        let edit = dir.path("edit.jsonl")
        try Data((#"{"_id":"p2","_rev":"9-99","n":3}"# + "\n\n" + #"{"_id":"p3"}"# + "\n").utf8).write(to: URL(fileURLWithPath: edit))
        #expect(try await Self.ferry(b, "import", edit).out == "ferry: imported 2 documents: 1 created, 1 updated, 0 unchanged\n")
        #expect(Self.object(try await Self.ferry(b, "get", "p2").out)["n"] == 3)

        // A bad line: its number, exit 1, nothing written.
        let bad = dir.path("bad.jsonl")
        try Data((#"{"_id":"q1"}"# + "\n" + #"{"_id":"q2","# + "\n").utf8).write(to: URL(fileURLWithPath: bad))
        let refused = try await Self.ferry(b, "import", bad)
        #expect(refused.status == 1 && refused.err.hasPrefix("Error: \(bad):2: not a JSON object: invalid JSON"), "\(refused.err)")
        try Data((#"{"_id":"q1"}"# + "\n" + #"{"title":"no id"}"#).utf8).write(to: URL(fileURLWithPath: bad))
        #expect(try await Self.ferry(b, "import", bad).err == "Error: \(bad):2: no \"_id\" string\n")
        #expect(try await Self.ferry(b, "get", "q1").status == 1, "nothing of a refused file is written")
        let absent = try await Self.ferry(b, "import", dir.path("nope.jsonl"))
        #expect(absent.status == 1 && absent.err == "Error: cannot read \(dir.path("nope.jsonl")) (no such file)\n")
    }

    /// Molly and Naomi (a real `ferry serve`) both edit one document apart; Molly's replicator
    /// declines to resolve (an app that leaves conflicts to its user), so the conflict stays
    /// in her file: `ferry conflicts` lists it, `get --revs` shows it, `ferry resolve` keeps her
    /// edit, and the next `ferry sync` gives Naomi the resolution — no conflict on either side.
    @Test(.timeLimit(.minutes(5))) func aConflictBetweenTwoPeersIsResolvedFromTheShellAndReplicates() async throws {
        let dir = TempDir()
        let molly = dir.path("molly.db"), naomiDB = dir.path("naomi.db")
        let naomi = try await ServeProcess(["--db", naomiDB, "--name", "naomi", "--allow-anonymous", "--no-advertise"])
        let url = "\(naomi.wsURL)/naomi"
        #expect(try await Self.ferry(molly, "put", "task", #"{"title":"milk"}"#).status == 0)
        let first = try await runFerry(["sync", url, "--db", molly])
        #expect(first.status == 0 && first.out.contains("1 pushed"), "\(first.out) \(first.err)")
        let root = try await Self.ferry(molly, "get", "task").out
        #expect(try await Self.ferry(naomiDB, "get", "task").out == root)

        // Apart: each edits (Naomi's edit goes into the file her server has open).
        let mine = try await Self.ferry(molly, "put", "task", #"{"title":"milk","by":"molly"}"#).out.trimmingCharacters(in: .whitespacesAndNewlines)
        let hers = try await Self.ferry(naomiDB, "put", "task", #"{"title":"oat milk","by":"naomi"}"#).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(mine.hasPrefix("2-") && hers.hasPrefix("2-") && mine != hers)

        // Molly syncs with a resolver that declines: her push is refused (Naomi would fork),
        // her pull stores Naomi's branch beside hers.
        struct LeftForTheUser: Error {}
        do {
            let db = try Database.open(at: molly)
            var c = ReplicatorConfiguration(database: db, target: url)
            c.conflictResolver = .custom { _ in throw LeftForTheUser() }
            try await Replicator(configuration: c).run()
            db.close()
        }
        let (winner, loser) = mine > hers ? (mine, hers) : (hers, mine)
        let listed = try await Self.ferry(molly, "conflicts")
        #expect(listed.status == 0 && listed.out == "task\t\(winner)\t\(loser)\n", "\(listed.out) \(listed.err)")
        let tree = try await Self.ferry(molly, "get", "task", "--revs")
        #expect(tree.out.contains(" \(hers)\t") && tree.out.contains(" \(mine)\t"), "\(tree.out)")
        #expect(tree.out.contains("\(loser)\t") && tree.out.split(separator: "\n").contains { $0.contains(loser) && $0.contains("conflict") })
        #expect(tree.out.split(separator: "\n").contains { $0.contains(hers) && $0.contains("pinned") }, "Naomi's revision is hers: \(tree.out)")
        #expect(try await Self.ferry(naomiDB, "conflicts").out == "No conflicted documents.\n")

        // Molly keeps her edit as it is; Naomi's leaf is closed. The push sends Naomi the
        // tombstone closing her leaf (an update of her branch), then Molly's edit.
        let resolved = try await Self.ferry(molly, "resolve", "task", "--keep", mine)
        #expect(resolved.status == 0 && resolved.out == "\(mine)\n", "\(resolved.out) \(resolved.err)")
        let rev = resolved.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await Self.ferry(molly, "conflicts", "--json").out.isEmpty)
        let body = Self.object(try await Self.ferry(molly, "get", "task").out)
        #expect(body == ["_id": "task", "_rev": .string(rev), "title": "milk", "by": "molly"])

        let second = try await runFerry(["sync", url, "--db", molly])
        #expect(second.status == 0 && second.out.contains("2 pushed"), "\(second.out) \(second.err)")
        #expect(Self.object(try await Self.ferry(naomiDB, "get", "task").out) == body)
        #expect(try await Self.ferry(naomiDB, "conflicts").out == "No conflicted documents.\n")
        let theirs = Self.object(try await Self.ferry(naomiDB, "revs", "task", "--json").out)
        #expect(theirs["current"] == .string(rev) && theirs["conflicts"] == [])
        #expect(try await Self.ferry(molly, "revs", "task", "--json").out.contains(#""current":"\#(rev)""#))
        await naomi.stop()
    }

    @Test func everyDocumentCommandsHelpHasAnExample() async throws {
        let commands: [[String]] = [["put"], ["get"], ["delete"], ["revs"], ["ls"], ["conflicts"], ["resolve"], ["query"], ["purge"],
                                    ["compact"], ["info"], ["export"], ["import"], ["attachment"], ["attachment", "ls"],
                                    ["attachment", "get"], ["attachment", "rm"]]
        for c in commands {
            let r = try await runFerry(c + ["--help"])
            #expect(r.status == 0 && r.out.contains("Example:\n  ferry "), "\(c): \(r.out)")
            // Each example fits on its line (ArgumentParser wraps help at 80 columns).
            let lines = r.out.components(separatedBy: "\n")
            let examples = lines.drop { $0 != "Example:" }.dropFirst().prefix { !$0.isEmpty }
            #expect(!examples.isEmpty && examples.allSatisfy { $0.hasPrefix("  ferry ") }, "\(c): \(Array(examples))")
        }
    }
}

extension Int32 {
    /// A usage error's exit status: 2 (`ExitStatus.usage`, the shell convention `ferry` documents),
    /// or ArgumentParser's own `EX_USAGE` (64) in a build without that mapping.
    var isUsageError: Bool { self == 2 || self == 64 }
}

/// Runs the built `ferry`; its standard output as bytes.
func runFerryBytes(_ args: [String]) async throws -> [UInt8] {
    let p = Process()
    let out = Pipe()
    p.executableURL = ServeProcess.executable
    p.arguments = args
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = await offPool { out.fileHandleForReading.readDataToEndOfFile() }
    await offPool { p.waitUntilExit() }
    return Array(data)
}
