import FerryServer
import FerryStore
import Testing
@testable import ferry

/// `ReplicationSpec` built in code: the default IDs, and `ferry replication add`'s spec, which
/// must be the one the daemon reads from the document the command used to write by hand.
@Suite("ReplicationSpec: default IDs and specs built in code")
struct ReplicationSpecTests {
    @Test func theDefaultIDsKeepTheirTwoForms() {
        #expect(ReplicationSpec.defaultID(database: "notes", peer: "ws://u:p@laptop:4984/notes") == "notes-laptop-4984")
        #expect(ReplicationSpec.defaultID(database: "notes", peer: "https://couch.example/db") == "notes-couch.example")
        #expect(ReplicationSpec.defaultID(database: "a", peer: "ws://127.0.0.1:4985/b/c", prefix: "replicate", includingPath: true)
                == "replicate-a-127.0.0.1-4985-b-c")
    }

    @Test func validatingSplitsCredentialsAndRefusesWhatADocumentMayNotSay() throws {
        let s = try ReplicationSpec(id: "r", database: "notes", peer: "ws://ann:secret@b:4984/notes").validated()
        #expect(s.peer == "ws://b:4984/notes" && s.user == "ann" && s.password == "secret")
        var bad = ReplicationSpec(id: "r", database: "notes", peer: "ws://b:4984/notes")
        bad.batchSize = 0
        #expect(throws: ReplicationSpec.Invalid.self) { try bad.validated() }
    }

    @Test func addBuildsTheSpecItsDocumentDescribed() throws {
        let add = try ReplicationCommand.Add.parse([
            "notes", "http://ann:pw@couch:5984/notes", "--pull", "--doc-id", "a", "--filter", "f/by", "--param", "k=v",
            "--selector", #"{"type":"task"}"#, "--protocol", "couchdb", "--conflicts", "remote", "--batch-size", "50",
            "--every", "15m", "--budget", "30s", "--background-every", "1h", "--when-interface", "wlan0", "--when-reachable",
            "--download-rule", "minLength=1MiB,skip", "--data", "/nonexistent"])
        let document: [String: JSONValue] = [
            "database": "notes", "peer": "http://ann:pw@couch:5984/notes", "direction": "pull", "continuous": false,
            "doc_ids": ["a"], "filter": "f/by", "query_params": ["k": "v"], "selector": ["type": "task"], "protocol": "couchdb",
            "conflicts": "remote", "batch_size": 50, "schedule": ["every": "15m", "budget": "30s", "background_every": "1h"],
            "conditions": ["interfaces": ["wlan0"], "reachable": true], "download": [try DownloadRuleJSON.parse("minLength=1MiB,skip")]]
        let spec = try add.spec(id: "r")
        #expect(spec == (try ReplicationSpec(id: "r", json: document)))
        #expect(spec.user == "ann" && spec.peer == "http://couch:5984/notes")
        #expect(throws: (any Error).self) { try ReplicationCommand.Add.parse(["notes", "ws://b:1/n", "--conflicts", "mine"]).spec(id: "r") }
        #expect(throws: (any Error).self) { try ReplicationCommand.Add.parse(["notes", "ws://b:1/n", "--every", "soon"]).spec(id: "r") }
    }
}
