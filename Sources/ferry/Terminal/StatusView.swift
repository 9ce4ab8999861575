import FerryServer
import FoundationEssentials

/// `ferry status`'s screen as a pure function: a snapshot (and the one before it, for rates)
/// in, lines of at most `width` columns out. No terminal I/O here, so tests can read exactly
/// what a user would see at any width.
struct StatusView {
    /// Columns available.
    var width: Int
    /// Rows available; nil for as many as needed (a one-off snapshot in a pipe).
    var height: Int?
    /// Whether to add colour escape codes.
    var color: Bool
    /// The zone error times are shown in (the user's; tests fix one).
    var timeZone: TimeZone = .current
    /// Shown at the right of the header (`q quits` in the live view).
    var hint: String?
    /// The most errors listed.
    var maxErrors = 5

    /// The screen's lines. `notice` is shown under the header (a failed refresh, say).
    func render(_ snapshot: StatusSnapshot, previous: StatusSnapshot?, notice: String? = nil) -> [String] {
        var top = [header(snapshot.server)]
        if let notice { top.append(StyledLine(notice, .red)) }
        let sections = [
            // A short screen gives up database rows first (they change least), then errors;
            // the replications, what the view is for, last.
            Section(title: "DATABASES (\(snapshot.databases.count))", lines: databaseLines(snapshot.databases), trimOrder: 0),
            Section(title: "REPLICATIONS (\(snapshot.jobs.count))", lines: replicationLines(snapshot, previous: previous), trimOrder: 2),
            Section(title: "RECENT ERRORS", lines: errorLines(snapshot.jobs), trimOrder: 1),
        ]
        return fit(top: top, sections: sections).map { $0.truncated(to: width).rendered(color: color) }
    }

    // MARK: Header

    private func header(_ server: StatusSnapshot.Server) -> StyledLine {
        var left = StyledLine("ferry status", .bold)
        left.append("  \(server.location)")
        if let v = server.version { left.append("  ferry \(v)") }
        if let up = server.uptime { left.append("  up \(HumanFormat.duration(up))") }
        guard let hint else { return left }
        let room = width - left.width - hint.count
        guard room >= 2 else { return left }
        left.append(String(repeating: " ", count: room))
        left.append(hint, .dim)
        return left
    }

    // MARK: Databases

    private func databaseLines(_ databases: [StatusSnapshot.Database]) -> Section.Lines {
        guard !databases.isEmpty else { return .init(head: [], rows: [StyledLine("  none", .dim)]) }
        var table = TextTable(columns: [
            .init(header: "NAME", flexible: true, minWidth: 8),
            .init(header: "DOCS", alignment: .right),
            .init(header: "DELETED", alignment: .right, priority: 2),
            .init(header: "SEQ", alignment: .right, priority: 1),
            .init(header: "SIZE", alignment: .right, priority: 3),
        ])
        table.rows = databases.map { d in
            [.text(StyledLine(d.name)), .text(StyledLine(HumanFormat.count(d.documents))),
             .text(StyledLine(HumanFormat.count(d.deleted))), .text(StyledLine(d.updateSeq)),
             .text(StyledLine(d.fileBytes.map(HumanFormat.bytes) ?? "–"))]
        }
        let lines = table.lines(width: width)
        return .init(head: Array(lines.prefix(1)), rows: Array(lines.dropFirst()))
    }

    // MARK: Replications

