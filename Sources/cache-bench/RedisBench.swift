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
/// store and a disk store, and beside the anchor, a raw `GET` of a value of the same size from
/// the same server (`RawRedisClient`), interleaved round by round. Starts its own
/// `redis-server` on an ephemeral port, and skips itself when there is none.
enum RedisBench {
    static let sizes = [(suffix: "", bytes: 1024, requests: 400), (suffix: "_100k", bytes: 100 * 1024, requests: 150)]
    /// "near": a tiered store in front of Redis (its memory a near cache kept coherent by
    /// client-side caching). "hop": a memory store read only on the I/O queue, as any store
    /// that waits on I/O is (`IOQueueOnlyStore`): the hop off the task's work queue and back,
    /// with no I/O, the part of a Redis hit no store can save while that queue never waits.
    static let variants = ["memory", "hop", "disk", "redis", "near"]
    /// Protocols with no cache in them, through URLSession: the floor protocol's canned answer,
    /// and the same with its body read by one `GET` (`RedisFloorProtocol`: "rinline", "rsource",
    /// "rearly").
    static let floors = ["floor", "rinline", "rsource", "rearly"]
    /// What each round measures: the stores through URLSession, the Redis store's own read
    /// ("store": `entry(for:)` called directly, no URLSession), the floors, and the anchor, a raw `GET`.
    static let measured = variants + ["store"] + floors + ["raw"]
    static let hotKeys = 8

    /// One variant alone, for a profiler (`--redis-variant VARIANT BYTES COUNT`): the same
    /// setup and warm-up as the full part, then COUNT sequential requests of that variant.
    struct Only {
        let variant: String
        let bytes: Int
        let count: Int
    }

    /// Prints the table and returns the `ratio.` lines and any problems (requests that failed
    /// or reached the origin); with `only`, runs that variant alone and prints its time. Then
    /// the near cache's invalidation delay: 4 reader processes, `writes` writes.
    static func run(origin: LoopbackOrigin, rounds: Int, only: Only? = nil, writes: Int = 1000) -> (lines: [String], problems: [String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-redis-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // A server of the caller's (for a profiler such as valgrind, under which starting one fails).
        if let given = ProcessInfo.processInfo.environment["CACHE_BENCH_REDIS_PORT"].flatMap(Int.init) {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return measure(origin: origin, rounds: rounds, only: only, writes: writes, port: given, directory: directory)
        }
        guard let executable = findRedisServer() else {
            print("\nredis: skipped (redis-server not found)")
            return ([], [])
        }
        guard let server = try? RedisProcess(executable: executable, directory: directory) else {
            print("\nredis: skipped (redis-server did not start)")
            return ([], [])
        }
        defer { server.stop() }
        return measure(origin: origin, rounds: rounds, only: only, writes: writes, port: server.port, directory: directory)
    }

    private static func measure(origin: LoopbackOrigin, rounds: Int, only: Only?, writes: Int, port: Int,
                                directory: URL) -> (lines: [String], problems: [String]) {
        do {
            let setup = try Setup(origin: origin, port: port, directory: directory)
            defer { setup.close() }
            var problems = warm(setup.sessions, redis: setup.redis, origin: origin)
            setup.watch.measuring.store(true, ordering: .relaxed)
            defer { setup.watch.measuring.store(false, ordering: .relaxed) }
            if let only {
                let start = now()
                for i in 0..<only.count where read(setup, only.variant, only.bytes, i) != only.bytes {
                    problems.append("redis bench \(only.variant) \(only.bytes): a request failed")
                }
                print("\(only.variant) \(only.bytes): \(formatMicros((now() - start) / Double(max(1, only.count)))) µs per request")
                return ([], problems + setup.watch.unexpected.withLock { Array($0) })
            }
            let samples = sample(setup, rounds: rounds, problems: &problems)
            var result = report(samples, rounds: rounds, problems: problems + setup.watch.unexpected.withLock { Array($0) })
            let delay = try NearBench.invalidationLatency(store: String(port), processes: 4, writes: writes)
            print("near cache: a replaced entry left 4 other processes' memory \(String(format: "%.2f", delay.p50)) ms after its write " +
                  "returned (median), \(String(format: "%.2f", delay.p99)) ms (99th percentile of \(writes) writes x 4 processes)")
            result.lines.append("redis.invalidation_p50_ms=\(String(format: "%.2f", delay.p50))")
            result.lines.append("redis.invalidation_p99_ms=\(String(format: "%.2f", delay.p99))")
            return result
        } catch {
            return ([], ["redis: \(error)"])
        }
    }

    /// The stores, their sessions and the raw client, with the origin's bodies routed and the
    /// raw values written.
    private final class Setup {
        let origin: LoopbackOrigin
        let redis: RedisResponseStore
        let disk: DiskResponseStore
        let raw: RawRedisClient
        var sessions: [String: URLSession] = [:]
        let watch = Watch()
        var observations: [CacheObservation] = []

        init(origin: LoopbackOrigin, port: Int, directory: URL) throws {
            self.origin = origin
            let windows = CacheWindows(fresh: 3600, usable: 7200)
            // A prefix of this run's own, so a server of the caller's may hold earlier runs' keys.
            let prefix = "bench-\(UUID().uuidString.prefix(8)):"
            redis = try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: port, keyPrefix: prefix))
            disk = try DiskResponseStore(directory: directory.appendingPathComponent("disk"), byteLimit: 1 << 30)
            let nearBack = RedisConfiguration(host: "127.0.0.1", port: port, keyPrefix: "bench-near-\(prefix)")
            let near = TieredResponseStore(memory: try MemoryResponseStore(byteLimit: 256 << 20),
                                           back: try RedisResponseStore(configuration: nearBack))
            let tracking = now() + 10
            while !near.servesFromMemory && now() < tracking { usleep(1000) } // the invalidation connection is tracking
            let stores: [String: any ResponseStore] = ["memory": try MemoryResponseStore(byteLimit: 256 << 20), "disk": disk,
                                                       "hop": IOQueueOnlyStore(try MemoryResponseStore(byteLimit: 256 << 20)),
                                                       "redis": redis, "near": near]
            for (name, store) in stores {
                let cache = HTTPCache(configuration: CacheConfiguration(windows: windows), store: store)
                observations.append(cache.observe { [watch] event in
                    guard watch.measuring.load(ordering: .relaxed) else { return }
                    guard event.kind != .served(.fresh), event.kind != .stored else { return }
                    watch.unexpected.withLock { _ = $0.insert("redis bench \(name): \(event.kind)") }
                })
                let configuration = URLSessionConfiguration.ephemeral
                configuration.enableHTTPCaching(cache)
                sessions[name] = URLSession(configuration: configuration)
            }
            RedisBench.routeBodies(on: origin)
            raw = try RawRedisClient(port: port, prefix: prefix)
            RedisFloorProtocol.link = try RedisFloorLink(port: port, prefix: prefix)
            for name in RedisBench.floors {
                let configuration = URLSessionConfiguration.ephemeral
                configuration.protocolClasses = [name == "floor" ? FloorProtocol.self : RedisFloorProtocol.self] + (configuration.protocolClasses ?? [])
                sessions[name] = URLSession(configuration: configuration)
            }
            for size in RedisBench.sizes {
                for k in 0..<RedisBench.hotKeys { try raw.set(RedisBench.rawKey(size.bytes, k), RedisBench.body(size.bytes)) }
            }
        }

