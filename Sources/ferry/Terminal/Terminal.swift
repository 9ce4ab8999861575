import FerryStore
import Glibc

/// What the live views need of a terminal beyond escape codes: its size and unbuffered writes.
enum Terminal {
    /// A terminal's size in character cells.
    struct Size: Equatable, Sendable {
        /// Columns.
        var columns: Int
        /// Rows.
        var rows: Int
    }

    /// The size of the terminal on `fd` as the kernel reports it (TIOCGWINSZ), read again before
    /// every redraw so a resized window gets lines of its new width; nil when `fd` is not a
    /// terminal or reports no size (a pseudo-terminal nobody sized says 0×0).
    static func size(of fd: Int32) -> Size? {
        var ws = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 else { return nil }
        return Size(columns: Int(ws.ws_col), rows: Int(ws.ws_row))
    }

    /// Writes all of `text` to `fd` with write(2), through short writes and interruptions: a
    /// frame goes out whole, never interleaved with a buffered stream's flush. Gives up quietly
    /// on an error (a closed terminal has no one to tell).
    static func write(_ text: String, to fd: Int32) {
        _ = Array(text.utf8).withUnsafeBytes { FileSystem.write($0, to: fd) }
    }
}
