import FerryStore

/// A database's `_security` object (Protocol/rest.md, "Security objects"): CouchDB's `admins`
/// and `members`, each a list of user names and of user roles (the `roles` of a `_users`
/// document), and Ferry's `readers` beside them, mapped onto Ferry's roles — an admin is
/// `admin`, a member `writer` (CouchDB's members may write), a reader `reader`. What it grants
/// adds to the users file's roles; it takes nothing away. The role `_admin` names the server's
/// admins, as in CouchDB.
public struct SecurityObject: Sendable, Equatable {
    /// Names and roles of one section.
    public struct Section: Sendable, Equatable {
        /// User names.
        public var names: [String] = []
        /// User roles (`_users` documents' `roles`).
        public var roles: [String] = []

        /// Whether the section names the user or one of its roles.
        func includes(_ user: String, groups: [String], serverAdmin: Bool) -> Bool {
            names.contains(user) || roles.contains { groups.contains($0) || (serverAdmin && $0 == "_admin") }
        }

        var isEmpty: Bool { names.isEmpty && roles.isEmpty }
    }

    /// Database admins.
    public var admins = Section()
    /// Members: read and write.
    public var members = Section()
    /// Readers (a Ferry extension: CouchDB has no read-only members).
    public var readers = Section()
    /// The object as stored, with any other members it had (CouchDB keeps them).
    public private(set) var json: JSONValue

    /// What a database whose `_security` was never set answers: CouchDB 3's `admin_only`
    /// default.
    public static let defaultJSON: JSONValue = .object([
        "members": .object(["roles": .array([.string("_admin")])]),
        "admins": .object(["roles": .array([.string("_admin")])]),
    ])

    /// Why an object is refused.
    public struct Invalid: Error, Sendable, Equatable {
        /// What is wrong.
        public let reason: String
    }

    /// Reads and checks an object: sections are objects whose `names` and `roles` are arrays
    /// of strings.
    public init(json: JSONValue) throws(Invalid) {
        guard let o = json.objectValue else { throw Invalid(reason: "the security object must be a JSON object") }
        func section(_ key: String) throws(Invalid) -> Section {
            guard let v = o[key] else { return Section() }
            guard let s = v.objectValue else { throw Invalid(reason: "\(key) must be an object") }
            var out = Section()
            for field in ["names", "roles"] {
                guard let list = s[field] else { continue }
                guard let a = list.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else {
                    throw Invalid(reason: "\(key).\(field) must be an array of strings")
                }
                if field == "names" { out.names = a.compactMap(\.stringValue) } else { out.roles = a.compactMap(\.stringValue) }
            }
            return out
        }
        admins = try section("admins")
        members = try section("members")
        readers = try section("readers")
        self.json = json
    }

    /// The role the object gives `user` (with `_users` roles `groups`); nil when none. With no
    /// members and no readers the database is public, as in CouchDB: every user is a member
    /// (anonymous requests stay governed by `--allow-anonymous`).
    public func role(for user: String, groups: [String], serverAdmin: Bool) -> Role? {
        if admins.includes(user, groups: groups, serverAdmin: serverAdmin) { return .admin }
        if members.isEmpty && readers.isEmpty { return .writer }
        if members.includes(user, groups: groups, serverAdmin: serverAdmin) { return .writer }
        if readers.includes(user, groups: groups, serverAdmin: serverAdmin) { return .reader }
        return nil
    }
}
