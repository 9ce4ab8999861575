import FerryStore
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import FoundationEssentials

/// The key `AuthSession` cookies are signed with (CouchDB's `[chttpd_auth] secret`): 32 random
/// bytes kept as hex in a file beside the users file (`DIR/_session_secret`, mode 0600,
/// written whole by `DurableFile`), made on first start, so cookies outlive a restart. Whoever
/// reads it can forge a session for any user: it is as private as the users file.
enum SessionSecret {
    /// The secret's file for a users file: `_session_secret` in the same directory.
    static func path(besideUsersFile users: String) -> String {
        FileSystem.directory(of: users) + "/_session_secret"
    }

    /// Reads the secret at `path`, or makes and stores one when there is none (or it is not
    /// a secret: a file cut short is replaced, which only ends the sessions it signed).
    static func loadOrCreate(at path: String) throws(UserStore.Failure) -> [UInt8] {
        if let data = FileManager.default.contents(atPath: path),
           let text = String(data: data, encoding: .utf8)?.trimmingWhitespace(),
           text.utf8.count == 64, let bytes = Hex.decode(text, allowingUppercase: true) {
            return bytes
        }
        let secret = try random()
        do { try DurableFile.write(Array((Hex.encode(secret) + "\n").utf8), to: path) } catch {
            throw .io("cannot keep the session secret: \(error.description)")
        }
        return secret
    }

    /// 32 random bytes (a secret for a daemon without a users file: its cookies end with it).
    static func random() throws(UserStore.Failure) -> [UInt8] {
        var secret = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&secret, 32) == 1 else { throw .io("no random bytes for the session secret") }
        return secret
    }
}
