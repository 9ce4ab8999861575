import COpenSSL
import FoundationEssentials

/// Reads PEM certificates and keys into OpenSSL objects, and OpenSSL's error queue into text.
enum PEMLoader {
    /// A memory BIO over the PEM text of `source`.
    private static func bio(_ source: PEMSource) throws(TLSError) -> OpaquePointer {
        let text: [UInt8]
        switch source {
        case .pem(let s): text = Array(s.utf8)
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw .configuration("cannot read \(path)")
            }
            text = Array(data)
        }
        guard let bio = BIO_new(BIO_s_mem()) else { throw .configuration("out of memory") }
        if !text.isEmpty { _ = BIO_write(bio, text, Int32(text.count)) }
        return bio
    }

    /// Every certificate in `source`, in order. The caller frees them.
    static func certificates(_ source: PEMSource) throws(TLSError) -> [OpaquePointer] {
        let b = try bio(source)
        defer { BIO_free(b) }
        var out: [OpaquePointer] = []
        while let x = PEM_read_bio_X509(b, nil, nil, nil) { out.append(x) }
        ERR_clear_error()  // the loop ends on a "no start line" error
        if out.isEmpty { throw .configuration("no certificate found in \(describe(source))") }
        return out
    }

    /// The private key in `source`. The caller frees it.
    static func privateKey(_ source: PEMSource) throws(TLSError) -> OpaquePointer {
        let b = try bio(source)
        defer { BIO_free(b) }
        guard let key = PEM_read_bio_PrivateKey(b, nil, nil, nil) else {
            throw .configuration("no usable private key in \(describe(source)): \(takeErrors())")
        }
        return key
    }

    /// Names a source for error messages without printing key material.
    static func describe(_ source: PEMSource) -> String {
        switch source {
        case .file(let p): return p
        case .pem: return "the PEM text"
        }
    }

    /// Reads and empties a memory BIO as text.
    static func drain(_ bio: OpaquePointer) -> String {
        var p: UnsafeMutablePointer<CChar>?
        let n = ferry_bio_mem_data(bio, &p)
        guard n > 0, let p else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// OpenSSL's error queue for this thread, as one line, emptied.
    static func takeErrors() -> String {
        var parts: [String] = []
        while case let e = ERR_get_error(), e != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(e, &buf, buf.count)
            parts.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? "unknown error" : parts.joined(separator: "; ")
    }
}
