// ferry-store-writer <database path> <batch size> [durability normal|full]
//
// The child process of the durability test: commits batches of documents forever (until it is
// killed) and prints "committed <batch>" after each commit returns. Every batch it reported
// must be in the database after a SIGKILL, and no batch may be half there.
import FerryStore
import Foundation

let args = CommandLine.arguments
guard args.count >= 3, let batchSize = Int(args[2]), batchSize > 0 else {
    FileHandle.standardError.write(Data("usage: ferry-store-writer <path> <batch size> [normal|full]\n".utf8))
    exit(2)
}
var options = DatabaseOptions()
if args.count > 3, args[3] == "full" { options.durability = .full }
do {
    let db = try Database.open(at: args[1], options: options)
    let padding = JSONValue.string(String(repeating: "p", count: 400))
    var batch = 0
    while true {
        let n = batch
        try db.inBatch { (b) throws(StoreError) in
            for i in 0..<batchSize {
                try b.save(Document(id: "b\(n)-\(i)", properties: ["batch": .int(Int64(n)), "i": .int(Int64(i)), "pad": padding]))
            }
        }
        // Reported only after the commit returned.
        FileHandle.standardOutput.write(Data("committed \(n)\n".utf8))
        batch += 1
    }
} catch {
    FileHandle.standardError.write(Data("ferry-store-writer: \(error)\n".utf8))
    exit(1)
}
