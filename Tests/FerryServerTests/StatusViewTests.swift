import FerryServer
import FerryStore
import Foundation
import Testing
@testable import ferry

/// `ferry status`'s screen as a pure function: fixture JSON in
/// the shape of `GET /_scheduler/jobs` and `GET /{db}`, lines out, compared character for character.
@Suite("ferry status: the renderer")
struct StatusViewTests {
    static let jobsJSON = #"""
    {"total_rows":2,"offset":0,"jobs":[
     {"id":"notes-to-b","doc_id":"notes-to-b","database":"notes","source":"notes","target":"ws://b.example:4984/notes",
      "direction":"both","continuous":true,"state":"running","start_time":"2026-11-27T10:00:00Z","last_updated":"2026-11-27T10:00:05Z",
      "info":{"docs_read":10,"docs_written":12,"doc_write_failures":1,"changes_pending":5,"progress":{"completed":5,"total":10},
              "error":null,"error_time":null,
              "failures":[{"doc_id":"bad-doc","reason":"validation: no title","time":"2026-11-27T10:00:04Z"}]},
      "history":[{"timestamp":"2026-11-27T10:00:00Z","type":"added"},{"timestamp":"2026-11-27T10:00:01Z","type":"started"}],
      "schedule":null},
     {"id":"tasks-from-c","database":"tasks","source":"wss://c.example:4984/tasks","target":"tasks",
      "direction":"pull","continuous":false,"state":"crashing","start_time":"2026-11-27T09:00:00Z",
      "info":{"docs_read":0,"docs_written":0,"doc_write_failures":0,"error":"connection refused","error_time":"2026-11-27T10:00:06Z"},
      "history":[{"timestamp":"2026-11-27T09:59:00Z","type":"crashed","reason":"host unreachable"}]}
    ]}
    """#

    static func json(_ text: String) -> JSONValue {
        (try? JSONParser.parse(Array(text.utf8))) ?? .null
    }

    static func snapshot(docsWritten: Int64 = 12, completed: Int64 = 5, at time: Double = 100) -> StatusSnapshot {
        let text = jobsJSON.replacingOccurrences(of: #""docs_written":12"#, with: #""docs_written":\#(docsWritten)"#)
            .replacingOccurrences(of: #""completed":5"#, with: #""completed":\#(completed)"#)
        let notes = json(#"{"db_name":"notes","doc_count":1234,"doc_del_count":12,"update_seq":"1250","sizes":{"file":4404019}}"#)
        let tasks = json(#"{"db_name":"tasks","doc_count":3,"doc_del_count":0,"update_seq":"3","sizes":{"file":900}}"#)
        return StatusSnapshot(server: .init(location: "http://127.0.0.1:4984", version: "0.1.0", uptime: 7385),
                              databases: [.init(notes, name: "notes"), .init(tasks, name: "tasks")],
                              jobs: SchedulerJob.list(from: json(text)), takenAt: time)
    }

    static let utc = TimeZone(identifier: "UTC") ?? .current

    @Test func theJobsAreReadFromTheSchedulerShape() throws {
        let jobs = Self.snapshot().jobs
        #expect(jobs.map(\.id) == ["notes-to-b", "tasks-from-c"])
        #expect(jobs[0].peer == "ws://b.example:4984/notes")
        #expect(jobs[1].peer == "wss://c.example:4984/tasks")
        #expect(jobs[0].info.progress?.completed == 5 && jobs[0].info.progress?.total == 10)
        #expect(jobs[0].info.failures == [.init(documentID: "bad-doc", reason: "validation: no title", time: "2026-11-27T10:00:04Z")])
        #expect(jobs[1].info.error == "connection refused")
        #expect(jobs[1].info.progress == nil)
        // Rubbish is read as defaults, never a crash; only a job that is not an object is left out.
        let odd = try SchedulerJob(json: Self.json(#"{"info":7,"history":[1,{"type":3}],"state":false}"#))
        #expect(odd.id == "?" && odd.state == "unknown" && odd.history.isEmpty && odd.info.docsRead == 0)
        #expect(throws: SchedulerJob.Invalid.self) { try SchedulerJob(json: 7) }
        #expect(SchedulerJob.list(from: Self.json(#"[7,{"id":"x"}]"#)).map(\.id) == ["x"])
    }

    /// The daemon writes a job with `SchedulerJob.json` and `ferry` reads it with
    /// `init(json:)`: what one writes, the other reads back unchanged.
    @Test func aJobTheDaemonWritesReadsBackAsItself() throws {
        var spec = ReplicationSpec(id: "notes-b", database: "notes", peer: "ws://b.example:4984/notes", direction: .pull)
        spec.schedule = .init(every: 900, backgroundEvery: 3600, budget: 30)
        var journal = ReplicationJournal()
        journal.record("added")
        journal.record("crashed", state: .crashing, reason: "connection refused")
        journal.lastRun = 1_700_000_000
        let job = ReplicationStore.Entry(revision: "1-a", spec: spec, journal: journal).job
        let wire = try JSONParser.parse(CanonicalJSON.encode(job.json))
        let read = try SchedulerJob(json: wire)
        #expect(read == job)
        #expect(read.peer == "ws://b.example:4984/notes" && read.source == read.peer && read.target == "notes")
        #expect(read.history.map(\.type) == ["crashed", "added"] && read.schedule?.backgroundEvery == 3600)
        #expect(read.json == job.json)
    }

    @Test func aWideScreenShowsEveryColumnWithRatesFromThePreviousSnapshot() {
        let before = Self.snapshot(docsWritten: 12, completed: 5, at: 100)
        let now = Self.snapshot(docsWritten: 52, completed: 7, at: 102)
        let view = StatusView(width: 160, height: nil, color: false, timeZone: Self.utc, hint: "q quits")
        let lines = view.render(now, previous: before)
        #expect(lines[0].hasPrefix("ferry status  http://127.0.0.1:4984  ferry 0.1.0  up 2h 03m"))
        #expect(lines[0].hasSuffix("q quits") && lines[0].count == 160)
        #expect(lines.contains("DATABASES (2)"))
        #expect(lines.contains { $0.hasPrefix("notes") && $0.contains("1,234") && $0.contains("1250") && $0.contains("4.2 MiB") })
        #expect(lines.contains { $0.hasPrefix("tasks") && $0.contains("900 B") })
        let header = lines.first { $0.hasPrefix("ID") } ?? ""
        for column in ["DB", "PEER", "DIR", "STATE", "PROGRESS", "DONE", "RATE", "ETA", "READ", "WRITTEN", "FAIL"] {
            #expect(header.contains(column), "no \(column) in \(header)")
        }
        let notes = lines.first { $0.hasPrefix("notes-to-b") } ?? ""
        // (52 - 12) / 2 s = 20 docs/s; progress 1 a second with 3 to go: ETA 3 s.
        #expect(notes.contains("ws://b.example:4984/notes") && notes.contains("both") && notes.contains("running"))
        #expect(notes.contains("7/10") && notes.contains("20/s") && notes.contains("3s"))
        #expect(notes.contains("━") && notes.contains("─"))
        let tasks = lines.first { $0.hasPrefix("tasks-from-c") } ?? ""
        #expect(tasks.contains("crashing") && tasks.contains("pull") && tasks.contains("–"))
        #expect(lines.allSatisfy { $0.count <= 160 && !$0.contains("\u{1B}") })
    }

    @Test func recentErrorsAreNewestFirstWithTheirJob() {
        let lines = StatusView(width: 120, height: nil, color: false, timeZone: Self.utc).render(Self.snapshot(), previous: nil)
        guard let title = lines.firstIndex(of: "RECENT ERRORS") else { Issue.record("no errors section"); return }
        #expect(Array(lines[(title + 1)...]) == [
            "  10:00:06  tasks-from-c  connection refused",
            "  10:00:04  notes-to-b  bad-doc: validation: no title",
            "  09:59:00  tasks-from-c  host unreachable",
        ])
    }

    @Test func withoutAPreviousSnapshotThereIsNoRate() {
        let lines = StatusView(width: 160, height: nil, color: false, timeZone: Self.utc).render(Self.snapshot(), previous: nil)
        let notes = lines.first { $0.hasPrefix("notes-to-b") } ?? ""
        #expect(notes.contains("5/10") && !notes.contains("/s"))
    }

    @Test(arguments: [30, 50, 80, 100, 132, 200])
    func everyLineFitsTheWidthAndTheStateStaysVisible(width: Int) {
        let view = StatusView(width: width, height: nil, color: false, timeZone: Self.utc, hint: "q quits")
        let lines = view.render(Self.snapshot(docsWritten: 52, completed: 7, at: 102), previous: Self.snapshot())
        #expect(lines.allSatisfy { $0.count <= width }, "\(lines.filter { $0.count > width })")
        if width >= 50 {
            #expect(lines.contains { $0.contains("notes-to-b") && $0.contains("running") }, "\n\(lines.joined(separator: "\n"))")
        }
    }

    @Test func colourIsOnlyInEscapeCodesThatDoNotCountTowardsTheWidth() {
        let view = StatusView(width: 100, height: nil, color: true, timeZone: Self.utc)
        let coloured = view.render(Self.snapshot(), previous: nil)
        let plain = StatusView(width: 100, height: nil, color: false, timeZone: Self.utc).render(Self.snapshot(), previous: nil)
        #expect(coloured.contains { $0.contains("\u{1B}[32mrunning\u{1B}[0m") })
        #expect(coloured.contains { $0.contains("\u{1B}[31mcrashing\u{1B}[0m") })
        let stripped = coloured.map { $0.replacingOccurrences(of: #"\x1B\[[0-9;]*m"#, with: "", options: .regularExpression) }
        #expect(stripped == plain)
    }

    @Test func aShortScreenLeavesOutDatabaseRowsFirstAndSaysHowMany() {
        var many = Self.snapshot()
        let db = Self.json(#"{"db_name":"x","doc_count":1,"doc_del_count":0,"update_seq":"1"}"#)
        many.databases = (0..<30).map { StatusSnapshot.Database(db, name: "db\($0)") }
        let lines = StatusView(width: 120, height: 20, color: false, timeZone: Self.utc).render(many, previous: nil)
        #expect(lines.count == 20)
        #expect(lines.contains { $0.hasPrefix("notes-to-b") } && lines.contains { $0.hasPrefix("tasks-from-c") })
        #expect(lines.contains("  … 25 more"))
        #expect(lines.contains("  10:00:06  tasks-from-c  connection refused"))
    }

    @Test func nothingConfiguredSaysNone() {
        let empty = StatusSnapshot(server: .init(location: "http://h:1"), databases: [], jobs: [], takenAt: 0)
        let lines = StatusView(width: 80, height: nil, color: false).render(empty, previous: nil, notice: "cannot reach the daemon")
        #expect(lines == ["ferry status  http://h:1", "cannot reach the daemon", "", "DATABASES (0)", "  none", "",
                          "REPLICATIONS (0)", "  none", "", "RECENT ERRORS", "  none"])
    }

    @Test func theJSONSnapshotHasTheDaemonsOwnObjects() throws {
        let s = Self.snapshot()
        let o = try #require(s.json.objectValue)
        #expect(o["databases"]?.arrayValue?.first?.objectValue?["db_name"] == "notes")
        #expect(o["replications"]?.arrayValue?.count == 2)
        #expect(o["replications"]?.arrayValue?.first?.objectValue?["info"]?.objectValue?["docs_written"] == 12)
    }

    @Test func aTableLeavesOutItsLeastImportantColumnsFirst() {
        var t = TextTable(columns: [.init(header: "NAME"), .init(header: "A", priority: 1), .init(header: "B", priority: 2)])
        t.rows = [[.text("alpha"), .text("aaaa"), .text("bbbb")]]
        #expect(t.lines(width: 80).map(\.plain) == ["NAME   A     B", "alpha  aaaa  bbbb"])
        #expect(t.lines(width: 12).map(\.plain) == ["NAME   B", "alpha  bbbb"])
        #expect(t.lines(width: 5).map(\.plain) == ["NAME", "alpha"])
    }
}
