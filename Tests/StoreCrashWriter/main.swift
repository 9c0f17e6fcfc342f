// Run by the tests and killed with SIGKILL at random moments: opens a disk store and
// writes entries in a loop forever. Every body is derived from the sequence number in the
// entry's X-Seq header, so a reader can check that any entry it finds is whole and correct.
import Foundation
import HTTPCaching

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: store-crash-writer DIRECTORY\n".utf8))
    exit(2)
}
let store = try DiskResponseStore(directory: URL(fileURLWithPath: CommandLine.arguments[1]),
                                  byteLimit: 8 << 20, countLimit: 40)
FileHandle.standardOutput.write(Data("ready\n".utf8))
var sequence = Int.random(in: 0..<1_000_000)
while true {
    sequence += 1
    let url = URL(string: "http://crash.test/item/\(sequence % 60)")!
    let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200,
                           headers: ["X-Seq": String(sequence)], body: CrashBody.body(for: sequence),
                           storedAt: Date(timeIntervalSince1970: Double(sequence)))
    try store.write(entry)
    if sequence % 3 == 0 { _ = try store.entry(for: CacheKey(url: URL(string: "http://crash.test/item/\(sequence % 7)")!)) }
    if sequence % 97 == 0 { try store.removeEntry(for: entry.key) }
}

enum CrashBody {
    /// 1 to 200 KB of bytes that depend on every bit of the sequence number.
    static func body(for sequence: Int) -> Data {
        let count = 1024 + (sequence * 7919) % (200 * 1024)
        var generator = UInt64(truncatingIfNeeded: sequence) &* 0x9E37_79B9_7F4A_7C15
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            generator ^= generator << 13; generator ^= generator >> 7; generator ^= generator << 17
            bytes[i] = UInt8(truncatingIfNeeded: generator)
        }
        return Data(bytes)
    }
}
