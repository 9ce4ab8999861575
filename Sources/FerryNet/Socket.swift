#if canImport(Glibc)
import Glibc
#endif

/// Thin wrappers over the POSIX socket calls Ferry uses, all non-blocking and close-on-exec.
enum Socket {
    static func make(family: Int32) throws(NetError) -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { throw .system(operation: "socket", errno: errno) }
        return fd
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var v = value
        _ = setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setNoDelay(_ fd: Int32) { setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1) }

    static func localAddress(_ fd: Int32) -> SocketAddress? { address(fd, getsockname) }

    static func peerAddress(_ fd: Int32) -> SocketAddress? { address(fd, getpeername) }

    private static func address(_ fd: Int32, _ get: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> SocketAddress? {
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &ss) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { get(fd, $0, &len) }
        }
        if rc != 0 { return nil }
        return withUnsafeBytes(of: &ss) { SocketAddress(raw: $0.baseAddress!, length: Int(len)) }
    }

    static func pendingError(_ fd: Int32) -> Int32 {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return err
    }
}
