/// Decides, per attachment of a pulled revision, whether a pull downloads it and how urgently
/// (`ReplicatorConfiguration.attachmentDownloadPolicy`).
///
/// With a policy, a pull stores each revision at once with its attachments unfetched, queues
/// the ones the policy fetches, and downloads them over the same connection in priority order
/// (higher first, ties in arrival order) whenever the pull is caught up — so a one-shot pull has
/// every wanted attachment before it stops. Without one (nil), every attachment is downloaded
/// before its revision is stored.
///
/// ```swift
/// // Text first, nothing of 1 MiB or more, the rest after the text.
/// config.attachmentDownloadPolicy = .rules([
///     AttachmentDownloadRule(contentType: "text/*", priority: 10),
///     AttachmentDownloadRule(minLength: 1 << 20, skip: true),
/// ])
/// // Or any function of the attachment and its document:
/// config.attachmentDownloadPolicy = AttachmentDownloadPolicy { info in
///     info.properties["type"] == "photo" ? .skip : .fetch(priority: 0)
/// }
/// ```
public struct AttachmentDownloadPolicy: Sendable {
    private let decide: @Sendable (AttachmentInfo) -> AttachmentDownloadDecision

    /// A policy that asks `decide` about every attachment a pulled revision lacks. It runs off
    /// the event loop, once per attachment, and should be quick.
    public init(_ decide: @escaping @Sendable (AttachmentInfo) -> AttachmentDownloadDecision) {
        self.decide = decide
    }

    /// The decision for one attachment.
    public func decision(for attachment: AttachmentInfo) -> AttachmentDownloadDecision {
        decide(attachment)
    }

    /// The declarative form (Protocol/download-rules.md): the first rule that matches decides;
    /// an attachment no rule matches is fetched with priority 0.
    public static func rules(_ rules: [AttachmentDownloadRule]) -> AttachmentDownloadPolicy {
        AttachmentDownloadPolicy { info in
            rules.first { $0.matches(info) }?.decision ?? .fetch(priority: 0)
        }
    }
}
