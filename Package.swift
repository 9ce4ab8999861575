// swift-tools-version: 6.1
import PackageDescription

/// Ferry: a peer-to-peer document replicator. One module per layer; each depends only on the
/// layers below it (docs/architecture.md):
/// - transport: system libraries (OpenSSL, zlib) → FerryNet (sockets, epoll, TLS, multicast
///   UDP) → FerryHTTP (HTTP/1.1: sans-I/O codecs for both directions, gzip, the one HTTP
///   client) → FerryWebSocket (its handshake speaks FerryHTTP's heads) → FerryBLIP;
/// - a codec without dependencies: FerryDNS (DNS messages for Multicast DNS and DNS-SD);
/// - discovery: FerryDiscovery (mDNS responder and browser) on FerryDNS and FerryNet;
/// - storage: SQLite → FerryStore, which knows no transport;
/// - FerrySync (replication) on FerryBLIP and FerryStore;
/// - FerryServer (the daemon: REST, access control, peers) on FerrySync, FerryStore, FerryHTTP
///   and FerryDiscovery; the executables on top.
/// Linux only: the event loop is epoll and eventfd, so no Apple platform is declared.
let package = Package(
    name: "Ferry",
    products: [
        .library(name: "FerryNet", targets: ["FerryNet"]),
        .library(name: "FerryWebSocket", targets: ["FerryWebSocket"]),
        .library(name: "FerryBLIP", targets: ["FerryBLIP"]),
        .library(name: "FerryHTTP", targets: ["FerryHTTP"]),
        .library(name: "FerryDNS", targets: ["FerryDNS"]),
        .library(name: "FerryDiscovery", targets: ["FerryDiscovery"]),
        .library(name: "FerryStore", targets: ["FerryStore"]),
        .library(name: "FerrySync", targets: ["FerrySync"]),
        .library(name: "FerryServer", targets: ["FerryServer"]),
        .executable(name: "ferry", targets: ["ferry"]),
        .executable(name: "ferry-echo", targets: ["ferry-echo"]),
        .executable(name: "ferry-bench", targets: ["ferry-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The daemon's /_metrics: swift-metrics is the server ecosystem's metrics API, and
        // swift-prometheus its Prometheus backend (text exposition format).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `ferry serve`: start-up and graceful shutdown on SIGTERM/SIGINT (ServiceGroup).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The DocC catalogs (Sources/*/*.docc): `swift package generate-documentation`; scripts/test builds them.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // System libraries the user chose, found with pkg-config.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        // The executables' allocator (not the libraries': an embedding app keeps its own).
        .systemLibrary(name: "CJemalloc", pkgConfig: "jemalloc",
                       providers: [.apt(["libjemalloc-dev"])]),
        // What Swift cannot import directly: packed epoll structs, eventfd, getrandom, masking.
        .target(name: "CFerrySystem"),
        .target(name: "FerryNet",
                dependencies: ["CFerrySystem", "COpenSSL", .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryWebSocket",
                dependencies: ["FerryHTTP", "FerryNet", "CFerrySystem", "COpenSSL", "CZlib",
                               .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryBLIP",
                dependencies: ["FerryWebSocket", "FerryNet", "CFerrySystem", "CZlib",
                               .product(name: "Logging", package: "swift-log")]),
        .executableTarget(name: "ferry-echo",
                          dependencies: ["FerryWebSocket", "FerryNet", "FerryBLIP", "CZlib",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")]),
        // HTTP/1.1 (Protocol/http.md): request and response codecs for both directions,
        // sans-I/O; gzip; and the one HTTP client (keep-alive pool, TLS through FerryNet).
        .target(name: "FerryHTTP", dependencies: ["FerryNet", "CZlib"]),
        // DNS messages for Multicast DNS and DNS-SD, sans-I/O (Protocol/dns-sd.md): decoding with
        // every length and pointer checked, encoding with name compression. No dependencies.
        .target(name: "FerryDNS"),
        // Multicast DNS / DNS-SD on the event loop (Protocol/dns-sd.md): a sans-I/O responder
        // and browser, and the agent that moves their packets over UDP port 5353.
        .target(name: "FerryDiscovery",
                dependencies: ["FerryDNS", "FerryNet", "CFerrySystem", .product(name: "Logging", package: "swift-log")]),
        // The document store: SQLite (C API), revision trees, conflicts, validation. No transport.
        // Mango's string order is ICU's root collation, as CouchDB's: the ICU that ships in
        // every Swift toolchain for Foundation (_FoundationICU), so no other library is needed.
        .target(name: "FerryStore",
                dependencies: ["CSQLite", "COpenSSL", "CFerrySystem", .product(name: "Logging", package: "swift-log")],
                linkerSettings: [.linkedLibrary("_FoundationICU")]),
        // Replication: the Couchbase Mobile protocol on BLIP between two stores.
        .target(name: "FerrySync",
                dependencies: ["FerryBLIP", "FerryWebSocket", "FerryHTTP", "FerryNet", "FerryStore", "COpenSSL",
                               .product(name: "Logging", package: "swift-log")]),
        // The daemon's parts (issue 19, growing): database names in a data directory, stored
        // passwords; REST, access control and metrics come here.
        .target(name: "FerryServer",
                dependencies: ["FerrySync", "FerryStore", "FerryHTTP", "FerryWebSocket", "FerryNet", "FerryDiscovery", "FerryDNS", "COpenSSL", "CZlib", "CFerrySystem",
                               .product(name: "Logging", package: "swift-log"),
                               .product(name: "CoreMetrics", package: "swift-metrics"),
                               .product(name: "Prometheus", package: "swift-prometheus")],
                // The web console's files, compiled in (`PackageResources`): no runtime files.
                resources: [.embedInCode("Console/Assets")]),
        // ICU's data cut to what collation and regular expressions read (scripts/icu-data): the
        // executable links it under ICU's own symbol instead of the toolchain's 34 MB file.
        // Libraries leave ICU's data to the app.
        .target(name: "CFerryICUData", exclude: ["data"], cSettings: [.headerSearchPath("data")]),
        // The peer process: serve, sync, put/get/delete/ls.
        .executableTarget(name: "ferry",
                          dependencies: ["FerryServer", "FerrySync", "FerryStore", "FerryHTTP", "FerryNet", "FerryDiscovery", "CJemalloc", "CFerryICUData",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log"),
                                         .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
        // The cluster harness's library client (Tests/Cluster): Ferry embedded, writes from stdin.
        .executableTarget(name: "ferry-cluster-client",
                          dependencies: ["FerrySync", "FerryStore",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Tests/Cluster/Client"),
        // A child process for the durability test: commits batches and reports each one.
        .executableTarget(name: "ferry-store-writer", dependencies: ["FerryStore"]),
        // Side-by-side measurements: `swift run -c release ferry-bench …` (docs/performance.md).
        .executableTarget(name: "ferry-bench",
                          dependencies: ["FerryBLIP", "FerryWebSocket", "FerryHTTP", "FerryNet", "FerryStore", "FerrySync", "CSQLite", "CFerrySystem", "CJemalloc",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        // A runnable example of FerryBLIP used alone (docs/transport.md); CI builds and runs it.
        .executableTarget(name: "blip-rpc-example", dependencies: ["FerryBLIP", "FerryNet"],
                          path: "Examples/BLIPRPC"),
        // A runnable wss:// server and client (TLS options), docs/transport.md; CI runs it.
        .executableTarget(name: "wss-echo-example", dependencies: ["FerryWebSocket", "FerryNet"],
                          path: "Examples/WSSEcho"),
        // Helpers shared by the test targets (package root, hex golden vectors).
        .target(name: "FerryTestSupport", dependencies: ["COpenSSL"], path: "Tests/FerryTestSupport"),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryStore", "CSQLite", "CFerrySystem", "ferry-store-writer", "FerryTestSupport"]),
        .testTarget(name: "FerryNetTests", dependencies: ["FerryNet", "FerryTestSupport"]),
        .testTarget(name: "FerryHTTPTests", dependencies: ["FerryHTTP", "FerryNet", "FerryTestSupport"]),
        .testTarget(name: "FerryDNSTests", dependencies: ["FerryDNS", "FerryTestSupport"]),
        .testTarget(name: "FerryDiscoveryTests", dependencies: ["FerryDiscovery", "FerryDNS", "FerryNet", "FerryTestSupport"]),
        .testTarget(name: "FerryServerTests", dependencies: ["FerryServer", "FerryStore", "FerrySync", "FerryBLIP", "FerryWebSocket", "FerryTestSupport", "ferry"]),
        .testTarget(name: "FerrySyncTests", dependencies: ["FerrySync", "FerryStore", "FerryBLIP", "FerryWebSocket", "FerryTestSupport", "ferry", "ferry-bench"]),
        .testTarget(name: "FerryBLIPTests", dependencies: ["FerryBLIP", "FerryWebSocket", "FerryNet", "FerryTestSupport"],
                    exclude: ["Interop"]),
        .testTarget(name: "FerryWebSocketTests",
                    dependencies: ["FerryWebSocket", "FerryNet", "FerryTestSupport"],
                    exclude: ["Interop"]),
    ],
    swiftLanguageModes: [.v6]
)
