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

/// Fresh hits through a caching URLSession whose store is a Redis Cluster, beside the same from
/// one Redis server, from a memory store and from a near cache in front of the cluster,
/// interleaved round by round; then requests per
/// second with 8 callers from one server and from the cluster. Starts its own `redis-server`
/// processes (one alone, and three primaries made a cluster by `redis-cli --cluster create`)
/// on 127.0.0.1, and skips itself when either program is missing.
enum RedisClusterBench {
    static let sizes = [(suffix: "", bytes: 1024, requests: 400), (suffix: "_100k", bytes: 100 * 1024, requests: 150)]
    static let variants = ["memory", "redis", "cluster", "near"]
    /// Enough keys that every primary serves some of them.
    static let hotKeys = 24

    /// Prints the table and returns the `ratio.` and `rps.` lines and any problems (requests
    /// that failed or reached the origin).
    static func run(origin: LoopbackOrigin, rounds: Int, total: Int) -> (lines: [String], problems: [String]) {
        guard let server = find("redis-server"), let cli = find("redis-cli") else {
            print("\nredis cluster: skipped (redis-server or redis-cli not found)")
            return ([], [])
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-cluster-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var nodes: [RedisProcess] = []
        defer { nodes.forEach { $0.stop() } }
        do {
            let ports = benchPortPairs(count: 4)
            nodes.append(try RedisProcess(executable: server, directory: directory.appendingPathComponent("\(ports[0])"), port: ports[0]))
            for port in ports.dropFirst() {
                nodes.append(try RedisProcess(executable: server, directory: directory.appendingPathComponent("\(port)"), port: port, cluster: true))
            }
            try createCluster(cli: cli, ports: Array(ports.dropFirst()), directory: directory)
            let clusterURL = "redis-cluster://" + ports.dropFirst().map { "127.0.0.1:\($0)" }.joined(separator: ",")
            let stores: [String: any ResponseStore] = [
                "memory": try MemoryResponseStore(byteLimit: 256 << 20),
                "redis": try RedisResponseStore(url: "redis://127.0.0.1:\(ports[0])", keyPrefix: "bench:"),
                "cluster": try RedisResponseStore(url: clusterURL, keyPrefix: "bench:"),
                "near": TieredResponseStore(back: try RedisResponseStore(url: clusterURL, keyPrefix: "bench-near:")),
            ]
            return measure(stores, origin: origin, rounds: rounds, total: total)
        } catch {
            return ([], ["redis cluster: \(error)"])
        }
    }

    private static func measure(_ stores: [String: any ResponseStore], origin: LoopbackOrigin, rounds: Int,
                                total: Int) -> (lines: [String], problems: [String]) {
        let measuring = Atomic<Bool>(false)
        let unexpected = Mutex<Set<String>>([])
        var sessions: [String: URLSession] = [:]
        var observations: [CacheObservation] = []
        defer { observations.forEach { $0.cancel() } }
        for (name, store) in stores {
            let cache = HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200)), store: store)
            observations.append(cache.observe { event in
                guard measuring.load(ordering: .relaxed), event.kind != .served(.fresh), event.kind != .stored else { return }
                unexpected.withLock { _ = $0.insert("redis cluster bench \(name): \(event.kind)") }
            })
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            sessions[name] = URLSession(configuration: configuration)
        }
        defer { sessions.values.forEach { $0.finishTasksAndInvalidate() } }
        var problems = warm(sessions, stores: stores, origin: origin)
        measuring.store(true, ordering: .relaxed)
        let samples = sample(sessions, origin: origin, rounds: rounds, problems: &problems)
        let hotURLs = (0..<hotKeys).map { url(origin, 1024, $0) }
        var rps: [String: [Double]] = [:]
        for _ in 0..<3 {
            for variant in ["redis", "cluster"].shuffled() {
                rps[variant, default: []].append(requestsPerSecond(sessions[variant]!, urls: hotURLs, callers: 8, total: total))
            }
        }
        measuring.store(false, ordering: .relaxed)
        problems += unexpected.withLock { $0 }
        return report(samples, rps: rps.mapValues(median), rounds: rounds, problems: problems)
    }

    /// The URL of hot key `i` (modulo `hotKeys`) of a size.
    private static func url(_ origin: LoopbackOrigin, _ size: Int, _ i: Int) -> URL {
        origin.url("/cluster-bench/\(size)?k=\(i % hotKeys)")
    }

    /// Routes the bodies, sends one miss per hot key through each store, then waits until the
    /// Redis stores hold them all (a write may land just after its response is delivered).
    private static func warm(_ sessions: [String: URLSession], stores: [String: any ResponseStore], origin: LoopbackOrigin) -> [String] {
        var problems: [String] = []
        for size in sizes {
            origin.route("/cluster-bench/\(size.bytes)", response: .init(headers: [("Content-Type", "application/octet-stream")],
                                                                          body: Data((0..<size.bytes).map { UInt8(truncatingIfNeeded: $0 &* 7) })))
            for variant in variants {
                for k in 0..<hotKeys where get(sessions[variant]!, url(origin, size.bytes, k)) != size.bytes {
                    problems.append("redis cluster bench \(variant) \(size.bytes): a warm-up request failed")
                }
            }
        }
        let deadline = now() + 10
        for name in ["redis", "cluster", "near"] {
            while stores[name]!.entryCount < sizes.count * hotKeys && now() < deadline { usleep(10_000) } // waiting on writes
        }
        let near = stores["near"] as! TieredResponseStore
        while !near.servesFromMemory && now() < deadline { usleep(10_000) } // waiting on every primary's tracking
        if !near.servesFromMemory { problems.append("redis cluster bench near: memory does not serve") }
        return problems
    }

    /// The measured rounds: every size through every store, in a new order each round.
    /// - Returns: seconds per request, by size suffix and store, one sample per round.
    private static func sample(_ sessions: [String: URLSession], origin: LoopbackOrigin, rounds: Int,
                               problems: inout [String]) -> [String: [String: [Double]]] {
        var samples: [String: [String: [Double]]] = [:]
        for _ in 0..<rounds {
            for size in sizes {
                for variant in variants.shuffled() {
                    let before = origin.requestCount()
                    let start = now()
                    for i in 0..<size.requests where get(sessions[variant]!, url(origin, size.bytes, i)) != size.bytes {
                        problems.append("redis cluster bench \(variant) \(size.bytes): a request failed")
                    }
                    samples[size.suffix, default: [:]][variant, default: []].append((now() - start) / Double(size.requests))
                    let touched = origin.requestCount() - before
                    if touched > 0 { problems.append("redis cluster bench \(variant) \(size.bytes): reached the origin \(touched) times") }
                }
            }
        }
        return samples
    }

    private static func report(_ samples: [String: [String: [Double]]], rps: [String: Double], rounds: Int,
                               problems: [String]) -> (lines: [String], problems: [String]) {
        print("\nfresh hits from a Redis Cluster (3 primaries), one Redis server, memory and a near cache in front of the cluster, microseconds per request "
              + "(median of \(rounds) interleaved rounds; sequential requests)")
        print("body     " + variants.map { $0.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined())
        var lines: [String] = []
        for size in sizes {
            let m = (samples[size.suffix] ?? [:]).mapValues(median)
            let label = size.bytes >= 100 * 1024 ? "100 KB" : "1 KB"
            print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + variants.map { formatMicros(m[$0] ?? .nan) + " " }.joined())
            let cluster = m["cluster"] ?? .nan
            lines.append("ratio.redis_cluster_hit_over_memory_hit\(size.suffix)=\(formatRatio(cluster / (m["memory"] ?? .nan)))")
            lines.append("ratio.redis_cluster_hit_over_redis_hit\(size.suffix)=\(formatRatio(cluster / (m["redis"] ?? .nan)))")
            lines.append("ratio.near_cluster_hit_over_memory_hit\(size.suffix)=\(formatRatio((m["near"] ?? .nan) / (m["memory"] ?? .nan)))")
        }
        let server = rps["redis"] ?? .nan, cluster = rps["cluster"] ?? .nan
        print("concurrent 1 KB hits with 8 callers: \(Int(server))/s from one Redis server, \(Int(cluster))/s from the cluster")
        lines.append("rps.redis_hit_c8=\(Int(server))")
        lines.append("rps.redis_cluster_hit_c8=\(Int(cluster))")
        let unique = Array(Set(problems)).sorted()
        if !unique.isEmpty {
            print("redis cluster bench problems (the numbers above are suspect):")
            for problem in unique { print("  \(problem)") }
        }
        return (lines, unique)
    }

    /// Makes the nodes one cluster of primaries and waits until every node says it is ok.
    private static func createCluster(cli: String, ports: [Int], directory: URL) throws {
        let create = Process()
        create.executableURL = URL(fileURLWithPath: cli)
        create.arguments = ["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" } + ["--cluster-replicas", "0", "--cluster-yes"]
        create.standardOutput = FileHandle.nullDevice
        create.standardError = FileHandle.nullDevice
        try create.run()
        create.waitUntilExit()
        guard create.terminationStatus == 0 else { throw CocoaError(.executableLoad) }
        let deadline = now() + 20
        for port in ports {
            while !(clusterInfo(cli: cli, port: port).contains("cluster_state:ok")) {
                guard now() < deadline else { throw CocoaError(.executableLoad) }
                usleep(20_000) // polling a cluster that is forming
            }
        }
    }

    /// What `redis-cli -p PORT cluster info` prints.
    private static func clusterInfo(cli: String, port: Int) -> String {
        let process = Process()
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: cli)
        process.arguments = ["-h", "127.0.0.1", "-p", "\(port)", "cluster", "info"]
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    private static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// Ports nothing listens on now whose cluster bus ports (port + 10000) are free too, below
/// the kernel's ephemeral range so the bus port stays a valid port.
func benchPortPairs(count: Int) -> [Int] {
    func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
    var chosen: [Int] = []
    while chosen.count < count {
        let port = Int.random(in: 20_000..<30_000)
        if !chosen.contains(port), isFree(port), isFree(port + 10_000) { chosen.append(port) }
    }
    return chosen
}
