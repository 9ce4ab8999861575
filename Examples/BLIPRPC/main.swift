// A tiny RPC service over FerryBLIP alone (no store, no replication): a server that adds
// numbers and upper-cases text, and a client that calls it. CI builds and runs this file
// (`swift run blip-rpc-example`); it exits non-zero if an answer is wrong.
import FerryBLIP
import FerryNet

@main
struct BLIPRPCExample {
    static func main() async throws {
        // Server: one handler per profile; handlers run on the connection's event loop.
        let server = try await BLIPConnection.listen(port: 0, path: "/rpc", app: "RPCExample_1") { conn in
            conn.register(profile: "add") { req in
                let a = Int(req.message.properties["a"] ?? "") ?? 0
                let b = Int(req.message.properties["b"] ?? "") ?? 0
                req.respond(properties: ["sum": String(a + b)])
            }
            conn.register(profile: "upper") { req in
                req.respond(body: Array(String(decoding: req.message.body, as: UTF8.self).uppercased().utf8), compressed: true)
            }
        }

        // Client: requests are multiplexed on one WebSocket; each `send` awaits its own reply.
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/rpc", app: "RPCExample_1")
        async let sum = client.send(.request(profile: "add", properties: ["a": "40", "b": "2"]))
        async let shout = client.send(.request(profile: "upper", body: Array("hello, blip".utf8), urgent: true))
        let (s, u) = try await (sum, shout)
        print("40 + 2 =", s.properties["sum"] ?? "?")
        print("upper:", String(decoding: u.body, as: UTF8.self))

        // An unknown profile comes back as a typed error.
        do {
            _ = try await client.send(.request(profile: "divide"))
        } catch {
            print("divide:", error)   // BLIP error BLIP/404: no handler for message
        }

        await client.close()
        await server.close()
        guard s.properties["sum"] == "42", u.body == Array("HELLO, BLIP".utf8) else {
            print("wrong answer"); throw BLIPError.invalidRequest("wrong answer")
        }
    }
}
