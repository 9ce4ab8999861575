import FerryTestSupport
@testable import FerryStore
import Testing

/// Protocol/vectors/revision-ids.txt (LiteCore's vectors, Protocol/revisions.md, "Revision IDs",
/// plus extra cases from an independent
/// Python implementation) and the revision-ID syntax.
@Suite struct RevisionIDTests {
    @Test func referenceVectorsMatch() throws {
        let lines = try vectorLines("revision-ids.txt")
        #expect(lines.count >= 3)
        for l in lines {
            let parent = l[0] == "-" ? "" : l[0]
            let gen = parent.isEmpty ? 1 : (Int(parent.split(separator: "-")[0]) ?? 0) + 1
            let made = RevisionID.make(parentText: parent, generation: gen, deleted: l[1] == "1", canonicalBody: hexBytes(l[2]))
            #expect(made.description == l[3], "parent \(parent)")
        }
    }

    @Test func localEditsProduceTheReferenceChain() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        var doc = try db.save(Document(id: "doc", properties: ["property": "value"]))
        #expect(doc.revisionID?.description == "1-3de83144ab0b66114ff350b20724e1fd48c6c57b")
        doc.properties["property"] = "newvalue"
        doc = try db.save(doc)
        #expect(doc.revisionID?.description == "2-7718b0324ed598dda05874ab0afa1c826a4dc45c")
        doc = try db.delete(doc)
        #expect(doc.revisionID?.description == "3-b5286031b23cedfe784a86c021dc15817da8ff6d")
        #expect(doc.isDeleted)
    }

    @Test(arguments: ["1-ab", "12-0123456789abcdef0123456789abcdef01234567", "999999999-00"])
    func parsesValid(_ s: String) throws {
        #expect(try RevisionID(s).description == s)
    }

    @Test(arguments: ["", "1", "1-", "-ab", "0-ab", "01-ab", "1-abc", "1-AB", "1-xy", "a-ab", "1-ab-cd",
                      "+1-ab", "1 -ab", "1000000000-ab", "1-" + String(repeating: "a", count: 130),
                      "1-" + String(repeating: "a", count: 39) + "A", "1-" + String(repeating: "a", count: 19) + "-" + String(repeating: "a", count: 20),
                      "1-" + String(repeating: "0", count: 39) + "g", "12-é" + String(repeating: "0", count: 38)])
    func rejectsInvalid(_ s: String) {
        #expect(throws: StoreError.invalidRevisionID(s)) { try RevisionID(s) }
    }

    /// A 40-digit digest (read eight digits at a time) prints back as it was read, orders as
    /// its text, and is refused with any character that is not a lowercase hex digit at any
    /// of its 40 positions.
    @Test func fortyDigitDigestsRoundTripAndRefuseEveryBadCharacter() throws {
        var g = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var seen: [(String, RevisionID)] = []
        for _ in 0..<500 {
            let hex = String(decoding: (0..<40).map { _ in digits[Int.random(in: 0..<16, using: &g)] }, as: UTF8.self)
            let text = "7-" + hex
            let r = try RevisionID(text)
            #expect(r.description == text)
            #expect(r.digest == hex)
            seen.append((text, r))
        }
        for ((ta, ra), (tb, rb)) in zip(seen, seen.dropFirst()) { #expect((ra < rb) == (ta < tb)) }
        let base = Array("7-0123456789abcdef0123456789abcdef01234567".utf8)
        for position in 2..<base.count {
            for bad in ["g", "A", "F", "/", ":", "`", "-", " ", "\u{7f}", "é"] {
                var text = base
                text.replaceSubrange(position...position, with: Array(bad.utf8))
                #expect(RevisionID(utf8: text) == nil, "\(bad) at \(position)")
            }
        }
    }

    @Test func ordersByGenerationThenDigest() {
        #expect(rev("2-aa") < rev("10-00"))
        #expect(rev("3-ab") < rev("3-ac"))
        #expect(rev("3-ab") < rev("3-abcd"))
    }

    /// 40-digit digests are kept as bytes, others as text: both forms order, compare, hash and
    /// print as their text does, including against each other.
    @Test func inlineAndTextDigestsBehaveAsTheirText() throws {
        let texts = ["3-" + String(repeating: "0", count: 40), "3-" + String(repeating: "f", count: 40),
                     "3-0123456789abcdef0123456789abcdef01234567", "3-0123456789abcdef0123456789abcdef01234568",
                     "3-01", "3-0123456789abcdef0123456789abcdef0123456700", "3-0123456789abcdef0123456789abcdef012345",
                     "3-ff", "3-" + String(repeating: "9", count: 40) + "ab", "4-00"]
        let revs = try texts.map { try RevisionID($0) }
        for (t, r) in zip(texts, revs) {
            #expect(r.description == t)
            #expect(r.digest == String(t.dropFirst(2)))
            #expect(RevisionID(utf8: Array(t.utf8)) == r)
        }
        for (a, ra) in zip(texts, revs) {
            for (b, rb) in zip(texts, revs) {
                let (ga, gb) = (a.prefix(1), b.prefix(1))   // one-digit generations here
                let byText = ga != gb ? ga < gb : a.utf8.dropFirst(2).lexicographicallyPrecedes(b.utf8.dropFirst(2))
                #expect((ra < rb) == byText, "\(a) < \(b)")
                #expect((ra == rb) == (a == b))
            }
        }
        #expect(Set(try revs + revs.map { try RevisionID($0.description) }).count == texts.count)
        // A digest made here (20 SHA-1 bytes) is the same value as its parsed text.
        let made = RevisionID.make(parent: nil, deleted: false, canonicalBody: Array("{}".utf8))
        #expect(try RevisionID(made.description) == made)
        #expect(try RevisionID(made.description).hashValue == made.hashValue)
    }
}
