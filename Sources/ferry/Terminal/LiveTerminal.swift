import Dispatch
import FerryNet
import FoundationEssentials
import Glibc
import Synchronization

/// The terminal while a full-screen live view owns it: the alternate screen (the user's
/// scrollback comes back untouched afterwards), no cursor, and keys read one at a time
/// without echo. `restore()` undoes all of it, and every way out — `q`, Ctrl-C, SIGINT,
/// SIGTERM, SIGHUP — goes through it, because a program that leaves a terminal without echo
/// leaves its user typing blind.
final class LiveTerminal: Sendable {
    /// What the view reacts to.
    enum Event: Sendable, Equatable {
        /// The user or a signal asked to quit.
        case quit
        /// The window changed size.
        case resize
    }

    private let input: Int32
    private let output: Int32
    private let saved: termios?
    private let restored = Atomic<Bool>(false)
    private let signalSources: Mutex<[any DispatchSourceSignal]> = Mutex([])

    /// Quit keys and signals, and resizes, as they come.
    let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    /// Takes over the terminal: `output` (standard output) shows the view, `input` (standard
    /// input) gives keys. Without a terminal on `input` there are no keys; signals still work.
    init(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) {
        self.input = input
        self.output = output
        (events, continuation) = AsyncStream<Event>.makeStream()
        var original = termios()
        if isatty(input) != 0 && tcgetattr(input, &original) == 0 {
            saved = original
            var raw = original
            // No line buffering, no echo, and Ctrl-C as a key (ISIG off) so that it quits the
            // same way `q` does; Ctrl-Z would otherwise stop the process with the screen taken.
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG)
            // read() returns after a tenth of a second even without a key, so the reader
            // thread notices `restore()` and ends.
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 0
                cc[Int(VTIME)] = 1
            }
            tcsetattr(input, TCSANOW, &raw)
        } else {
            saved = nil
        }
        Terminal.write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J", to: output)
        watchSignals()
        if saved != nil { readKeys() }
    }

    deinit { restore() }

    /// Shows `lines` from the top left, each cleared to its end, and clears what is below
    /// them; no newline after the last, so the bottom row never scrolls the screen.
    func draw(_ lines: [String]) {
        guard !restored.load(ordering: .acquiring) else { return }
        Terminal.write("\u{1B}[H" + lines.joined(separator: "\u{1B}[K\r\n") + "\u{1B}[K\u{1B}[J", to: output)
    }

    /// Gives the terminal back as it was: main screen, cursor, echo and line editing. Safe to
    /// call more than once and from any thread.
    func restore() {
        guard !restored.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Terminal.write("\u{1B}[?25h\u{1B}[?1049l", to: output)
        if var original = saved { tcsetattr(input, TCSANOW, &original) }
        signalSources.withLock { sources in
            sources.forEach { $0.cancel() }
            sources.removeAll()
        }
        continuation.finish()
    }

    /// SIGINT, SIGTERM and SIGHUP quit through `restore()` instead of killing the process with
    /// the terminal still raw; SIGWINCH redraws.
    private func watchSignals() {
        let continuation = continuation
        // Made inside the lock, so the sources belong to it from the start.
        signalSources.withLock { sources in
            sources = [(SIGINT, Event.quit), (SIGTERM, .quit), (SIGHUP, .quit), (SIGWINCH, .resize)].map { sig, event in
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { continuation.yield(event) }
                source.resume()
                return source
            }
        }
    }

    /// A thread that reads keys: `q`, `Q` and Ctrl-C (ETX) quit. A thread, not a task: read()
    /// blocks, and the cooperative pool's few threads are not for blocking.
    private func readKeys() {
        let (input, continuation) = (input, continuation)
        // Without the thread no key is read; Ctrl-C (SIGINT) still ends the view.
        try? DetachedThread.start(name: "ferry-keys") { [weak self] in
            var byte: UInt8 = 0
            while let self, !self.restored.load(ordering: .acquiring) {
                let n = read(input, &byte, 1)
                if n == 1 && (byte == UInt8(ascii: "q") || byte == UInt8(ascii: "Q") || byte == 3) {
                    continuation.yield(.quit)
                } else if n < 0 && errno != EINTR && errno != EAGAIN {
                    return
                }
            }
        }
    }
}
