/// A complete BLIP message: a request, a response or an error response.
public struct BLIPMessage: Sendable, Equatable {
    /// MSG, RPY or ERR.
    public var type: BLIPMessageType
    /// The request number (a response carries its request's number).
    public var number: UInt64
    /// Urgent, compressed and NoReply (the type bits and MoreComing are ignored here).
    public var flags: BLIPFlags
    /// The properties.
    public var properties: BLIPProperties
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a message.
    public init(type: BLIPMessageType = .request, number: UInt64 = 0, flags: BLIPFlags = [],
                properties: BLIPProperties = BLIPProperties(), body: [UInt8] = []) {
        self.type = type; self.number = number; self.flags = flags
        self.properties = properties; self.body = body
    }

    /// A request with a `Profile` property.
    public static func request(profile: String, properties: BLIPProperties = BLIPProperties(), body: [UInt8] = [],
                               urgent: Bool = false, compressed: Bool = false, noReply: Bool = false) -> BLIPMessage {
        // Sized once: growing pair by pair reallocated for every request (a `rev` has six
        // properties), which showed in a pull feed's profile.
        var p = BLIPProperties()
        p.reserveCapacity(properties.pairs.count + 1)
        p["Profile"] = profile
        for (k, v) in properties where k != "Profile" { p[k] = v }
        var f: BLIPFlags = []
        if urgent { f.insert(.urgent) }
        if compressed { f.insert(.compressed) }
        if noReply { f.insert(.noReply) }
        return BLIPMessage(type: .request, flags: f, properties: p, body: body)
    }

    /// A response (RPY) with these properties and body, compressed if asked; the connection
    /// numbers it after the request it answers.
    public static func response(properties: BLIPProperties = BLIPProperties(), body: [UInt8] = [],
                                compressed: Bool = false) -> BLIPMessage {
        BLIPMessage(type: .response, flags: compressed ? .compressed : [], properties: properties, body: body)
    }

    /// An error response (ERR): `Error-Domain`, `Error-Code`, and the message as the body.
    public static func errorResponse(domain: String = "BLIP", code: Int, message: String) -> BLIPMessage {
        BLIPMessage(type: .error, properties: [("Error-Domain", domain), ("Error-Code", String(code))], body: Array(message.utf8))
    }

    /// The `Profile` property (the request's type).
    public var profile: String? { properties["Profile"] }
    /// Urgent scheduling.
    public var isUrgent: Bool { flags.contains(.urgent) }
    /// Sent compressed.
    public var isCompressed: Bool { flags.contains(.compressed) }
    /// A request that wants no response.
    public var isNoReply: Bool { flags.contains(.noReply) }

    /// For ERR messages: domain (default `BLIP`), code and message.
    public var error: (domain: String, code: Int, message: String)? {
        guard type == .error else { return nil }
        return (properties["Error-Domain"] ?? "BLIP", Int(properties["Error-Code"] ?? "") ?? 0,
                String(decoding: body, as: UTF8.self))
    }

    /// The head of the message stream before framing: varint(len(properties)) ‖ properties.
    /// The body follows it on the wire.
    public func encodedPrefix() -> [UInt8] {
        // One exactly sized allocation: this runs once per message sent.
        let length = properties.encodedLength
        var out: [UInt8] = []
        out.reserveCapacity(length + 10)
        Varint.write(UInt64(length), into: &out)
        properties.encode(into: &out)
        return out
    }

    public static func == (a: BLIPMessage, b: BLIPMessage) -> Bool {
        a.type == b.type && a.number == b.number && a.flags == b.flags && a.properties == b.properties && a.body == b.body
    }
}
