import FerryServer
import Testing

@Suite("Database names (CouchDB's rule, no path escapes)")
struct DatabaseNameTests {
    @Test(arguments: ["tasks", "a", "t0_$()+-", "team/tasks", "a/b/c", String(repeating: "x", count: 238)])
    func goodNames(_ name: String) throws {
        #expect(try DatabaseName(name).rawValue == name)
    }

    @Test(arguments: ["", "Tasks", "_users", "0db", "tasks.db", "a b", "a//b", "a/", "a/../b", "a/..", "é",
                      String(repeating: "x", count: 239)])
    func badNames(_ name: String) {
        #expect(throws: DatabaseName.Invalid.self) { try DatabaseName(name) }
    }

    @Test func aNestedNameIsAFileInAFolder() throws {
        #expect(try DatabaseName("team/tasks").relativePath == "team/tasks.ferry")
    }
}
