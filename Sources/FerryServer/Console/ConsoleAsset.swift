/// One file of the web console, built into the binary (SwiftPM's `embedInCode` resources:
/// `PackageResources`), so a daemon has no runtime files to lose or to keep in step.
struct ConsoleAsset: Sendable {
    /// Its `Content-Type`.
    let contentType: String
    /// Its bytes.
    let bytes: [UInt8]
    /// A strong validator of the bytes (FNV-1a 64), for `If-None-Match`.
    let etag: String

    init(_ contentType: String, _ bytes: [UInt8]) {
        self.contentType = contentType
        self.bytes = bytes
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        etag = "\"" + String(h, radix: 16) + "\""
    }

    /// The console's files by their name under `/_utils/`.
    static let byName: [String: ConsoleAsset] = [
        "index.html": ConsoleAsset("text/html; charset=utf-8", PackageResources.index_html),
        "console.css": ConsoleAsset("text/css; charset=utf-8", PackageResources.console_css),
        "api.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.api_js),
        "app.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.app_js),
        "databases.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.databases_js),
        "documents.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.documents_js),
        "ui.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.ui_js),
        "revisions.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.revisions_js),
        "attachments.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.attachments_js),
        "replications.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.replications_js),
        "mesh.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.mesh_js),
        "users.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.users_js),
        "metrics.js": ConsoleAsset("text/javascript; charset=utf-8", PackageResources.metrics_js),
    ]
}
