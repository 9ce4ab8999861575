import FerryTestSupport
@testable import FerryStore
import Testing

/// The validating scanner, the parser and the canonical writer (docs/store.md §2).
@Suite struct JSONTests {
    @Test func canonicalVectorsMatch() throws {
        let lines = try vectorLines("canonical-json.txt")
        #expect(lines.count >= 5)
        for l in lines {
            let input = hexBytes(l[0])
            let v = try JSONParser.parse(input)
            #expect(CanonicalJSON.encode(v) == hexBytes(l[1]), "\(String(decoding: input, as: UTF8.self))")
            #expect(try JSONScanner.validate(input) == .object)
        }
    }

    @Test func canonicalIsAFixedPoint() throws {
        let v = try JSONParser.parse(json(#"{"b":[1,2.5,"x\u0001"],"a":{"d":null,"c":true},"e":1e300}"#))
        let once = CanonicalJSON.encode(v)
        #expect(CanonicalJSON.encode(try JSONParser.parse(once)) == once)
        #expect(String(decoding: once, as: UTF8.self) == #"{"a":{"c":true,"d":null},"b":[1,2.5,"x\u0001"],"e":1e+300}"#)
    }

    /// The block-at-a-time string writer and the bytewise key order, against the plain
    /// definitions they replace, on random strings: escapes at every offset of a block, runs
    /// longer than a block, non-ASCII text.
    @Test func stringWriterAndKeyOrderMatchTheirDefinitions() {
        func reference(_ s: String) -> [UInt8] {
            var out: [UInt8] = [0x22]
            for c in s.utf8 {
                switch c {
                case 0x22, 0x5C: out += [0x5C, c]
                case 0x0A: out += Array(#"\n"#.utf8)
                case 0x0D: out += Array(#"\r"#.utf8)
                case 0x09: out += Array(#"\t"#.utf8)
                case 0..<0x20, 0x7F: out += Array(#"\u00"#.utf8) + [Hex.digits[Int(c >> 4)], Hex.digits[Int(c & 0xF)]]
                default: out.append(c)
                }
            }
            return out + [0x22]
        }
        let alphabet: [String] = ["a", "b", "Z", " ", "\"", "\\", "\n", "\r", "\t", "\u{1}", "\u{1F}", "\u{7F}", "é", "日", "😀", "~"]
        var rng = SeededGenerator(seed: 36)
        var keys: [String] = []
        for _ in 0..<2_000 {
            let length = Int(rng.next() % 70)
            // Mostly plain text, so whole blocks are skipped and the escapes fall at every offset.
            let s = String((0..<length).map { _ in rng.next() % 4 == 0 ? Character(alphabet[Int(rng.next() % UInt64(alphabet.count))]) : "x" })
            var out: [UInt8] = []
            CanonicalJSON.writeString(s, to: &out)
            #expect(out == reference(s), "\(s.debugDescription)")
            keys.append(s)
        }
        for (a, b) in zip(keys, keys.shuffled(using: &rng)) {
            #expect(CanonicalJSON.utf8Precedes(a, b) == a.utf8.lexicographicallyPrecedes(b.utf8))
        }
        #expect(CanonicalJSON.utf8Precedes("ab", "abc") && !CanonicalJSON.utf8Precedes("abc", "ab") && !CanonicalJSON.utf8Precedes("", ""))
    }

    @Test(arguments: [
        "", " ", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1,]", "[1 2]", "{'a':1}", "{\"a\":01}",
        "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":NaN}",
        "{\"a\":Infinity}", "{\"a\":1e400}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\udc00\"}", "{\"a\":\"\t\"}", "{\"a\":\"unterminated}", "{} {}", "{}x", "{\"a\":1}}",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: StoreError.self) { try JSONScanner.validate(json(text)) }
        #expect(throws: StoreError.self) { try JSONParser.parse(json(text)) }
    }

    @Test(arguments: [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xFF], [0x80]] as [[UInt8]])
    func rejectsBadUTF8(_ bad: [UInt8]) {
        let text = json("{\"a\":\"") + bad + json("\"}")
        #expect(throws: StoreError.self) { try JSONScanner.validate(text) }
    }

    @Test func rejectsDuplicateKeysWhenParsing() {
        #expect(throws: StoreError.self) { try JSONParser.parse(json(#"{"a":1,"a":2}"#)) }
    }

    @Test func enforcesSizeAndDepth() {
        #expect(throws: StoreError.tooLarge(limit: 10)) { try JSONScanner.validate(json(#"{"a":"0123456789"}"#), sizeLimit: 10) }
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: StoreError.self) { try JSONScanner.validate(json(deep)) }
        #expect(throws: StoreError.self) { try JSONParser.parse(json(deep)) }
    }

    @Test func topLevelKinds() throws {
        #expect(try JSONScanner.validate(json("[1]")) == .array)
        #expect(try JSONScanner.validate(json(" \"s\" ")) == .string)
        #expect(try JSONScanner.validate(json("-1.5e3")) == .number)
        #expect(try JSONScanner.validate(json("null")) == .literal)
    }
}

/// The scanner skips plain runs 8 bytes at a time; specials must be found at every offset.
@Suite struct JSONScannerRunTests {
    @Test func specialBytesAreFoundAtEveryOffset() throws {
        for offset in 0..<24 {
            let prefix = String(repeating: "a", count: offset)
            for special in ["\\\"", "\\\\", "\\n", "é", "😀", "\\u0001"] {
                let text = "{\"k\":\"\(prefix)\(special)\(prefix)\"}"
                #expect(try JSONScanner.validate(json(text)) == .object, "\(text)")
                let v = try JSONParser.parse(json(text))
                #expect(try JSONParser.parse(CanonicalJSON.encode(v)) == v)
            }
            for bad: [UInt8] in [[0x01], [0x0A], [0xFF], [0xC3]] {
                let text = json("{\"k\":\"" + prefix) + bad + json(prefix + "\"}")
                #expect(throws: StoreError.self) { try JSONScanner.validate(text) }
            }
            #expect(throws: StoreError.self) { try JSONScanner.validate(json("{\"k\":\"" + prefix)) }
        }
    }
}
