import COpenSSL
import FoundationEssentials

/// CouchDB's attachment digest, `md5-<base64>` (couch_att: the MD5 of the bytes as stored),
/// kept beside Ferry's own `sha1-` content address. CouchDB clients compare it: PouchDB's
/// replicator fetches an attachment again only when the source's `digest` differs from the one
/// it holds. Ferry stores attachments decoded, so its MD5 is over the decoded bytes, which is
/// also what PouchDB computes for the bytes it stores. Used by the REST server (FerryServer)
/// and by the CouchDB replication client.
public enum AttachmentMD5 {
    /// The member of a stored `_attachments` entry that holds it (REST serves it as `digest`).
    public static let member = "md5_digest"

    /// `md5-` + standard base64 of the MD5 of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> String {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let ok = bytes.withUnsafeBytes { raw in EVP_Digest(raw.baseAddress, raw.count, &md, &len, EVP_md5(), nil) }
        guard ok == 1 else { return "" }
        return "md5-" + Data(md[..<Int(len)]).base64EncodedString()
    }
}
