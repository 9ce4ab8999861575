@testable import FerryStore
import Foundation

/// The package root, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Tab-separated vector lines of a file in Protocol/vectors, comments skipped.
func vectorLines(_ name: String) throws -> [[String]] {
    let text = try String(contentsOf: packageRoot.appendingPathComponent("Protocol/vectors/\(name)"), encoding: .utf8)
    return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
}

func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.utf8.makeIterator()
    func nib(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
    while let a = it.next(), let b = it.next() { out.append(nib(a) << 4 | nib(b)) }
    return out
}

/// A fresh temporary directory, removed when the value is dropped.
final class TempDir: @unchecked Sendable {
    // @unchecked: immutable after init; only the path string is shared.
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-store-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Opens a fresh database in a new temp dir; keep the dir alive as long as the database.
func freshDatabase(_ options: DatabaseOptions = DatabaseOptions()) throws -> (Database, TempDir) {
    let dir = TempDir()
    return (try Database.open(at: dir.path("test.ferry"), options: options), dir)
}

func json(_ s: String) -> [UInt8] { Array(s.utf8) }

func rev(_ s: String) -> RevisionID {
    // Test literals are valid by construction; a bad one fails the test loudly.
    guard let r = try? RevisionID(s) else { fatalError("bad test revision \(s)") }
    return r
}

/// A deterministic generator (SplitMix64) so property tests can print and replay their seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