    private func replicationLines(_ snapshot: StatusSnapshot, previous: StatusSnapshot?) -> Section.Lines {
        guard !snapshot.jobs.isEmpty else { return .init(head: [], rows: [StyledLine("  none", .dim)]) }
        var table = TextTable(columns: [
            // Which job and its state stay at any width; then rate, counts and bar; the rest
            // as room allows.
            .init(header: "ID", flexible: true, minWidth: 16),
            .init(header: "DB", priority: 4, flexible: true, minWidth: 6),
            .init(header: "PEER", priority: 5, flexible: true, minWidth: 12),
            .init(header: "DIR", priority: 3),
            .init(header: "STATE"),
            .init(header: "PROGRESS", priority: 7, flexible: true, minWidth: 8),
            .init(header: "DONE", alignment: .right, priority: 8),
            .init(header: "RATE", alignment: .right, priority: 9),
            .init(header: "ETA", alignment: .right, priority: 1),
            .init(header: "READ", alignment: .right, priority: 2),
            .init(header: "WRITTEN", alignment: .right, priority: 2),
            .init(header: "FAIL", alignment: .right, priority: 6),
        ])
        table.rows = snapshot.jobs.map { job in
            let rates = Self.rates(job, in: snapshot, previous: previous)
            let fraction = Self.fraction(job)
            let done = job.info.progress.map { "\(HumanFormat.count($0.completed))/\(HumanFormat.count($0.total))" } ?? "–"
            // The counter covers the whole run; the list only the latest few, but a daemon
            // that keeps no counter still has its list.
            let failures = max(job.info.docWriteFailures, Int64((job.info.failures ?? []).count))
            return [
                .text(StyledLine(job.id)), .text(StyledLine(job.database)), .text(StyledLine(job.peer)),
                .text(StyledLine(job.direction)), .text(StyledLine(job.state, Self.style(ofState: job.state))),
                .drawn(natural: 24) { ProgressBar.glyphs(fraction: fraction, width: $0) },
                .text(StyledLine(done)),
                .text(StyledLine(rates.docs.map { "\(HumanFormat.rate($0))/s" } ?? "–")),
                .text(StyledLine(rates.eta.map(HumanFormat.duration) ?? "–")),
                .text(StyledLine(HumanFormat.count(job.info.docsRead))), .text(StyledLine(HumanFormat.count(job.info.docsWritten))),
                .text(failures > 0 ? StyledLine(HumanFormat.count(failures), .red) : StyledLine("0")),
            ]
        }
        let lines = table.lines(width: width)
        return .init(head: Array(lines.prefix(1)), rows: Array(lines.dropFirst()))
    }

    /// How far along a job is, 0…1; nil when it does not know how much there is to do.
    static func fraction(_ job: SchedulerJob) -> Double? {
        if job.state == "completed" { return 1 }
        guard let p = job.info.progress, p.total > 0 else { return nil }
        return min(1, max(0, Double(p.completed) / Double(p.total)))
    }

    /// Documents per second since the previous snapshot, and the time left at the rate
    /// progress is being made. The documents counted are the larger of read and written:
    /// in CouchDB's terms both count the same documents once each, and the larger one is the
    /// side that is ahead. Nil without a previous sight of the job, or when its counters went
    /// back (it restarted and began counting again).
    static func rates(_ job: SchedulerJob, in snapshot: StatusSnapshot, previous: StatusSnapshot?) -> (docs: Double?, eta: Double?) {
        guard let previous, let before = previous.jobs.first(where: { $0.id == job.id }) else { return (nil, nil) }
        let seconds = snapshot.takenAt - previous.takenAt
        guard seconds > 0 else { return (nil, nil) }
        let read = job.info.docsRead - before.info.docsRead
        let written = job.info.docsWritten - before.info.docsWritten
        let docs: Double? = read >= 0 && written >= 0 ? Double(max(read, written)) / seconds : nil
        guard let now = job.info.progress, let then = before.info.progress, now.total > now.completed,
              now.completed > then.completed else { return (docs, nil) }
        let perSecond = Double(now.completed - then.completed) / seconds
        return (docs, Double(now.total - now.completed) / perSecond)
    }

    /// Running is good, waiting is yellow, trouble is red.
    static func style(ofState state: String) -> TextStyle? {
        switch state {
        case "running": .green
        case "completed": .cyan
        case "initializing", "pending": .yellow
        case "crashing", "failed": .red
        case "paused": .dim
        default: nil
        }
    }

    // MARK: Errors

    /// One error for the list: when, which job, what.
    struct ErrorEntry: Equatable {
        /// When, as the daemon wrote it (ISO 8601), if it did.
        var time: String?
        /// The job.
        var job: String
        /// What went wrong.
        var text: String
    }

