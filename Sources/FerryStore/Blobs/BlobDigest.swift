import COpenSSL
import FoundationEssentials

/// The content address of a blob: the SHA-1 of its bytes, written `sha1-<standard base64>` as
/// CouchDB and Couchbase do (`sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=` for `hello`).
///
/// Promises: a value always holds exactly 20 digest bytes; `description` is the canonical text
/// and parsing accepts only that text, so two equal digests have one spelling.
public struct BlobDigest: Hashable, Sendable, CustomStringConvertible {
    /// The 20 bytes of the SHA-1.
    public let bytes: [UInt8]

    /// Parses `sha1-<28 base64 characters>`; anything else (another algorithm, bad base64,
    /// a non-canonical spelling, a wrong length) throws `.invalidArgument`.
    public init(_ text: String) throws(StoreError) {
        let prefix = "sha1-"
        guard text.hasPrefix(prefix), text.utf8.count == prefix.utf8.count + 28,
              let data = Data(base64Encoded: String(text.dropFirst(prefix.count))), data.count == 20
        else { throw .invalidArgument("not a sha1- digest: \(text.debugDescription)") }
        let digest = BlobDigest(bytes: Array(data))
        // Base64 has spare bits in the last character: refuse spellings that are not canonical.
        guard digest.description == text else { throw .invalidArgument("non-canonical digest \(text.debugDescription)") }
        self = digest
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The digest of `bytes` (one-shot; `BlobWriter` hashes a stream incrementally).
    public init(of bytes: [UInt8]) {
        self.init(bytes: SHA1.digest(of: bytes))
    }

    /// `sha1-` followed by the standard (padded) base64 of the 20 bytes.
    public var description: String { "sha1-" + Data(bytes).base64EncodedString() }

    /// The file name of the blob in the blob folder: lowercase hex (base64 has `/`, and some
    /// file systems fold case).
    var fileName: String { Hex.encode(bytes) + BlobStore.blobSuffix }
}

/// Incremental SHA-1 over OpenSSL's EVP interface, for streamed blobs.
///
/// Not Sendable: owned by one `BlobWriter`, used by one task at a time.
final class SHA1Stream {
    private let context: OpaquePointer

    init() throws(StoreError) {
        guard let ctx = EVP_MD_CTX_new() else { throw .io(operation: "EVP_MD_CTX_new", errno: ENOMEM) }
        guard EVP_DigestInit_ex(ctx, SHA1.evpAlgorithm, nil) == 1 else {
            EVP_MD_CTX_free(ctx)
            throw .io(operation: "EVP_DigestInit_ex(sha1)", errno: EINVAL)
        }
        context = ctx
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = EVP_DigestUpdate(context, base, bytes.count)
    }

    func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        _ = EVP_DigestFinal_ex(context, &out, &len)
        return Array(out[..<Int(len)])
    }
}
