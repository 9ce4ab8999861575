import Glibc
import Synchronization

/// A one-line progress bar for long CLI work (`ferry sync`, a first pull of a big database):
///
///     pulling ━━━━━━━━━━━━──────────  1,234/5,000  812 docs/s  ETA 5s
///
/// Updates only record numbers; a ticker draws at most ten times a second, so a replication
/// reporting every document does not spend its time writing to the terminal, and the rate and
/// ETA keep moving while the numbers do not. The owner creates one only when the output is a
/// terminal (`ProgressBar.wanted(on:)`): in a pipe there is nothing to redraw and escape codes
/// are noise in a log.
final class ProgressBar: Sendable {
    private struct State {
        var label = ""
        var completed = 0
        var total = 0
        var meter = RateMeter()
        /// The text on the terminal now, nil when the line is clear.
        var drawn: String?
        /// Whether anything was reported yet (before that there is nothing to draw).
        var updated = false
    }

    private let fd: Int32
    private let state = Mutex(State())
    private let ticker = Mutex<Task<Void, Never>?>(nil)

    /// Draws on `fd` (standard error by default: standard output keeps the command's results).
    init(fd: Int32 = STDERR_FILENO) { self.fd = fd }

    /// Whether a bar belongs on `fd`: only on a terminal.
    static func wanted(on fd: Int32 = STDERR_FILENO) -> Bool { isatty(fd) != 0 }

    /// Records progress; drawn at the next tick.
    func update(label: String, completed: Int, total: Int) {
        state.withLock { s in
            s.label = label
            s.completed = completed
            s.total = total
            s.updated = true
            s.meter.record(completed, at: RateMeter.now)
        }
    }

    /// Starts drawing, ten times a second at most.
    func start() {
        let task = Task.detached { [self] in
            while !Task.isCancelled {
                draw()
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        ticker.withLock { $0 = task }
    }

    /// Stops drawing and clears the line, so what follows starts on a clean one.
    func stop() async {
        let task = ticker.withLock { t in defer { t = nil }; return t }
        task?.cancel()
        await task?.value
        state.withLock { s in
            if s.drawn != nil { write("\r\u{1B}[K") }
            s.drawn = nil
        }
    }

    /// Writes `message` on a line of its own above the bar (which is redrawn at the next tick).
    func printAbove(_ message: String) {
        state.withLock { s in
            write("\r\u{1B}[K" + message + "\n")
            s.drawn = nil
        }
    }

    private func draw() {
        let width = (Terminal.size(of: fd)?.columns ?? 80) - 1   // the last column would wrap on some terminals
        state.withLock { s in
            guard s.updated else { return }
            s.meter.record(s.completed, at: RateMeter.now)
            let text = Self.line(label: s.label, completed: s.completed, total: s.total,
                                 rate: s.meter.perSecond, width: width).rendered(color: true)
            guard text != s.drawn else { return }
            write("\r" + text + "\u{1B}[K")
            s.drawn = text
        }
    }

    private func write(_ text: String) { Terminal.write(text, to: fd) }

    // MARK: Formatting (pure)

    /// The bar's line at `width` columns: label, bar, counts, rate and ETA; the ETA, then the
    /// rate, then the bar give way when the terminal is narrow. `rate` is items per second.
    static func line(label: String, completed: Int, total: Int, rate: Double?, width: Int,
                     unit: String = "docs") -> StyledLine {
        let counts = "\(HumanFormat.count(completed))/\(HumanFormat.count(total))"
        let rateText = rate.map { "\(HumanFormat.rate($0)) \(unit)/s" }
        let eta: String? = {
            guard let rate, rate > 0, total > completed else { return nil }
            return "ETA \(HumanFormat.duration(Double(total - completed) / rate))"
        }()
        var tail = [counts] + [rateText, eta].compactMap { $0 }
        func fixedWidth() -> Int { label.count + 1 + tail.reduce(0) { $0 + 2 + $1.count } }
        while tail.count > 1 && width - fixedWidth() < 10 { tail.removeLast() }
        let barWidth = min(40, width - fixedWidth())
        var line = StyledLine(label)
        if barWidth >= 10 {
            line.append(" ")
            line.append(glyphs(fraction: total > 0 ? Double(completed) / Double(total) : nil, width: barWidth))
            line.append("  " + tail.joined(separator: "  "))
        } else {
            line.append(" " + tail.joined(separator: "  "))
        }
        return line.truncated(to: width)
    }

    /// The bar itself, `width` cells: `━` done (green), `─` to do (dim). An unknown fraction
    /// (nothing known to do yet) is all to do.
    static func glyphs(fraction: Double?, width: Int) -> StyledLine {
        guard width > 0 else { return StyledLine() }
        let f = min(1, max(0, fraction ?? 0))
        let done = Int((f * Double(width)).rounded(.down))
        var line = StyledLine(String(repeating: "━", count: done), .green)
        line.append(String(repeating: "─", count: width - done), .dim)
        return line
    }
}
