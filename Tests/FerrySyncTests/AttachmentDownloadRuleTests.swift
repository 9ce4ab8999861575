import FerryStore
@testable import FerrySync
import Foundation
import Testing

@Suite("Attachment download rules")
struct AttachmentDownloadRuleTests {
    static let digest = BlobDigest(of: Array("x".utf8))

    static func info(_ name: String = "a.txt", type: String? = "text/plain", length: Int64 = 10, doc: String = "doc") -> AttachmentInfo {
        AttachmentInfo(documentID: doc, name: name, digest: digest, length: length, contentType: type)
    }

    @Test func contentTypeIsAGlobWithoutCaseOrParameters() {
        let rule = AttachmentDownloadRule(contentType: "text/*")
        #expect(rule.matches(Self.info(type: "text/plain")))
        #expect(rule.matches(Self.info(type: "Text/Markdown; charset=UTF-8")))
        #expect(rule.matches(Self.info(type: " text/csv ;q=1")))
        #expect(!rule.matches(Self.info(type: "image/png")))
        #expect(!rule.matches(Self.info(type: "application/text")))
        #expect(!rule.matches(Self.info(type: nil)), "no content type matches no contentType pattern")
        #expect(AttachmentDownloadRule(contentType: "IMAGE/PNG").matches(Self.info(type: "image/png")))
        #expect(AttachmentDownloadRule(contentType: "*").matches(Self.info(type: "x/y")))
    }

    @Test func nameAndDocIDGlobsAndInclusiveLengths() {
        #expect(AttachmentDownloadRule(name: "*.jpg").matches(Self.info("cat.jpg")))
        #expect(!AttachmentDownloadRule(name: "*.jpg").matches(Self.info("cat.JPG")), "names keep their case")
        #expect(AttachmentDownloadRule(name: "thumb-*-small.*").matches(Self.info("thumb-17-small.png")))
        #expect(!AttachmentDownloadRule(name: "thumb-*-small.*").matches(Self.info("thumb-17-large.png")))
        #expect(AttachmentDownloadRule(docID: "photo-*").matches(Self.info(doc: "photo-1")))
        #expect(!AttachmentDownloadRule(docID: "photo-*").matches(Self.info(doc: "note-1")))
        #expect(AttachmentDownloadRule(minLength: 10).matches(Self.info(length: 10)))
        #expect(!AttachmentDownloadRule(minLength: 11).matches(Self.info(length: 10)))
        #expect(AttachmentDownloadRule(maxLength: 10).matches(Self.info(length: 10)))
        #expect(!AttachmentDownloadRule(maxLength: 9).matches(Self.info(length: 10)))
        #expect(AttachmentDownloadRule().matches(Self.info()), "no matchers match everything")
        let both = AttachmentDownloadRule(contentType: "text/*", minLength: 5)
        #expect(both.matches(Self.info(length: 5)) && !both.matches(Self.info(length: 4)) && !both.matches(Self.info(type: "image/png")))
    }

    @Test func globPatterns() {
        let cases: [(String, String, Bool)] = [
            ("", "", true), ("", "a", false), ("abc", "abc", true), ("abc", "abcd", false),
            ("*", "", true), ("*", "anything", true), ("**", "x", true), ("a*", "a", true), ("a*", "ba", false),
            ("*a", "ba", true), ("*a", "ab", false), ("a*a", "a", false), ("a*a", "aa", true), ("a*b*c", "aXbYbc", true),
            ("a*b*c", "acb", false), ("*.tar.*", "x.tar.gz", true), ("ü*", "über", true), ("*ß", "groß", true), ("a?c", "abc", false),
        ]
        for (pattern, text, expected) in cases {
            #expect(GlobPattern(pattern).matches(text) == expected, "\(pattern.debugDescription) ~ \(text.debugDescription)")
        }
    }

    @Test func theFirstMatchingRuleDecidesAndNoMatchFetchesAtZero() {
        let policy = AttachmentDownloadPolicy.rules([
            AttachmentDownloadRule(contentType: "text/*", priority: 10),
            AttachmentDownloadRule(minLength: 1_048_577, skip: true),
            AttachmentDownloadRule(contentType: "image/*", priority: -1),
        ])
        #expect(policy.decision(for: Self.info(type: "text/plain", length: 5 << 20)) == .fetch(priority: 10))
        #expect(policy.decision(for: Self.info(type: "image/png", length: 5 << 20)) == .skip)
        #expect(policy.decision(for: Self.info(type: "image/png", length: 1_048_576)) == .fetch(priority: -1))
        #expect(policy.decision(for: Self.info(type: "application/zip")) == .fetch(priority: 0))
        #expect(AttachmentDownloadPolicy.rules([]).decision(for: Self.info()) == .fetch(priority: 0))
    }

