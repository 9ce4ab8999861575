import FerryTestSupport
import Foundation

/// Runs the built `ferry` with `args`, standard output and error to pipes; both are read
/// to the end (off the cooperative pool, together, so neither pipe fills while the other is read).
func runFerry(_ args: [String]) async throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    let out = Pipe(), err = Pipe()
    p.executableURL = ServeProcess.executable
    p.arguments = args
    p.standardOutput = out
    p.standardError = err
    try p.run()
    async let o = offPool { out.fileHandleForReading.readDataToEndOfFile() }
    async let e = offPool { err.fileHandleForReading.readDataToEndOfFile() }
    let (od, ed) = await (o, e)
    await offPool { p.waitUntilExit() }
    return (p.terminationStatus, String(decoding: od, as: UTF8.self), String(decoding: ed, as: UTF8.self))
}
