import ArgumentParser
import FerrySync

/// `--download-rule RULE` (repeatable): which attachments a pull downloads and in what order
/// (Protocol/download-rules.md, "Command-line form"). Without it every attachment is
/// downloaded with its revision.
struct DownloadRuleOptions: ParsableArguments {
    @Option(name: .customLong("download-rule"),
            help: ArgumentHelp("""
                Pull attachments by rule, first match wins (repeatable): matchers contentType=GLOB, name=GLOB, \
                docID=GLOB, minLength=SIZE, maxLength=SIZE and an action priority=N (higher first, default 0) or skip. \
                Skipped attachments stay unfetched until `ferry attachment get --peer`. \
                Example: --download-rule 'contentType=text/*,priority=10' --download-rule 'minLength=1MiB,skip'.
                """, valueName: "rule"),
            transform: { try AttachmentDownloadRule(argument: $0) })
    var rules: [AttachmentDownloadRule] = []

    /// The download policy of the rules, or nil (download everything, each with its revision).
    var policy: AttachmentDownloadPolicy? { rules.isEmpty ? nil : .rules(rules) }
}
