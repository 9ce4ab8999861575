import FerryBLIP
import FerryStore

/// The replication protocol's parsers of untrusted input, for the fuzz target (`@_spi(Fuzzing)`):
/// each reads a message as a peer would and throws the typed error the peer would answer with.
/// Nothing here touches a database.
@_spi(Fuzzing) public enum ReplicationWire {
    /// Parses a request of `profile` (`changes`, `proposeChanges`, `rev`) or, with
    /// `isResponse`, the response to one (`changes`/`proposeChanges` responses for `count`
    /// entries). Size limits apply before parsing (16 MiB bodies).
    public static func check(profile: String, properties: BLIPProperties = BLIPProperties(), body: [UInt8],
                             isResponse: Bool = false, count: Int = 200) throws(ReplicationError) {
        switch (profile, isResponse) {
        case ("changes", false): _ = try ReplicationMessages.decodeChanges(body)
        case ("changes", true): _ = try ReplicationMessages.decodeChangeAnswers(body, count: count)
        case ("proposeChanges", false): _ = try ReplicationMessages.decodeProposals(body)
        case ("proposeChanges", true): _ = try ReplicationMessages.decodeProposalStatuses(body, count: count)
        case ("rev", _):
            var p = properties
            p["Profile"] = "rev"
            _ = try RevMessage.read(BLIPMessage(type: .request, properties: p, body: body))
        default:
            throw .protocolError("no parser for \(profile)")
        }
    }

    /// Whether the direct reader of a `changes`/`proposeChanges` body and the general JSON
    /// parser give the same entries, or the same error, for `body` (the fuzz target checks
    /// every input it makes). False for other profiles.
    public static func readersAgree(profile: String, body: [UInt8]) -> Bool {
        func outcome<T: Equatable>(_ decode: () throws(ReplicationError) -> [T]) -> DecodeOutcome<T> {
            do { return .entries(try decode()) } catch { return .error("\(error)") }
        }
        switch profile {
        case "changes":
            return outcome { () throws(ReplicationError) in try ReplicationMessages.decodeChanges(body) }
                == outcome { () throws(ReplicationError) in try ReplicationMessages.decodeChanges(body, direct: false) }
        case "proposeChanges":
            return outcome { () throws(ReplicationError) in try ReplicationMessages.decodeProposals(body) }
                == outcome { () throws(ReplicationError) in try ReplicationMessages.decodeProposals(body, direct: false) }
        default:
            return false
        }
    }
}

/// What decoding a body gave, comparable: its entries, or its error's text.
private enum DecodeOutcome<T: Equatable>: Equatable {
    case entries([T])
    case error(String)
}
