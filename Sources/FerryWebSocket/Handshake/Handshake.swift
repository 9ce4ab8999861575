import CFerrySystem
import COpenSSL
import FerryHTTP
import FoundationEssentials

/// Shared pieces of the RFC 6455 opening handshake.
public enum Handshake {
    /// The GUID appended to the key before hashing (RFC 6455 §1.3).
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &len, EVP_sha1(), nil)
        return Data(digest[..<Int(len)]).base64EncodedString()
    }

    /// A fresh `Sec-WebSocket-Key`: 16 bytes from the kernel CSPRNG, base64.
    public static func randomKey() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        if ferry_random_bytes(&bytes, 16) != 0 {
            for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        }
        return Data(bytes).base64EncodedString()
    }

    /// A head's bytes without their final CRLF CRLF, if they carry one.
    static func withoutTerminator(_ head: some Collection<UInt8>) -> ArraySlice<UInt8> {
        let bytes = Array(head)[...]
        return bytes.suffix(4).elementsEqual([13, 10, 13, 10]) ? bytes.dropLast(4) : bytes
    }

    /// A complete HTTP error response with a plain-text body and `Connection: close`.
    public static func errorResponse(status: Int, message: String, headers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
        let fields = headers.pairs + [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")]
        return HTTPResponseEncoder.encode(HTTPResponseHead(status: status, headers: fields), body: Array((message + "\n").utf8))
    }
}

/// The server's side of the handshake (RFC 6455 §4.2): validates a request and writes the answer.
@_spi(Fuzzing) public enum ServerHandshake {
    /// What a valid upgrade request asks for.
    public struct Offer: Sendable {
        /// The `Sec-WebSocket-Accept` value to answer with.
        public var acceptValue: String
        /// The subprotocols the client offered, in its order of preference.
        public var subprotocols: [String]
        /// The raw `Sec-WebSocket-Extensions` offers.
        public var extensions: [String]
    }

    /// Parses a request head (its final CRLF CRLF optional) with FerryHTTP's parser; a broken
    /// one is `.badHandshake` with the status to answer.
    public static func parseRequest(_ head: some Collection<UInt8>, limits: HTTPLimits = HTTPLimits()) throws(WebSocketError) -> HTTPRequestHead {
        do { return try HTTPRequestHead.parse(Handshake.withoutTerminator(head), limits: limits) } catch {
            throw .badHandshake(status: error.status, reason: error.reason)
        }
    }

    /// Validates an upgrade request. Throws `.badHandshake` with the HTTP status to answer.
    public static func validate(_ req: HTTPRequestHead) throws(WebSocketError) -> Offer {
        guard req.method == "GET" else { throw .badHandshake(status: 405, reason: "method \(req.method) is not GET") }
        guard req.minorVersion >= 1 else { throw .badHandshake(status: 400, reason: "HTTP/1.1 or later is required") }
        guard req["Host"] != nil else { throw .badHandshake(status: 400, reason: "missing Host header") }
        guard req.tokens("Upgrade").contains(where: { $0.caseInsensitiveEquals("websocket") }) else {
            throw .badHandshake(status: 426, reason: "this endpoint speaks WebSocket only (Upgrade: websocket required)")
        }
        guard req.tokens("Connection").contains(where: { $0.caseInsensitiveEquals("upgrade") }) else {
            throw .badHandshake(status: 400, reason: "Connection header must contain Upgrade")
        }
        guard req.values(of: "Sec-WebSocket-Version").count == 1, req["Sec-WebSocket-Version"] == "13" else {
            throw .badHandshake(status: 426, reason: "unsupported Sec-WebSocket-Version (13 required)")
        }
        let keys = req.values(of: "Sec-WebSocket-Key")
        guard keys.count == 1, let decoded = Data(base64Encoded: keys[0]), decoded.count == 16 else {
            throw .badHandshake(status: 400, reason: "Sec-WebSocket-Key must be 16 bytes in base64")
        }
        return Offer(acceptValue: Handshake.acceptValue(forKey: keys[0]),
                     subprotocols: req.tokens("Sec-WebSocket-Protocol"),
                     extensions: req.values(of: "Sec-WebSocket-Extensions"))
    }

