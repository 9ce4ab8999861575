import ArgumentParser
import FerryServer
import FoundationEssentials

/// `ferry user add|rm|ls`: the users of a daemon's data directory (or users file), with
/// passwords stored as PBKDF2 hashes and roles per database. A running daemon picks changes
/// up within a second.
struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user", abstract: "Add, remove and list the users who may use a daemon's databases.",
        subcommands: [Add.self, Remove.self, ListUsers.self])

    /// `--data DIR` or `--users FILE`.
    struct Location: ParsableArguments {
        @Option(help: ArgumentHelp("The daemon's data directory (its users file is DIR/_users.json).", valueName: "dir"))
        var data: String?
        @Option(help: ArgumentHelp("The users file, when not the data directory's.", valueName: "file"))
        var users: String?

        func validate() throws {
            if (data == nil) == (users == nil) { throw ValidationError("give --data DIR or --users FILE") }
        }

        var store: UserStore {
            if let users { return UserStore(path: users) }
            if let data { try? FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true) }
            return UserStore(dataDirectory: data ?? ".")
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a user, or change one's password and roles: ferry user add --data DIR NAME --role DB=ROLE.")
        @OptionGroup var location: Location
        @Argument(help: "User name (letters, digits, . _ @ -).") var name: String
        @Option(help: "The password (prefer --password-stdin: arguments show in `ps`).") var password: String?
        @Flag(help: "Read the password from the first line of standard input.") var passwordStdin = false
        @Option(help: ArgumentHelp("A role on a database: DB=reader|writer|admin; DB * = every database (repeatable).",
                                   valueName: "db=role"))
        var role: [String] = []
        @Option(help: ArgumentHelp("A TLS client certificate that logs in as this user: sha256:HEX or cn:NAME (repeatable).",
                                   valueName: "cert"))
        var certificate: [String] = []

        func validate() throws {
            guard UserRecord.isValidName(name) else { throw ValidationError("invalid user name \(name.debugDescription)") }
            guard !name.hasPrefix("_group.") else { throw ValidationError("user names starting with _group. are reserved for discovery groups") }
            if password != nil && passwordStdin { throw ValidationError("--password and --password-stdin exclude each other") }
            for r in role where Self.parseRole(r) == nil { throw ValidationError("--role takes DB=reader|writer|admin, got \(r.debugDescription)") }
            for c in certificate where !(c.hasPrefix("sha256:") || c.hasPrefix("cn:")) {
                throw ValidationError("--certificate takes sha256:HEX or cn:NAME")
            }
        }

        static func parseRole(_ s: String) -> (String, Role)? {
            guard let eq = s.lastIndex(of: "="), let role = Role(name: String(s[s.index(after: eq)...])), eq != s.startIndex else { return nil }
            return (String(s[..<eq]), role)
        }

        func run() throws {
            var secret = password
            if passwordStdin { secret = readLine(strippingNewline: true) ?? "" }
            let hash = try secret.map { try PasswordHash(password: $0) }
            let store = location.store
            try store.update { users in
                var user = users[name] ?? UserRecord(name: name, password: nil)
                if let hash { user.password = hash }
                for r in role { if let (db, role) = Self.parseRole(r) { user.roles[db] = role } }
                for c in certificate where !user.certificates.contains(c) { user.certificates.append(c) }
                users[name] = user
            }
            print("ferry: user \(name) saved in \(store.path)")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a user.")
        @OptionGroup var location: Location
        @Argument(help: "User name.") var name: String

        func run() throws {
            var found = false
            try location.store.update { users in found = users.removeValue(forKey: name) != nil }
            guard found else { throw ValidationError("no user \(name)") }
            print("ferry: user \(name) removed")
        }
    }

    struct ListUsers: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List users and their roles (never passwords).")
        @OptionGroup var location: Location

        func run() throws {
            for user in try location.store.load().values.sorted(by: { $0.name < $1.name }) {
                let roles = user.roles.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                let certs = user.certificates.isEmpty ? "" : " certificates=" + user.certificates.joined(separator: ",")
                print("\(user.name)\troles=\(roles.isEmpty ? "-" : roles)\tpassword=\(user.password == nil ? "no" : "yes")\(certs)")
            }
        }
    }
}
