import COpenSSL

/// One-shot SHA-1 of byte pieces through OpenSSL, with the algorithm fetched once.
///
/// `EVP_sha1()` handed to `EVP_Digest` makes OpenSSL 3 look the algorithm up again on every
/// call — a locked table lookup that cost more than hashing a 1 KiB body (a profile of REST
/// saves had the lookup at 60 % of each revision ID's digest). The pieces are hashed in
/// place, so a revision ID's input is not first copied into one array.
enum SHA1 {
    /// The fetched algorithm, or nil if this OpenSSL has no SHA-1 (then `EVP_sha1()` is used
    /// per call, as before).
    private static let algorithm = FetchedDigest(name: "SHA1")

    /// The algorithm to initialise a digest context with (`SHA1Stream` hashes blobs with it).
    static var evpAlgorithm: OpaquePointer? { algorithm.pointer ?? EVP_sha1() }

    /// The 20-byte digest of the pieces, in order (empty if OpenSSL fails, as `EVP_Digest`'s
    /// unchecked answer was before).
    static func digest(_ pieces: UnsafeRawBufferPointer...) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { return [] }
        defer { EVP_MD_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestInit_ex(context, evpAlgorithm, nil) == 1 else { return [] }
        for piece in pieces where !piece.isEmpty { _ = EVP_DigestUpdate(context, piece.baseAddress, piece.count) }
        guard EVP_DigestFinal_ex(context, &out, &length) == 1 else { return [] }
        return Array(out[..<Int(length)])
    }

    /// The digest of `bytes`.
    static func digest(of bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { digest($0) }
    }
}

/// An algorithm fetched once from OpenSSL's default provider and kept for the process.
///
/// Safety of `@unchecked Sendable`: the pointer is set once in `init` and never freed; OpenSSL
/// documents a fetched `EVP_MD` as immutable and usable from any number of threads at once.
private final class FetchedDigest: @unchecked Sendable {
    let pointer: OpaquePointer?
    init(name: String) { pointer = EVP_MD_fetch(nil, name, nil) }
}
