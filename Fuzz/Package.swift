// swift-tools-version: 6.1
import Foundation
import PackageDescription

// The main package is the folder above; SwiftPM names a path dependency after its folder, which
// differs between checkouts (CI clones into a folder of its own), so the name is computed.
let ferry = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent.lowercased()

// libFuzzer targets, kept out of the main package so normal builds never need the sanitizer.
// Build: swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
// (see docs/fuzzing.md).
let package = Package(
    name: "FerryFuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzFrameDecoder", dependencies: ["FuzzSupport", .product(name: "FerryWebSocket", package: ferry)]),
        .executableTarget(name: "FuzzHandshake", dependencies: ["FuzzSupport", .product(name: "FerryWebSocket", package: ferry)]),
        .executableTarget(name: "FuzzBLIP", dependencies: ["FuzzSupport", .product(name: "FerryBLIP", package: ferry)]),
        .executableTarget(name: "FuzzHTTP", dependencies: ["FuzzSupport", .product(name: "FerryHTTP", package: ferry)]),
        .executableTarget(name: "FuzzDNS", dependencies: ["FuzzSupport", .product(name: "FerryDNS", package: ferry)]),
        .executableTarget(name: "FuzzREST", dependencies: ["FuzzSupport", .product(name: "FerryServer", package: ferry)]),
        .executableTarget(name: "FuzzReplication", dependencies: ["FuzzSupport", .product(name: "FerrySync", package: ferry),
                                                                  .product(name: "FerryBLIP", package: ferry)]),
    ],
    swiftLanguageModes: [.v6]
)