    @Test func aPolicyCanDecidePerDocument() {
        let policy = AttachmentDownloadPolicy { $0.properties["type"] == "photo" ? .skip : .fetch(priority: 1) }
        let photo = AttachmentInfo(documentID: "p", revisionID: "1-aa", properties: ["type": "photo"], name: "a", digest: Self.digest,
                                   length: 1, contentType: nil)
        #expect(policy.decision(for: photo) == .skip)
        #expect(policy.decision(for: Self.info()) == .fetch(priority: 1))
    }

    // MARK: JSON

    static func decode(_ json: String) throws -> [AttachmentDownloadRule] {
        try JSONDecoder().decode([AttachmentDownloadRule].self, from: Data(json.utf8))
    }

    @Test func jsonFormDecodesEncodesAndRoundTrips() throws {
        let rules = try Self.decode("""
            [{"contentType":"text/*","priority":10},{"minLength":1048577,"skip":true},
             {"name":"*.jpg","docID":"photo-*","maxLength":"64KiB"},{}]
            """)
        #expect(rules == [
            AttachmentDownloadRule(contentType: "text/*", priority: 10),
            AttachmentDownloadRule(minLength: 1_048_577, skip: true),
            AttachmentDownloadRule(name: "*.jpg", docID: "photo-*", maxLength: 65_536),
            AttachmentDownloadRule(),
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(rules), as: UTF8.self)
        #expect(text == #"[{"contentType":"text\/*","priority":10},{"minLength":1048577,"skip":true},{"docID":"photo-*","maxLength":65536,"name":"*.jpg","priority":0},{"priority":0}]"#)
        #expect(try Self.decode(text) == rules)
    }

    @Test(arguments: [
        (#"[{"contentype":"text/*"}]"#, "unknown key \"contentype\""),
        (#"[{"skip":true,"priority":3}]"#, "either skips or has a priority"),
        (#"[{"minLength":-1}]"#, "minLength must not be negative"),
        (#"[{"minLength":10,"maxLength":5}]"#, "greater than maxLength"),
        (#"[{"name":""}]"#, "name must not be empty"),
        (#"[{"maxLength":"1MB"}]"#, "optional unit B, KiB, MiB, GiB, K, M or G"),
        (#"[{"maxLength":true}]"#, "number of bytes or a size"),
    ])
    func jsonFormRefusesBadRules(json: String, message: String) {
        do {
            _ = try Self.decode(json)
            Issue.record("\(json) decoded")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test func jsonPriorityMustBeAnInteger() {
        #expect(throws: DecodingError.self) { try Self.decode(#"[{"priority":"high"}]"#) }
        #expect(throws: DecodingError.self) { try Self.decode(#"[{"skip":"yes"}]"#) }
    }

    // MARK: Command line

    @Test func commandLineForm() throws {
        #expect(try AttachmentDownloadRule(argument: "contentType=text/*,priority=10") == AttachmentDownloadRule(contentType: "text/*", priority: 10))
        #expect(try AttachmentDownloadRule(argument: "minLength=1MiB,skip") == AttachmentDownloadRule(minLength: 1 << 20, skip: true))
        #expect(try AttachmentDownloadRule(argument: " MINLENGTH = 2k , skip=true ") == AttachmentDownloadRule(minLength: 2048, skip: true))
        #expect(try AttachmentDownloadRule(argument: "maxLength=300B,name=*.png,docID=a*,priority=-3")
                == AttachmentDownloadRule(name: "*.png", docID: "a*", maxLength: 300, priority: -3))
        #expect(try AttachmentDownloadRule(argument: "priority=5") == AttachmentDownloadRule(priority: 5))
        #expect(try AttachmentDownloadRule(argument: "contentType=image/*") == AttachmentDownloadRule(contentType: "image/*"))
        #expect(try AttachmentDownloadRule(argument: "skip=false,maxLength=1G") == AttachmentDownloadRule(maxLength: 1 << 30))
        for size in ["7", "7B", "7b"] { #expect(try AttachmentDownloadRule.parseSize(size, key: "k") == 7) }
        #expect(try AttachmentDownloadRule.parseSize("3 GiB", key: "k") == 3 << 30)
        #expect(try AttachmentDownloadRule.parseSize("5m", key: "k") == 5 << 20)
        // The description is the command-line form and reads back.
        for text in ["contentType=text/*,priority=10", "minLength=1048576,skip", "name=a,docID=b,maxLength=3,priority=0"] {
            let rule = try AttachmentDownloadRule(argument: text)
            #expect(rule.description == text)
            #expect(try AttachmentDownloadRule(argument: rule.description) == rule)
        }
    }

    @Test(arguments: [
        ("", "the download rule is empty"),
        ("  ", "the download rule is empty"),
        ("priority=1,", "empty item"),
        ("size=3", "unknown key \"size\""),
        ("skip,skip", "skip is given twice"),
        ("priority=high", "priority must be an integer, got \"high\""),
        ("priority=", "priority needs a value"),
        ("contentType", "contentType needs a value"),
        ("minLength=1.5MiB", "minLength must be a whole number of bytes"),
        ("minLength=1MB", "minLength must be a whole number of bytes"),
        ("maxLength=-1", "maxLength must be a whole number of bytes"),
        ("maxLength=99999999999G", "maxLength \"99999999999G\" is too large"),
        ("minLength=2K,maxLength=1K", "greater than maxLength"),
        ("skip,priority=4", "either skips or has a priority"),
        ("skip=maybe", "skip takes no value"),
    ])
    func commandLineErrorsSayWhatIsWrong(argument: String, message: String) {
        do {
            _ = try AttachmentDownloadRule(argument: argument)
            Issue.record("\(argument.debugDescription) parsed")
        } catch {
            #expect(error.message.contains(message), "\(argument.debugDescription): \(error.message)")
        }
    }

    // MARK: The queue

    static func download(_ name: String, _ priority: Int, arrival: UInt64 = 0) -> AttachmentDownload {
        AttachmentDownload(documentID: "d", revisionID: "1-aa", name: name, digest: digest, length: 1, priority: priority, arrival: arrival)
    }

    @Test func theQueueGivesHigherPrioritiesFirstAndTiesInArrivalOrder() {
        let q = AttachmentDownloadQueue(policy: .rules([]), onEvent: { _ in })
        // Stored out of order (revision 3 before 2): ties still go by arrival, and attachments
        // of one revision in the order given.
        q.enqueue([Self.download("b0", 0, arrival: 1), Self.download("t1", 10, arrival: 1), Self.download("n1", -5, arrival: 1)])
        q.enqueue([Self.download("t3", 10, arrival: 3), Self.download("b3", 0, arrival: 3)])
        q.enqueue([Self.download("t2", 10, arrival: 2), Self.download("t2b", 10, arrival: 2), Self.download("b2", 0, arrival: 2)])
        var order: [String] = []
        // An interrupted download goes back ahead of its equals.
        if let first = q.pop() { order.append(first.name); q.enqueue([first]) }
        while let d = q.pop() { order.append(d.name) }
        #expect(order == ["t1", "t1", "t2", "t2b", "t3", "b0", "b2", "b3", "n1"])
        #expect(q.count == 0)
        #expect(q.nextArrival() == 1 && q.nextArrival() == 2)
    }

    @Test func theQueueKeepsOrderPastItsCompaction() {
        let q = AttachmentDownloadQueue(policy: .rules([]), onEvent: { _ in })
        q.enqueue((0..<3000).map { Self.download("\($0)", 1, arrival: UInt64($0)) })
        var got: [Int] = []
        for _ in 0..<2000 { if let d = q.pop() { got.append(Int(d.name) ?? -1) } }
        q.enqueue([Self.download("late", 1, arrival: 5000)])
        while let d = q.pop() { got.append(Int(d.name) ?? 3000) }
        #expect(got == Array(0...3000))
    }

    @Test func waitingForItemsEndsWithAnItemOrCancellation() async {
        let q = AttachmentDownloadQueue(policy: .rules([]), onEvent: { _ in })
        let waiter = Task { await q.waitForItems(); return q.count }
        try? await Task.sleep(for: .milliseconds(20))
        q.enqueue([Self.download("a", 0)])
        #expect(await waiter.value == 1)
        _ = q.pop()
        let cancelled = Task { await q.waitForItems() }
        cancelled.cancel()
        await cancelled.value
    }
}
