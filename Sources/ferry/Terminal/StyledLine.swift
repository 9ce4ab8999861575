/// One line of terminal text made of spans, each with an optional style, measured by what is
/// visible: widths, padding and truncation count characters and never the escape codes, which
/// are only added by `rendered(color:)`, so a coloured line fits the terminal exactly as a
/// plain one does.
///
/// Every character counts as one column. That holds for what the status view and the progress
/// bar write (ASCII names and URLs, box-drawing bar glyphs); a wide character in an error text
/// may make that line one column longer than measured, which the terminal then clips.
struct StyledLine: Equatable, Sendable, ExpressibleByStringLiteral {
    /// A piece of text in one style.
    struct Span: Equatable, Sendable {
        /// The text.
        var text: String
        /// Its style; nil for the terminal's default.
        var style: TextStyle?
    }

    /// The spans, in order.
    private(set) var spans: [Span] = []

    /// An empty line.
    init() {}

    /// A line of one span.
    init(_ text: String, _ style: TextStyle? = nil) {
        if !text.isEmpty { spans = [Span(text: text, style: style)] }
    }

    /// A line of one unstyled span.
    init(stringLiteral value: String) { self.init(value) }

    /// Columns the line takes.
    var width: Int { spans.reduce(0) { $0 + $1.text.count } }

    /// The text without styles.
    var plain: String { spans.map(\.text).joined() }

    /// Appends text in a style.
    mutating func append(_ text: String, _ style: TextStyle? = nil) {
        guard !text.isEmpty else { return }
        spans.append(Span(text: text, style: style))
    }

    /// Appends another line's spans.
    mutating func append(_ line: StyledLine) { spans += line.spans }

    /// The first `columns` columns; a cut line ends in `…` so the reader knows there was more.
    func truncated(to columns: Int) -> StyledLine {
        guard width > columns else { return self }
        guard columns > 0 else { return StyledLine() }
        var out = StyledLine()
        var room = columns - 1
        for span in spans where room > 0 {
            let piece = String(span.text.prefix(room))
            out.append(piece, span.style)
            room -= piece.count
        }
        out.append("…", spans.last?.style)
        return out
    }

    /// Exactly `columns` wide: truncated, or padded with spaces on the side away from `alignment`.
    func fitted(to columns: Int, alignment: TextAlignment) -> StyledLine {
        let cut = truncated(to: columns)
        let pad = String(repeating: " ", count: max(0, columns - cut.width))
        var out = StyledLine()
        switch alignment {
        case .left: out.append(cut); out.append(pad)
        case .right: out.append(pad); out.append(cut)
        }
        return out
    }

    /// The line without trailing spaces (a table's last column is padded; the terminal needs no such padding).
    func trimmingTrailingSpaces() -> StyledLine {
        var out = self
        while let last = out.spans.last {
            let trimmed = String(last.text.reversed().drop(while: { $0 == " " }).reversed())
            if trimmed.isEmpty {
                out.spans.removeLast()
            } else {
                out.spans[out.spans.count - 1].text = trimmed
                break
            }
        }
        return out
    }

    /// The line as bytes for the terminal: with SGR escape codes when `color`, plain otherwise.
    func rendered(color: Bool) -> String {
        guard color else { return plain }
        return spans.map { span in
            guard let style = span.style else { return span.text }
            return "\u{1B}[\(style.sgr)m\(span.text)\u{1B}[0m"
        }.joined()
    }
}

/// Which side of its column a cell's text keeps to.
enum TextAlignment: Sendable {
    /// Text first, padding after: names.
    case left
    /// Padding first: numbers, so their digits line up.
    case right
}

/// The few looks the status view uses, as ECMA-48 SGR parameters.
enum TextStyle: Sendable, Equatable {
    case bold, dim, red, green, yellow, blue, cyan

    /// The SGR parameter.
    var sgr: String {
        switch self {
        case .bold: "1"
        case .dim: "2"
        case .red: "31"
        case .green: "32"
        case .yellow: "33"
        case .blue: "34"
        case .cyan: "36"
        }
    }
}
