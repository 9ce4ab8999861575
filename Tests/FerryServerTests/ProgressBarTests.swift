import Testing
@testable import ferry

/// The progress bar of long CLI work (`ferry sync`) and the text it is made of, as pure
/// functions: lines compared character for character at chosen widths and rates.
@Suite("ferry sync's progress bar, rates and numbers")
struct ProgressBarTests {
    @Test func theProgressBarLineHasBarCountsRateAndETA() {
        let line = ProgressBar.line(label: "pulling", completed: 1234, total: 5000, rate: 812, width: 60)
        #expect(line.plain == "pulling " + String(repeating: "━", count: 4) + String(repeating: "─", count: 15)
                + "  1,234/5,000  812 docs/s  ETA 5s")
        #expect(line.width == 60)
        // The bar stops growing at 40 cells on a wide terminal.
        #expect(ProgressBar.line(label: "pushing", completed: 5, total: 10, rate: nil, width: 200).plain
                == "pushing " + String(repeating: "━", count: 20) + String(repeating: "─", count: 20) + "  5/10")
    }

    @Test func aNarrowTerminalDropsETAThenRateThenTheBar() {
        #expect(ProgressBar.line(label: "pulling", completed: 1234, total: 5000, rate: 812, width: 45).plain
                == "pulling " + String(repeating: "━", count: 2) + String(repeating: "─", count: 10) + "  1,234/5,000  812 docs/s")
        #expect(ProgressBar.line(label: "pulling", completed: 1234, total: 5000, rate: 812, width: 25).plain
                == "pulling 1,234/5,000")
        #expect(ProgressBar.line(label: "pulling", completed: 1234, total: 5000, rate: 812, width: 12).width == 12)
    }

    @Test func theBarGlyphsFillByFraction() {
        #expect(ProgressBar.glyphs(fraction: 0.5, width: 10).plain == "━━━━━─────")
        #expect(ProgressBar.glyphs(fraction: nil, width: 4).plain == "────")
        #expect(ProgressBar.glyphs(fraction: 1.7, width: 4).plain == "━━━━")
        #expect(ProgressBar.glyphs(fraction: 0.5, width: 0).plain == "")
    }

    @Test func theRateMeterFollowsTheLastSecondsAndForgetsARestart() {
        var m = RateMeter(window: 5)
        m.record(0, at: 0)
        m.record(10, at: 0.1)
        #expect(m.perSecond == nil)   // too short a span to say
        m.record(100, at: 1)
        #expect(m.perSecond == 100)
        m.record(100, at: 10)          // stalled: the old samples leave the window
        m.record(100, at: 11)
        #expect(m.perSecond == 0)
        m.record(5, at: 12)            // started over
        #expect(m.perSecond == nil)
    }

    @Test func numbersAreShortAndTheSameEverywhere() {
        #expect(HumanFormat.count(0) == "0" && HumanFormat.count(999) == "999" && HumanFormat.count(1000) == "1,000")
        #expect(HumanFormat.count(-1234567) == "-1,234,567")
        #expect(HumanFormat.bytes(900) == "900 B" && HumanFormat.bytes(4_404_019) == "4.2 MiB")
        #expect(HumanFormat.bytes(50 * 1024 * 1024) == "50 MiB")
        #expect(HumanFormat.duration(4.6) == "5s" && HumanFormat.duration(192) == "3m 12s")
        #expect(HumanFormat.duration(7385) == "2h 03m" && HumanFormat.duration(273_600) == "3d 4h")
        #expect(HumanFormat.rate(812.4) == "812" && HumanFormat.rate(2.46) == "2.5" && HumanFormat.rate(12_345) == "12k")
        #expect(HumanFormat.rate(0) == "0")
    }

    @Test func aStyledLineIsCutWithAnEllipsisAndPaddedByWhatIsVisible() {
        var line = StyledLine("abc", .red)
        line.append("defgh")
        #expect(line.truncated(to: 5).plain == "abcd…")
        #expect(line.truncated(to: 8) == line)
        #expect(StyledLine("7").fitted(to: 4, alignment: .right).plain == "   7")
        #expect(StyledLine("ab  ").trimmingTrailingSpaces().plain == "ab")
    }
}
