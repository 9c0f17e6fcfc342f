import Foundation
import HTTPCaching

/// How soon a near cache (a tiered store in front of Redis, or of a disk store) stops serving an
/// entry another process replaced: one writer (this process) and several readers (copies of
/// this one, `--near-worker PORT|DIRECTORY`), each holding the entry in its memory. For each write the readers
/// say when their copy left memory (the monotonic clock, which every process shares), and the
/// delay after the write returned is sampled (0 when the copy left before it returned).
enum NearBench {
    static let prefix = "bench-invalidation:"
    static let url = URL(string: "http://bench.test/invalidation")!

    /// - Returns: the 50th and 99th percentiles of the delays, in milliseconds.
    /// `store`: a Redis server's port, or a disk store's directory.
    static func invalidationLatency(store: String, processes: Int, writes: Int) throws -> (p50: Double, p99: Double) {
        let writer = try open(store)
        defer { (writer as? DiskResponseStore)?.close() }
        try writer.write(entry(version: 0))
        let children = try (0..<processes).map { _ in try BenchChild(arguments: ["--near-worker", store]) }
        defer { children.forEach { $0.finish() } }
        for child in children where child.line() != "ready" { throw CocoaError(.featureUnsupported) }
        var delays: [Double] = []
        delays.reserveCapacity(writes)
        for version in 1...writes {
            for child in children { child.send("watch \(version - 1)") }
            for child in children where child.line() != "primed" { throw CocoaError(.featureUnsupported) }
            try writer.write(entry(version: version))
            let returned = DispatchTime.now().uptimeNanoseconds
            for child in children {
                guard let line = child.line(), line.hasPrefix("gone "), let gone = UInt64(line.dropFirst(5)) else {
                    throw CocoaError(.featureUnsupported)
                }
                delays.append(gone > returned ? Double(gone - returned) / 1e6 : 0)
            }
        }
        delays.sort()
        return (delays[delays.count / 2], delays[Int(Double(delays.count - 1) * 0.99)])
    }

    static func entry(version: Int) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data(String(version).utf8), storedAt: Date())
    }

    /// A reader: a near cache on the server at `port`; says "ready" once it is tracking, then for
    /// each "watch V" fills memory with version V, says "primed", waits (polling memory every
    /// 100 µs) until that copy is gone, and says "gone <monotonic nanoseconds>".
    static func worker(store: String) throws {
        let tiered = TieredResponseStore(back: try open(store))
        let key = CacheKey(url: url)
        let deadline = now() + 10
        while !tiered.servesFromMemory && now() < deadline { usleep(1000) }
        say("ready")
        func held(_ version: String) -> Bool {
            guard case .found(let entry) = tiered.immediateEntry(for: key) else { return false }
            return String(decoding: entry.body, as: UTF8.self) == version
        }
        while let line = readLine(), line.hasPrefix("watch ") {
            let version = String(line.dropFirst(6))
            let primeDeadline = now() + 10
            while !held(version) && now() < primeDeadline {
                _ = try? tiered.entry(for: key)
                if !held(version) { usleep(100) }
            }
            say("primed")
            while held(version) { usleep(100) }
            say("gone \(DispatchTime.now().uptimeNanoseconds)")
        }
    }

    /// A Redis store on the port `store` names, else a disk store in the directory.
    private static func open(_ store: String) throws -> any ResponseStore {
        guard let port = Int(store) else { return try DiskResponseStore(directory: URL(fileURLWithPath: store)) }
        return try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: port, keyPrefix: prefix, retryDelay: 0.05))
    }

    private static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
