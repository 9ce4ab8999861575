/// What sending one revision to a peer needs of it (a `rev` message): its body, whether it is a
/// deletion, and its ancestors — read without building the document's whole `RevisionTree`.
public struct OutgoingRevision: Sendable, Equatable {
    /// The revision's JSON body.
    public let body: [UInt8]
    /// Whether the revision is a deletion.
    public let isDeleted: Bool
    /// The revision's ancestors, newest first (parent, grandparent, …), at most as many as the
    /// reader was asked for.
    public let ancestors: [RevisionID]

    /// A revision to send, as read.
    public init(body: [UInt8], isDeleted: Bool, ancestors: [RevisionID]) {
        self.body = body
        self.isDeleted = isDeleted
        self.ancestors = ancestors
    }
}

extension RevisionTree {
    /// What sending `revision` needs, with at most `historyLimit` ancestors; nil if the tree no
    /// longer holds that revision or its body.
    public func outgoing(_ revision: RevisionID, historyLimit: Int) -> OutgoingRevision? {
        guard let node = nodes[revision], let body = node.body else { return nil }
        return OutgoingRevision(body: body, isDeleted: node.isDeleted,
                                ancestors: Array(history(of: revision, limit: historyLimit + 1).dropFirst()))
    }
}
