import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The raw sockaddr bytes (sockaddr_in or sockaddr_in6).
    let storage: [UInt8]

    /// The address family (AF_INET or AF_INET6).
    public var family: Int32 {
        storage.withUnsafeBytes { Int32($0.load(as: sa_family_t.self)) }
    }

    /// The port number.
    public var port: Int {
        storage.withUnsafeBytes { Int(UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self))) }
    }

    /// The numeric host, e.g. `127.0.0.1` or `::1`.
    public var host: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        storage.withUnsafeBytes { raw in
            if family == AF_INET6 {
                _ = inet_ntop(AF_INET6, raw.baseAddress! + 8, &buf, socklen_t(buf.count))
            } else {
                _ = inet_ntop(AF_INET, raw.baseAddress! + 4, &buf, socklen_t(buf.count))
            }
        }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    init(raw: UnsafeRawPointer, length: Int) {
        storage = Array(UnsafeRawBufferPointer(start: raw, count: length))
    }

    /// Parses a numeric IPv4 or IPv6 host (no name resolution) and a port.
    public init(ipAddress: String, port: Int) throws(NetError) {
        var host = ipAddress
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var a4 = sockaddr_in()
        if inet_pton(AF_INET, host, &a4.sin_addr) == 1 {
            a4.sin_family = sa_family_t(AF_INET)
            a4.sin_port = in_port_t(UInt16(truncatingIfNeeded: port)).bigEndian
            self = withUnsafeBytes(of: &a4) { SocketAddress(raw: $0.baseAddress!, length: $0.count) }
            return
        }
        var a6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &a6.sin6_addr) == 1 {
            a6.sin6_family = sa_family_t(AF_INET6)
            a6.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port)).bigEndian
            self = withUnsafeBytes(of: &a6) { SocketAddress(raw: $0.baseAddress!, length: $0.count) }
            return
        }
        throw .invalidAddress(ipAddress)
    }

    /// The address itself without the port: 4 bytes for IPv4, 16 for IPv6.
    public var addressBytes: [UInt8] {
        family == AF_INET6 ? Array(storage[8..<24]) : Array(storage[4..<8])
    }

    /// An address from its 4 (IPv4) or 16 (IPv6) bytes and a port; nil for any other length.
    public init?(addressBytes: [UInt8], port: Int) {
        switch addressBytes.count {
        case 4:
            var a4 = sockaddr_in()
            a4.sin_family = sa_family_t(AF_INET)
            a4.sin_port = in_port_t(UInt16(truncatingIfNeeded: port)).bigEndian
            withUnsafeMutableBytes(of: &a4.sin_addr) { $0.copyBytes(from: addressBytes) }
            self = withUnsafeBytes(of: &a4) { SocketAddress(raw: $0.baseAddress!, length: $0.count) }
        case 16:
            var a6 = sockaddr_in6()
            a6.sin6_family = sa_family_t(AF_INET6)
            a6.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port)).bigEndian
            withUnsafeMutableBytes(of: &a6.sin6_addr) { $0.copyBytes(from: addressBytes) }
            self = withUnsafeBytes(of: &a6) { SocketAddress(raw: $0.baseAddress!, length: $0.count) }
        default:
            return nil
        }
    }

    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        storage.withUnsafeBytes { body($0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
    }
}

/// Resolves host names with `getaddrinfo` on a background thread, never on an event loop.
public enum Resolver {
    /// Every TCP address of `host`:`port`, in the resolver's preference order.
    public static func resolve(host: String, port: Int) async throws(NetError) -> [SocketAddress] {
        if let numeric = try? SocketAddress(ipAddress: host, port: port) { return [numeric] }
        let result: Result<[SocketAddress], NetError> = await withCheckedContinuation { c in
            DispatchQueue.global().async { c.resume(returning: resolveBlocking(host: host, port: port)) }
        }
        return try result.get()
    }

    static func resolveBlocking(host: String, port: Int) -> Result<[SocketAddress], NetError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &res)
        if rc != 0 { return .failure(.resolutionFailed(host: host, reason: String(cString: gai_strerror(rc)))) }
        defer { freeaddrinfo(res) }
        var out: [SocketAddress] = []
        var p = res
        while let ai = p {
            if let a = ai.pointee.ai_addr { out.append(SocketAddress(raw: a, length: Int(ai.pointee.ai_addrlen))) }
            p = ai.pointee.ai_next
        }
        if out.isEmpty { return .failure(.resolutionFailed(host: host, reason: "no addresses")) }
        return .success(out)
    }
}
