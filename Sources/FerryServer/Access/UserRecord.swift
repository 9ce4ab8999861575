import FerryStore

/// One user of a daemon: a stored password hash (never the password), roles per database
/// (`*` = every database), and the TLS client certificates that log in as this user.
public struct UserRecord: Sendable, Equatable {
    /// The user name (`[A-Za-z0-9._@-]`, at most 128 characters).
    public var name: String
    /// The password's PBKDF2 hash; nil = no password login (certificates only).
    public var password: PasswordHash?
    /// Role per database name; the key `*` applies to every database.
    public var roles: [String: Role]
    /// Certificates that authenticate as this user: `sha256:<hex>` of the certificate's DER,
    /// or `cn:<common name>` (then the certificate must also be trusted by the server's CA).
    public var certificates: [String]
    /// CouchDB's user roles: the `roles` of the user's `_users` document, which databases'
    /// `_security` objects grant access to (`SecurityObject`).
    public var groups: [String]
    /// How many times the record was written through `_users` (its document's revision
    /// number).
    public var generation: Int

    /// A user with these parts.
    public init(name: String, password: PasswordHash?, roles: [String: Role] = [:], certificates: [String] = [],
                groups: [String] = [], generation: Int = 1) {
        self.name = name
        self.password = password
        self.roles = roles
        self.certificates = certificates
        self.groups = groups
        self.generation = generation
    }

    /// Whether `name` is a valid user name.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128 && name.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122)
                || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "-")
        }
    }

    /// The role on database `db`: the higher of its own and `*`'s.
    public func role(on db: String) -> Role? {
        [roles[db], roles["*"]].compactMap { $0 }.max()
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "roles": .object(roles.mapValues { .string($0.description) }),
            "certificates": .array(certificates.map { .string($0) }),
        ]
        if let password { o["password"] = .string(password.encoded) }
        if !groups.isEmpty { o["groups"] = .array(groups.map { .string($0) }) }
        if generation != 1 { o["generation"] = .int(Int64(generation)) }
        return .object(o)
    }

    init(name: String, json: JSONValue) throws(UserStore.Failure) {
        guard let o = json.objectValue else { throw .malformed("user \(name) is not an object") }
        self.name = name
        if let p = o["password"]?.stringValue {
            do throws(PasswordHash.Malformed) { password = try PasswordHash(encoded: p) } catch {
                throw .malformed("user \(name): \(error.reason)")
            }
        } else {
            password = nil
        }
        var roles: [String: Role] = [:]
        for (db, r) in o["roles"]?.objectValue ?? [:] {
            guard let role = r.stringValue.flatMap(Role.init(name:)) else { throw .malformed("user \(name): bad role for \(db)") }
            roles[db] = role
        }
        self.roles = roles
        certificates = (o["certificates"]?.arrayValue ?? []).compactMap(\.stringValue)
        groups = (o["groups"]?.arrayValue ?? []).compactMap(\.stringValue)
        generation = o["generation"]?.intValue.map { Int($0) } ?? 1
    }
}
