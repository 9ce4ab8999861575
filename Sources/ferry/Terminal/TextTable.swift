/// A table laid out for a terminal of a given width: columns keep their natural width when
/// they fit; when they do not, flexible columns (a URL, a progress bar) shrink to their minimum
/// first, then the least important columns are left out, so a narrow terminal still shows a
/// replication's state rather than a wrapped mess.
struct TextTable {
    /// One column's header and how it gives way.
    struct Column {
        /// The header text.
        var header: String
        /// Numbers right, text left.
        var alignment: TextAlignment = .left
        /// Columns with the lowest priority are left out first; 0 is never left out.
        var priority: Int = 0
        /// Shrinks to `minWidth` before any column is left out; grows back up to its natural width.
        var flexible = false
        /// The narrowest a flexible column gets.
        var minWidth = 4
    }

    /// A cell: text, or something drawn to whatever width its column gets (a progress bar).
    enum Cell {
        /// Text, truncated with `…` when the column is narrower.
        case text(StyledLine)
        /// Drawn at the column's width; `natural` is the width it would like.
        case drawn(natural: Int, draw: (Int) -> StyledLine)

        var naturalWidth: Int {
            switch self {
            case .text(let line): line.width
            case .drawn(let natural, _): natural
            }
        }

        func line(width: Int) -> StyledLine {
            switch self {
            case .text(let line): line
            case .drawn(_, let draw): draw(width)
            }
        }
    }

    /// The columns, left to right.
    var columns: [Column]
    /// The rows; each has one cell per column.
    var rows: [[Cell]] = []
    /// Spaces between columns.
    var gap = 2

    /// The header line and one line per row, none wider than `width`.
    func lines(width: Int) -> [StyledLine] {
        let widths = layout(width: width)
        let separator = String(repeating: " ", count: gap)
        func join(_ cells: [StyledLine?]) -> StyledLine {
            var line = StyledLine()
            var first = true
            for (i, cell) in cells.enumerated() {
                guard let cell, let w = widths[i] else { continue }
                if !first { line.append(separator) }
                first = false
                line.append(cell.fitted(to: w, alignment: columns[i].alignment))
            }
            return line.trimmingTrailingSpaces().truncated(to: width)
        }
        var out = [join(columns.map { StyledLine($0.header, .bold) })]
        for row in rows {
            out.append(join(columns.indices.map { i -> StyledLine? in
                guard let w = widths[i] else { return nil }
                return i < row.count ? row[i].line(width: w) : StyledLine()
            }))
        }
        return out
    }

    /// Each column's width, or nil for a column left out.
    func layout(width: Int) -> [Int?] {
        let natural = columns.indices.map { i in
            rows.reduce(columns[i].header.count) { max($0, i < $1.count ? $1[i].naturalWidth : 0) }
        }
        let minimum = columns.indices.map { i in
            columns[i].flexible ? min(natural[i], max(columns[i].minWidth, columns[i].header.count)) : natural[i]
        }
        var shown = Set(columns.indices)
        func needed() -> Int {
            shown.reduce(0) { $0 + minimum[$1] } + gap * max(0, shown.count - 1)
        }
        // Leave out the least important column (the rightmost of equals) until the rest fit.
        while needed() > width,
              let drop = shown.filter({ columns[$0].priority > 0 })
                  .min(by: { (columns[$0].priority, -$0) < (columns[$1].priority, -$1) }) {
            shown.remove(drop)
        }
        var widths: [Int?] = columns.indices.map { shown.contains($0) ? minimum[$0] : nil }
        // What is left goes to the flexible columns, left to right, up to their natural width.
        var spare = width - needed()
        for i in columns.indices where shown.contains(i) && columns[i].flexible && spare > 0 {
            let grow = min(spare, natural[i] - minimum[i])
            widths[i] = minimum[i] + grow
            spare -= grow
        }
        return widths
    }
}