        func close() {
            RedisFloorProtocol.link?.close()
            RedisFloorProtocol.link = nil
            observations.forEach { $0.cancel() }
            for session in sessions.values { session.finishTasksAndInvalidate() }
            disk.close()
        }
    }

    /// Anything but a fresh hit while measuring is reported with its reason.
    private final class Watch: Sendable {
        let measuring = Atomic<Bool>(false)
        let unexpected = Mutex<Set<String>>([])
    }

    /// Request `i` of a variant and size: through the variant's session, or the raw `GET`.
    /// - Returns: the body's length, -1 on failure.
    private static func read(_ setup: Setup, _ variant: String, _ bytes: Int, _ i: Int) -> Int {
        if variant == "raw" { return (try? setup.raw.get(rawKey(bytes, i))) ?? -1 }
        if variant == "store" { return (try? setup.redis.entry(for: storeKey(setup.origin, bytes, i)))??.body.count ?? -1 }
        guard let session = setup.sessions[variant] else { return -1 }
        return get(session, floors.contains(variant) ? floorURL(setup.origin, variant, bytes, i) : url(setup.origin, bytes, i))
    }

    /// Routes a body of each size.
    static func routeBodies(on origin: LoopbackOrigin) {
        for size in sizes {
            origin.route("/redis-bench/\(size.bytes)", response: .init(headers: [("Content-Type", "application/octet-stream")],
                                                                        body: Data(body(size.bytes))))
            FloorProtocol.bodies["/redis-bench/\(size.bytes)"] = Data(body(size.bytes))
        }
    }

    /// The body of a size the origin serves, and the raw `GET` reads.
    static func body(_ bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 13) }
    }

    /// The key of the raw `GET`'s value `i` (modulo `hotKeys`) of a size.
    static func rawKey(_ size: Int, _ i: Int) -> String {
        "raw:\(size):\(i % hotKeys)"
    }

    /// The key the Redis store keeps hot key `i` (modulo `hotKeys`) of a size under.
    private static func storeKey(_ origin: LoopbackOrigin, _ size: Int, _ i: Int) -> CacheKey {
        CacheKey(url: url(origin, size, i))
    }

    /// The URL a floor variant asks for hot key `i` of a size: the floor protocol's body by its
    /// path, or, for a Redis floor, the raw key as the last path component (no origin answers).
    private static func floorURL(_ origin: LoopbackOrigin, _ variant: String, _ size: Int, _ i: Int) -> URL {
        variant == "floor" ? url(origin, size, i) : origin.url("/\(variant)/\(rawKey(size, i))")
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
        for size in sizes {
            for variant in floors {
                for k in 0..<hotKeys where get(sessions[variant]!, floorURL(origin, variant, size.bytes, k)) != size.bytes {
                    problems.append("redis bench \(variant) \(size.bytes): a warm-up request failed")
                }
            }
        }
        let warmDeadline = now() + 10
        while redis.entryCount < sizes.count * hotKeys && now() < warmDeadline { _ = get(sessions["redis"]!, url(origin, 1024, 0)) }
        return problems
    }

    /// The measured rounds: every size through every store and the raw `GET`, in a new order
    /// each round.
    /// - Returns: seconds per request, by size suffix and variant, one sample per round.
    private static func sample(_ setup: Setup, rounds: Int, problems: inout [String]) -> [String: [String: [Double]]] {
        var samples: [String: [String: [Double]]] = [:]
        for _ in 0..<rounds {
            for size in sizes {
                for variant in measured.shuffled() {
                    let before = setup.origin.requestCount()
                    let start = now()
                    for i in 0..<size.requests where read(setup, variant, size.bytes, i) != size.bytes {
                        problems.append("redis bench \(variant) \(size.bytes): a request failed")
                    }
                    samples[size.suffix, default: [:]][variant, default: []].append((now() - start) / Double(size.requests))
                    let touched = setup.origin.requestCount() - before
                    if touched > 0 { problems.append("redis bench \(variant) \(size.bytes): reached the origin \(touched) times") }
                }
            }
        }
        return samples
    }

    /// Prints the table and any problems.
    /// - Returns: the `ratio.` lines, and the problems, each once.
    private static func report(_ samples: [String: [String: [Double]]], rounds: Int, problems: [String]) -> (lines: [String], problems: [String]) {
        print("\nfresh hits by store, microseconds per request (median of \(rounds) interleaved rounds; sequential requests;")
        print("raw: a GET of a value of the body's size on one blocking socket, the anchor)")
        print("body     " + measured.map { $0.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined() + "redis-memory")
        var lines: [String] = []
        for size in sizes {
            let m = (samples[size.suffix] ?? [:]).mapValues(median)
            let label = size.bytes >= 100 * 1024 ? "100 KB" : "1 KB"
            let memory = m["memory"] ?? .nan
            let rawGet = m["raw"] ?? .nan
            let added = (m["redis"] ?? .nan) - memory
            print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + measured.map { formatMicros(m[$0] ?? .nan) + " " }.joined()
                  + formatMicros(added))
            lines.append("redis.raw_get_us\(size.suffix)=\(String(format: "%.1f", rawGet * 1e6))")
            lines.append("ratio.redis_hit_minus_memory_over_raw_get\(size.suffix)=\(formatRatio(added / rawGet))")
            lines.append("ratio.redis_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["redis"] ?? .nan) / memory))")
            lines.append("ratio.disk_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["disk"] ?? .nan) / memory))")
            lines.append("ratio.near_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["near"] ?? .nan) / memory))")
            // The decomposition of a Redis hit: the store's own read, against the raw GET.
            lines.append("redis.store_read_us\(size.suffix)=\(String(format: "%.1f", (m["store"] ?? .nan) * 1e6))")
            lines.append("ratio.redis_store_read_over_raw_get\(size.suffix)=\(formatRatio((m["store"] ?? .nan) / rawGet))")
            // The rest: the hop to the I/O queue and back (no I/O), and what a Redis hit adds to it.
            let hop = m["hop"] ?? .nan
            lines.append("redis.io_hop_us\(size.suffix)=\(String(format: "%.1f", (hop - memory) * 1e6))")
            lines.append("ratio.io_hop_over_raw_get\(size.suffix)=\(formatRatio((hop - memory) / rawGet))")
            lines.append("ratio.redis_hit_minus_hop_over_raw_get\(size.suffix)=\(formatRatio(((m["redis"] ?? .nan) - hop) / rawGet))")
            // What one GET adds to the floor protocol: read without waiting on Foundation's queue,
            // blocking it, and sent as the protocol is made.
            let floor = m["floor"] ?? .nan
            lines.append("ratio.redis_source_floor_minus_floor_over_raw_get\(size.suffix)=\(formatRatio(((m["rsource"] ?? .nan) - floor) / rawGet))")
            lines.append("ratio.redis_inline_floor_minus_floor_over_raw_get\(size.suffix)=\(formatRatio(((m["rinline"] ?? .nan) - floor) / rawGet))")
            lines.append("ratio.redis_early_floor_minus_floor_over_raw_get\(size.suffix)=\(formatRatio(((m["rearly"] ?? .nan) - floor) / rawGet))")
            lines.append("ratio.redis_hit_minus_memory_over_source_floor\(size.suffix)=\(formatRatio(added / ((m["rsource"] ?? .nan) - floor)))")
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
