// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets, kept out of the main package so normal builds never need the sanitizer.
// Build: swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
// (see docs/fuzzing.md).
let package = Package(
    name: "FerryFuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzFrameDecoder", dependencies: ["FuzzSupport", .product(name: "FerryWebSocket", package: "main")]),
        .executableTarget(name: "FuzzHandshake", dependencies: ["FuzzSupport", .product(name: "FerryWebSocket", package: "main")]),
        .executableTarget(name: "FuzzBLIP", dependencies: ["FuzzSupport", .product(name: "FerryBLIP", package: "main")]),
    ],
    swiftLanguageModes: [.v6]
)