    /// The `101 Switching Protocols` answer.
    public static func acceptResponse(acceptValue: String, subprotocol: String?, extensions: String? = nil,
                                      headers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
        var fields: [(name: String, value: String)] = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptValue)]
        if let p = subprotocol { fields.append(("Sec-WebSocket-Protocol", p)) }
        if let e = extensions { fields.append(("Sec-WebSocket-Extensions", e)) }
        return HTTPResponseEncoder.encode(HTTPResponseHead(status: 101, headers: fields + headers.pairs))
    }
}

/// The client's side of the handshake (RFC 6455 §4.1): writes the request, checks the answer.
@_spi(Fuzzing) public struct ClientHandshake: Sendable {
    /// The `Sec-WebSocket-Key` sent.
    public let key: String
    /// The subprotocols offered, in preference order.
    public let subprotocols: [String]
    /// permessage-deflate as offered; nil offers no extension.
    public let permessageDeflate: PerMessageDeflateOptions?

    /// Creates a handshake with a fresh random key (or a fixed one, for golden vectors).
    public init(subprotocols: [String] = [], permessageDeflate: PerMessageDeflateOptions? = nil,
                key: String = Handshake.randomKey()) {
        self.key = key; self.subprotocols = subprotocols; self.permessageDeflate = permessageDeflate
    }

    /// The request bytes. `hostHeader` is `host[:port]`.
    public func request(hostHeader: String, target: String, headers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
        var fields: [(name: String, value: String)] = [("Host", hostHeader), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                                       ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]
        if !subprotocols.isEmpty { fields.append(("Sec-WebSocket-Protocol", subprotocols.joined(separator: ","))) }
        if let d = permessageDeflate { fields.append(("Sec-WebSocket-Extensions", PerMessageDeflateNegotiation.clientOffer(d))) }
        return HTTPRequestEncoder.encode(method: "GET", target: target, headers: fields + headers.pairs)
    }

    /// Parses a response head (its final CRLF CRLF optional) with FerryHTTP's parser; a broken
    /// one is `.invalidUpgradeResponse`.
    public static func parseResponse(_ head: some Collection<UInt8>, limits: HTTPLimits = HTTPLimits()) throws(WebSocketError) -> HTTPResponseHead {
        do { return try HTTPResponseHead.parse(Handshake.withoutTerminator(head), limits: limits) } catch {
            throw .invalidUpgradeResponse(error.reason)
        }
    }

    /// Checks the server's answer; returns the subprotocol it chose (nil if none).
    public func validate(_ response: HTTPResponseHead) throws(WebSocketError) -> String? {
        guard response.status == 101 else {
            throw .upgradeRejected(status: response.status, reason: response.reason, headers: response.fields.fields)
        }
        guard response.tokens("Upgrade").contains(where: { $0.caseInsensitiveEquals("websocket") }) else {
            throw .invalidUpgradeResponse("missing Upgrade: websocket")
        }
        guard response.tokens("Connection").contains(where: { $0.caseInsensitiveEquals("upgrade") }) else {
            throw .invalidUpgradeResponse("missing Connection: Upgrade")
        }
        guard response["Sec-WebSocket-Accept"] == Handshake.acceptValue(forKey: key) else {
            throw .invalidUpgradeResponse("wrong Sec-WebSocket-Accept")
        }
        _ = try negotiatedDeflate(response)
        let chosen = response.values(of: "Sec-WebSocket-Protocol")
        if chosen.isEmpty { return nil }
        guard chosen.count == 1, subprotocols.contains(chosen[0]) else {
            throw .invalidUpgradeResponse("server chose subprotocol \(chosen.joined(separator: ",")) that was not offered")
        }
        return chosen[0]
    }

    /// The permessage-deflate agreement in the server's answer: nil when none was offered or
    /// the server declined; throws `.invalidUpgradeResponse` for an extension response the
    /// client must fail the connection on (not offered, malformed, bad or duplicate parameters).
    public func negotiatedDeflate(_ response: HTTPResponseHead) throws(WebSocketError) -> PerMessageDeflateAgreement? {
        let fields = response.values(of: "Sec-WebSocket-Extensions")
        if fields.isEmpty { return nil }
        do {
            return try PerMessageDeflateNegotiation.clientAccept(response: fields, offered: permessageDeflate)
        } catch {
            throw .invalidUpgradeResponse("\(error)")
        }
    }
}
