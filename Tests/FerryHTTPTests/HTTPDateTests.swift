import FerryHTTP
import Testing

/// `HTTPDate`: RFC 9110's IMF-fixdate, the form every response's `Date` field takes.
@Suite("HTTP Date field")
struct HTTPDateTests {
    @Test func formatsTheRFCExample() {
        // RFC 9110 §5.6.7's example: 784111777 seconds after 1970.
        #expect(HTTPDate.format(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(secondsSince1970: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(secondsSince1970: 1_795_910_399) == "Sat, 28 Nov 2026 23:59:59 GMT")
    }

    @Test func nowHasTheFixedShape() {
        let now = HTTPDate.now()
        #expect(now.count == 29 && now.hasSuffix(" GMT"), "\(now)")
    }
}