    /// Every job's current error, failed documents and crashes, newest first, without repeats.
    static func recentErrors(_ jobs: [SchedulerJob]) -> [ErrorEntry] {
        var entries: [ErrorEntry] = []
        for job in jobs {
            if let e = job.info.error { entries.append(ErrorEntry(time: job.info.errorTime, job: job.id, text: e)) }
            for f in job.info.failures ?? [] { entries.append(ErrorEntry(time: f.time, job: job.id, text: "\(f.documentID): \(f.reason)")) }
            for event in job.history where event.type == "crashed" {
                entries.append(ErrorEntry(time: event.timestamp, job: job.id, text: event.reason ?? "crashed"))
            }
        }
        var seen = Set<String>()
        entries = entries.filter { seen.insert("\($0.job)\u{0}\($0.text)\u{0}\($0.time ?? "")").inserted }
        // Newest first; an entry without a time goes last; equals keep the jobs' order.
        return entries.enumerated().sorted { a, b in
            let (ta, tb) = (Self.date(a.element.time), Self.date(b.element.time))
            if ta != tb { return (ta ?? .distantPast) > (tb ?? .distantPast) }
            return a.offset < b.offset
        }.map(\.element)
    }

    private func errorLines(_ jobs: [SchedulerJob]) -> Section.Lines {
        let entries = Self.recentErrors(jobs).prefix(maxErrors)
        guard !entries.isEmpty else { return .init(head: [], rows: [StyledLine("  none", .dim)]) }
        return .init(head: [], rows: entries.map { e in
            var line = StyledLine("  ")
            line.append(clock(e.time), .dim)
            line.append("  \(e.job)  ", .bold)
            line.append(e.text.replacing("\n", with: " "), .red)
            return line
        })
    }

    /// `HH:mm:ss` in `timeZone`, or the text as given when it is not ISO 8601.
    private func clock(_ iso: String?) -> String {
        guard let iso else { return "--:--:--" }
        guard let date = Self.date(iso) else { return iso }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute, .second], from: date)
        func two(_ n: Int?) -> String { let n = n ?? 0; return n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(c.hour)):\(two(c.minute)):\(two(c.second))"
    }

    /// An ISO 8601 time, with or without fractional seconds.
    static func date(_ iso: String?) -> Date? {
        guard let iso else { return nil }
        if let d = try? Date.ISO8601FormatStyle().parse(iso) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(iso)
    }

    // MARK: Fitting the height

    /// A titled part of the screen.
    private struct Section {
        /// A table's header line(s) and its rows.
        struct Lines {
            var head: [StyledLine]
            var rows: [StyledLine]
        }

        var title: String
        var lines: Lines
        /// Sections with lower numbers lose rows first when the screen is too short.
        var trimOrder: Int
    }

    /// The lines, with rows left out of the least important sections (and a `… N more` line in
    /// their place) until they fit the height.
    private func fit(top: [StyledLine], sections: [Section]) -> [StyledLine] {
        var shown = sections.map(\.lines.rows.count)
        func total() -> Int {
            top.count + sections.indices.reduce(0) { sum, i in
                let more = shown[i] < sections[i].lines.rows.count ? 1 : 0
                return sum + 2 + sections[i].lines.head.count + shown[i] + more   // blank, title, head, rows, more
            }
        }
        if let height {
            for i in sections.indices.sorted(by: { sections[$0].trimOrder < sections[$1].trimOrder }) {
                while total() > height && shown[i] > 0 { shown[i] -= 1 }
            }
        }
        var out = top
        for (i, s) in sections.enumerated() {
            out.append(StyledLine())
            out.append(StyledLine(s.title, .bold))
            out += s.lines.head
            out += s.lines.rows.prefix(shown[i])
            let hidden = s.lines.rows.count - shown[i]
            if hidden > 0 { out.append(StyledLine("  … \(hidden) more", .dim)) }
        }
        if let height, out.count > height { out = Array(out.prefix(height)) }
        return out
    }
}
