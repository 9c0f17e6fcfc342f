// Run by the tests as several processes sharing one disk store directory.
//
//   store-stress-worker stress DIRECTORY SEED OPERATIONS
//       Mixed writes, reads, removals, rare remove-alls and claims on 48 shared keys. Every
//       body is derived from its key and the version in its X-Version header, so any reader
//       can check that an entry is whole and correct; a wrong one exits with status 3.
//       Prints "progress N" every 100 operations and "done" at the end. 0 operations: run
//       until killed.
//   store-stress-worker claim DIRECTORY PATH LEASE
//       Claims the refresh of PATH, prints "granted" or "refused", then on each "release"
//       line releases it and prints "released"; exits at the end of its input.
//   store-stress-worker secret DIRECTORY
//       Waits for a line on its input, opens the store, prints its partition secret in hex.
//   store-stress-worker fill STORE URL CALLERS
//       CALLERS concurrent GETs of URL through a cache over STORE (a directory or a redis://
//       URL): one process of a fleet sharing a store (see SharedFill.swift).
//   store-stress-worker near STORE RETRYDELAY
//       A tiered store in front of STORE, driven by lines on its input (see NearCache.swift).
import Foundation
import HTTPCaching
import HTTPCachingTestKit

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: store-stress-worker stress|claim|secret DIRECTORY ...\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: arguments[2])

@Sendable func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

switch arguments[1] {
case "stress" where arguments.count == 5:
    guard let seed = UInt64(arguments[3]), let operations = Int(arguments[4]) else { exit(2) }
    var stress = try Stress(directory: directory, seed: seed)
    try stress.run(operations: operations)
    say("done")
case "claim" where arguments.count == 5:
    let store = try DiskResponseStore(directory: directory)
    let key = StressBody.key(arguments[3])
    say(store.claimRefresh(of: key, lease: TimeInterval(arguments[4]) ?? 30) ? "granted" : "refused")
    while let line = readLine() {
        if line == "release" {
            store.releaseRefresh(of: key)
            say("released")
        }
    }
case "secret" where arguments.count == 3:
    _ = readLine()
    let store = try DiskResponseStore(directory: directory)
    say(store.partitionSecret().map { String(format: "%02x", $0) }.joined())
case "fill" where arguments.count == 5:
    guard let url = URL(string: arguments[3]), let callers = Int(arguments[4]) else { exit(2) }
    try SharedFill.run(store: arguments[2], url: url, callers: callers)
case "near" where arguments.count == 4:
    try NearCache.run(store: arguments[2], retryDelay: TimeInterval(arguments[3]) ?? 1)
default:
    exit(2)
}

/// The stress loop of one process.
struct Stress {
    static let byteLimit = 400_000
    static let countLimit = 30
    static let keys = 48

    let store: DiskResponseStore
    var random: SeededGenerator

    init(directory: URL, seed: UInt64) throws {
        store = try DiskResponseStore(directory: directory, byteLimit: Self.byteLimit, countLimit: Self.countLimit)
        random = SeededGenerator(seed: seed)
    }

    mutating func run(operations: Int) throws {
        var operation = 0
        while operations == 0 || operation < operations {
            operation += 1
            let path = "/k/\(random.next() % UInt64(Self.keys))"
            let key = StressBody.key(path)
            let roll = random.next() % 1000
            switch roll {
            case 0..<450:
                let version = random.next()
                try store.write(StressBody.entry(path, version: version))
            case 450..<850:
                if let entry = try? store.entry(for: key) {
                    guard StressBody.isWhole(entry, path: path) else {
                        FileHandle.standardError.write(Data("wrong entry for \(path): \(entry)\n".utf8))
                        exit(3)
                    }
                }
            case 850..<950:
                try store.removeEntry(for: key)
            case 950..<955:
                try store.removeAll(progress: { _ in })
            case 955..<975:
                if store.claimRefresh(of: key, lease: 5) { store.releaseRefresh(of: key) }
            default:
                _ = store.entryCount
            }
            if operation % 100 == 0 { say("progress \(operation)") }
        }
        store.close()
    }
}

/// Entries whose bodies any reader can check.
enum StressBody {
    static func key(_ path: String) -> CacheKey {
        CacheKey(url: URL(string: "http://stress.test\(path)")!)
    }

    static func entry(_ path: String, version: UInt64) -> CacheEntry {
        let url = URL(string: "http://stress.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200,
                          headers: ["X-Version": String(version), "X-Path": path],
                          body: body(path, version: version), storedAt: Date(timeIntervalSince1970: 1_700_000_000))
    }

    /// 100 bytes to 20 KB that depend on every bit of the path and the version.
    static func body(_ path: String, version: UInt64) -> Data {
        var state = version ^ 0x9E37_79B9_7F4A_7C15
        for byte in path.utf8 { state = (state ^ UInt64(byte)) &* 0x100_0000_01B3 }
        var generator = SeededGenerator(seed: state)
        let count = 100 + Int(generator.next() % 20_000)
        var bytes = [UInt8](repeating: 0, count: count)
        var word: UInt64 = 0
        for i in 0..<count {
            if i % 8 == 0 { word = generator.next() }
            bytes[i] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(i % 8)))
        }
        return Data(bytes)
    }

    /// Whether an entry read for `path` is the one some writer wrote, whole.
    static func isWhole(_ entry: CacheEntry, path: String) -> Bool {
        guard entry.key == key(path), entry.headers["X-Path"] == path,
              let version = entry.headers["X-Version"].flatMap(UInt64.init) else { return false }
        return entry.body == body(path, version: version)
    }
}

