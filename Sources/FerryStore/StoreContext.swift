/// What a write transaction needs to know besides the connection: the options and a snapshot
/// of the registered validation functions (in name order, so they run in a stable order).
struct StoreContext: Sendable {
    var options: DatabaseOptions
    var validators: [(name: String, validate: Validator)]
}
