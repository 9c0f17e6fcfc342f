import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// Fresh hits through a caching URLSession whose store is Redis, beside the same from a memory
/// store and a disk store, interleaved round by round. Starts its own `redis-server` on an
/// ephemeral port, and skips itself when there is none.
enum RedisBench {
    static let sizes = [(suffix: "", bytes: 1024, requests: 400), (suffix: "_100k", bytes: 100 * 1024, requests: 150)]
    /// "near": a tiered store in front of Redis (its memory a near cache kept coherent by
    /// client-side caching).
    static let variants = ["memory", "disk", "redis", "near"]
    static let hotKeys = 8

    /// Prints the table and returns the `ratio.` lines and any problems (requests that failed
    /// or reached the origin).
    /// Then the near cache's invalidation delay: 4 reader processes, `writes` writes.
    static func run(origin: LoopbackOrigin, rounds: Int, writes: Int = 1000) -> (lines: [String], problems: [String]) {
        guard let executable = findRedisServer() else {
            print("\nredis: skipped (redis-server not found)")
            return ([], [])
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-redis-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let server = try? RedisProcess(executable: executable, directory: directory) else {
            print("\nredis: skipped (redis-server did not start)")
            return ([], [])
        }
        defer { server.stop() }
        do {
            var result = try measure(origin: origin, rounds: rounds, port: server.port, directory: directory)
            let delay = try NearBench.invalidationLatency(store: String(server.port), processes: 4, writes: writes)
            print("near cache: a replaced entry left 4 other processes' memory \(String(format: "%.2f", delay.p50)) ms after its write " +
                  "returned (median), \(String(format: "%.2f", delay.p99)) ms (99th percentile of \(writes) writes x 4 processes)")
            result.lines.append("redis.invalidation_p50_ms=\(String(format: "%.2f", delay.p50))")
            result.lines.append("redis.invalidation_p99_ms=\(String(format: "%.2f", delay.p99))")
            return result
        } catch {
            return ([], ["redis: \(error)"])
        }
    }

    private static func measure(origin: LoopbackOrigin, rounds: Int, port: Int, directory: URL) throws -> (lines: [String], problems: [String]) {
        let windows = CacheWindows(fresh: 3600, usable: 7200)
        let redis = try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: port, keyPrefix: "bench:"))
        let disk = try DiskResponseStore(directory: directory.appendingPathComponent("disk"), byteLimit: 1 << 30)
        defer { disk.close() }
        let near = TieredResponseStore(memory: try MemoryResponseStore(byteLimit: 256 << 20),
                                       back: try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: port,
                                                                                                      keyPrefix: "bench-near:")))
        let tracking = now() + 10
        while !near.servesFromMemory && now() < tracking { usleep(1000) } // the invalidation connection is tracking
        let stores: [String: any ResponseStore] = ["memory": try MemoryResponseStore(byteLimit: 256 << 20), "disk": disk, "redis": redis,
                                                   "near": near]
        var sessions: [String: URLSession] = [:]
        // Anything but a fresh hit during the measured rounds is reported with its reason.
        let measuring = Atomic<Bool>(false)
        let unexpected = Mutex<Set<String>>([])
        var observations: [CacheObservation] = []
        defer { observations.forEach { $0.cancel() } }
        for (name, store) in stores {
            let cache = HTTPCache(configuration: CacheConfiguration(windows: windows), store: store)
            observations.append(cache.observe { event in
                guard measuring.load(ordering: .relaxed) else { return }
                guard event.kind != .served(.fresh), event.kind != .stored else { return }
                unexpected.withLock { _ = $0.insert("redis bench \(name): \(event.kind)") }
            })
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            sessions[name] = URLSession(configuration: configuration)
        }
        routeBodies(on: origin)
        var problems = warm(sessions, redis: redis, origin: origin)
        measuring.store(true, ordering: .relaxed)
        let samples = sample(sessions, origin: origin, rounds: rounds, problems: &problems)
        measuring.store(false, ordering: .relaxed)
        problems.append(contentsOf: unexpected.withLock { $0 })
        for session in sessions.values { session.finishTasksAndInvalidate() }
        return report(samples, rounds: rounds, problems: problems)
    }

    /// Routes a body of each size.
    private static func routeBodies(on origin: LoopbackOrigin) {
        for size in sizes {
            origin.route("/redis-bench/\(size.bytes)", response: .init(headers: [("Content-Type", "application/octet-stream")],
                                                                        body: Data((0..<size.bytes).map { UInt8(truncatingIfNeeded: $0 &* 13) })))
        }
    }

    /// The URL of hot key `i` (modulo `hotKeys`) of a size.
    private static func url(_ origin: LoopbackOrigin, _ size: Int, _ i: Int) -> URL {
        origin.url("/redis-bench/\(size)?k=\(i % hotKeys)")
    }

    /// One miss per hot key, then waits until each store answers it (a write may land just
    /// after its response is delivered).
    /// - Returns: the problems met.
    private static func warm(_ sessions: [String: URLSession], redis: RedisResponseStore, origin: LoopbackOrigin) -> [String] {
        var problems: [String] = []
        for size in sizes {
            for variant in variants {
                for k in 0..<hotKeys where get(sessions[variant]!, url(origin, size.bytes, k)) != size.bytes {
                    problems.append("redis bench \(variant) \(size.bytes): a warm-up request failed")
                }
            }
        }
        let warmDeadline = now() + 10
        while redis.entryCount < sizes.count * hotKeys && now() < warmDeadline { _ = get(sessions["redis"]!, url(origin, 1024, 0)) }
        return problems
    }

    /// The measured rounds: every size through every store, the stores in a new order each
    /// round.
    /// - Returns: seconds per request, by size suffix and store, one sample per round.
    private static func sample(_ sessions: [String: URLSession], origin: LoopbackOrigin, rounds: Int,
                               problems: inout [String]) -> [String: [String: [Double]]] {
        var samples: [String: [String: [Double]]] = [:]
        for _ in 0..<rounds {
            for size in sizes {
                for variant in variants.shuffled() {
                    let session = sessions[variant]!
                    let before = origin.requestCount()
                    let start = now()
                    for i in 0..<size.requests where get(session, url(origin, size.bytes, i)) != size.bytes {
                        problems.append("redis bench \(variant) \(size.bytes): a request failed")
                    }
                    samples[size.suffix, default: [:]][variant, default: []].append((now() - start) / Double(size.requests))
                    let touched = origin.requestCount() - before
                    if touched > 0 { problems.append("redis bench \(variant) \(size.bytes): reached the origin \(touched) times") }
                }
            }
        }
        return samples
    }

    /// Prints the table and any problems.
    /// - Returns: the `ratio.` lines, and the problems, each once.
    private static func report(_ samples: [String: [String: [Double]]], rounds: Int, problems: [String]) -> (lines: [String], problems: [String]) {
        print("\nfresh hits by store, microseconds per request (median of \(rounds) interleaved rounds; sequential requests)")
        print("body     " + variants.map { $0.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined())
        var lines: [String] = []
        for size in sizes {
            let m = (samples[size.suffix] ?? [:]).mapValues(median)
            let label = size.bytes >= 100 * 1024 ? "100 KB" : "1 KB"
            print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + variants.map { formatMicros(m[$0] ?? .nan) + " " }.joined())
            let memory = m["memory"] ?? .nan
            lines.append("ratio.redis_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["redis"] ?? .nan) / memory))")
            lines.append("ratio.disk_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["disk"] ?? .nan) / memory))")
            lines.append("ratio.near_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["near"] ?? .nan) / memory))")
        }
        let unique = Array(Set(problems)).sorted()
        if !unique.isEmpty {
            print("redis bench problems (the numbers above are suspect):")
            for problem in unique { print("  \(problem)") }
        }
        return (lines, unique)
    }

    private static func findRedisServer() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/redis-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// A `redis-server` of the bench's own: 127.0.0.1, an ephemeral port, no persistence, killed
/// at the end (it holds nothing worth keeping).
private final class RedisProcess {
    let port: Int
    private let process = Process()

    init(executable: String, directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = freePort()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", directory.path, "--save", "", "--appendonly", "no",
                             "--logfile", directory.appendingPathComponent("redis.log").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let store = try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: port, retryDelay: 0))
        let deadline = now() + 10
        while (try? store.ping()) == nil {
            guard now() < deadline, process.isRunning else {
                stop()
                throw CocoaError(.executableLoad)
            }
            usleep(10_000) // polling a server that is starting
        }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A port nothing listens on now: bound to port 0, read back, closed.
private func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
