/// A command that could not do its work (not a usage error): `Error: …` and exit status 1,
/// without the usage text a `ValidationError` prints.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
