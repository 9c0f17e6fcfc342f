// cache-bench: how close the cache is to the limit, measured side by side in one run.
// `swift run -c release cache-bench [--quick] [--disk-hits-only] [--redis-only] [--redis-cluster-only] [--near-disk-only]
// [--redis-variant V B N] [--statistics-only] [--http-only] [--concurrency-only ROUNDS]` (`--redis-only` includes the near cache: its hits and its invalidation delay). Times are
// medians of interleaved rounds.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

let arguments = CommandLine.arguments
let quick = arguments.contains("--quick")

// `--open-only COUNT`: time opening a disk store of COUNT small entries, for a profiler.
if let index = arguments.firstIndex(of: "--open-only"), arguments.count > index + 1, let count = Int(arguments[index + 1]) {
    let disk = DiskBench(rounds: 1)
    let result = try disk.openTime(count: count)
    disk.cleanUp() // exit() skips defer in top-level code
    print("open \(count): \(String(format: "%.1f", result.openMillis)) ms")
    exit(0)
}

// `--disk-only BYTES OPERATIONS`: the disk store against plain files for one size, for a profiler.
if let index = arguments.firstIndex(of: "--disk-only"), arguments.count > index + 2,
   let bytes = Int(arguments[index + 1]), let operations = Int(arguments[index + 2]) {
    let disk = DiskBench(rounds: 3)
    let result = try disk.readWrite(bytes: bytes, operations: operations)
    disk.cleanUp()
    for (name, seconds) in result.sorted(by: { $0.key < $1.key }) { print("\(name): \(formatMicros(seconds)) µs") }
    exit(0)
}

// `--shared-reader DIRECTORY SECONDS`: the second process of the shared-directory read benchmark.
if let index = arguments.firstIndex(of: "--shared-reader"), arguments.count > index + 2, let seconds = Double(arguments[index + 2]) {
    try DiskBench.sharedReader(location: arguments[index + 1], seconds: seconds)
    exit(0)
}

// `--disk-shared-only SECONDS`: two processes reading one store directory at once.
if let index = arguments.firstIndex(of: "--disk-shared-only"), arguments.count > index + 1, let seconds = Double(arguments[index + 1]) {
    let disk = DiskBench(rounds: 1)
    let result = try disk.sharedHits(seconds: seconds)
    disk.cleanUp()
    print("rps.shared_disk_hit_2proc=\(Int(result))")
    exit(0)
}

// `--fill-worker DIRECTORY URL CALLERS`: one process of the fleet misses benchmark.
if let index = arguments.firstIndex(of: "--fill-worker"), arguments.count > index + 3,
   let url = URL(string: arguments[index + 2]), let callers = Int(arguments[index + 3]) {
    try FleetBench.worker(directory: arguments[index + 1], url: url, callers: callers)
    exit(0)
}

// `--near-worker PORT|DIRECTORY`: one reader process of the near cache's invalidation benchmark.
if let index = arguments.firstIndex(of: "--near-worker"), arguments.count > index + 1 {
    try NearBench.worker(store: arguments[index + 1])
    exit(0)
}

// `--near-disk-only`: how soon a tiered store in front of a shared disk store drops a replaced entry.
if arguments.contains("--near-disk-only") {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-near-\(UUID().uuidString)")
    let delay = try NearBench.invalidationLatency(store: directory.path, processes: 4, writes: quick ? 200 : 1000)
    try? FileManager.default.removeItem(at: directory)
    print("disk.invalidation_p50_ms=\(String(format: "%.2f", delay.p50))\ndisk.invalidation_p99_ms=\(String(format: "%.2f", delay.p99))")
    exit(0)
}

// `--disk-reads-only BYTES OPERATIONS`: store reads, then plain-file reads, nothing else, for a profiler.
if let index = arguments.firstIndex(of: "--disk-reads-only"), arguments.count > index + 2,
   let bytes = Int(arguments[index + 1]), let operations = Int(arguments[index + 2]) {
    let disk = DiskBench(rounds: 1)
    let result = try disk.reads(bytes: bytes, operations: operations)
    disk.cleanUp()
    print("store_read: \(formatMicros(result.store)) µs\nstore_read_in_place: \(formatMicros(result.inPlace)) µs\nfile_read: \(formatMicros(result.file)) µs")
    exit(0)
}

// `--only VARIANT BYTES COUNT`: run one variant alone, for a profiler (callgrind, perf).
if let index = arguments.firstIndex(of: "--only"), arguments.count > index + 3,
   let bytes = Int(arguments[index + 2]), let count = Int(arguments[index + 3]),
   let size = HTTPBench.sizes.first(where: { $0.bytes == bytes }) {
    let origin = try LoopbackOrigin()
    let bench = HTTPBench(origin: origin, rounds: 1)
    let variant = arguments[index + 1]
    var unique = 0
    let urls = bench.urls(variant, size, count: count, unique: &unique)
    for url in urls.prefix(HTTPBench.hotKeys) { get(bench.session(variant), url) } // warm
    let start = now()
    for url in urls { get(bench.session(variant), url, keeping: bench.keeper(for: variant)) }
    print("\(variant) \(bytes): \(formatMicros((now() - start) / Double(count))) µs per request")
    exit(0)
}
// `--store-hits-only memory|disk|disk-io|tiered BYTES COUNT`: fresh hits from one store alone, for a profiler.
if let index = arguments.firstIndex(of: "--store-hits-only"), arguments.count > index + 3,
   let bytes = Int(arguments[index + 2]), let count = Int(arguments[index + 3]),
   let result = try StoreHitBench.run(store: arguments[index + 1], bytes: bytes, count: count) {
    print("\(arguments[index + 1]) \(bytes): \(formatMicros(result.micros / 1e6)) µs per hit")
    for problem in result.problems { print("problem: \(problem)") }
    exit(result.problems.isEmpty ? 0 : 1)
}
// `--stream-peak cache|plain|disk MEGABYTES`: one streaming download, in its own process.
if let index = arguments.firstIndex(of: "--stream-peak"), arguments.count > index + 2, let megabytes = Int(arguments[index + 2]),
   let variant = TransparencyBench.StreamVariant(rawValue: arguments[index + 1]) {
    TransparencyBench.streamPeak(megabytes: megabytes, variant: variant)
    exit(0)
}
let rounds = quick ? 3 : 9

// `--redis-cluster-only`: fresh hits from a Redis Cluster against one Redis server and memory.
if arguments.contains("--redis-cluster-only") {
    let origin = try LoopbackOrigin()
    let cluster = RedisClusterBench.run(origin: origin, rounds: rounds, total: quick ? 1000 : 4000)
    origin.stop()
    print("")
    for line in cluster.lines { print(line) }
    exit(cluster.problems.isEmpty ? 0 : 1)
}

// `--disk-hits-only`: fresh hits from a disk store, in place and on the I/O queue, against memory.
if arguments.contains("--disk-hits-only") {
    let origin = try LoopbackOrigin()
    let diskHits = try DiskHitBench.run(origin: origin, rounds: rounds)
    origin.stop()
    print("")
    for line in diskHits.lines { print(line) }
    exit(diskHits.problems.isEmpty ? 0 : 1)
}

// `--redis-variant memory|hop|disk|redis|near|store|floor|rinline|rsource|rearly|raw BYTES COUNT`: one variant of the Redis part alone
// (1024 or 102400 bytes), after the same warm-up, for a profiler.
if let index = arguments.firstIndex(of: "--redis-variant"), arguments.count > index + 3,
   let bytes = Int(arguments[index + 2]), let count = Int(arguments[index + 3]) {
    let origin = try LoopbackOrigin()
    let result = RedisBench.run(origin: origin, rounds: 1, only: .init(variant: arguments[index + 1], bytes: bytes, count: count))
    origin.stop()
    for problem in result.problems { print("problem: \(problem)") }
    exit(result.problems.isEmpty ? 0 : 1)
}

// `--statistics-only`: 1 KB memory hits with statistics counted and without, 15 rounds.
if arguments.contains("--statistics-only") {
    let origin = try LoopbackOrigin()
    origin.route("/body/1024", response: .init(headers: [("Content-Type", "application/octet-stream")], body: Data(repeating: 120, count: 1024)))
    let cost = TransparencyBench.statisticsCost(origin: origin, count: 2000, rounds: 15)
    origin.stop()
    print("1 KB memory hits: \(formatMicros(cost.on)) µs with statistics counted, \(formatMicros(cost.off)) µs without")
    print("ratio.hit_statistics_on_over_off=\(formatRatio(cost.on / cost.off))")
    exit(0)
}

// `--concurrency-only ROUNDS`: concurrent 1 KB hits against the floor protocol, 8 and 64
// callers, each round's pair printed.
if let index = arguments.firstIndex(of: "--concurrency-only"), arguments.count > index + 1, let count = Int(arguments[index + 1]) {
    let origin = try LoopbackOrigin()
    let http = HTTPBench(origin: origin, rounds: 1)
    for callers in [8, 64] {
        let pairs = (0..<count).map { _ in http.concurrentHits(callers: callers, total: 4000, rounds: 1) }
        print("c\(callers) hit/floor per round: " + pairs.map { formatRatio($0.ratio) }.joined(separator: " ") +
              "; median hit \(Int(median(pairs.map(\.hit))))/s, floor \(Int(median(pairs.map(\.floor))))/s")
    }
    origin.stop()
    exit(0)
}

// `--redis-only`: fresh hits from a Redis store against memory and disk stores.
if arguments.contains("--redis-only") {
    let origin = try LoopbackOrigin()
    let redis = RedisBench.run(origin: origin, rounds: rounds, writes: quick ? 200 : 1000)
    origin.stop()
    print("")
    for line in redis.lines { print(line) }
    exit(redis.problems.isEmpty ? 0 : 1)
}
let began = now()
#if DEBUG
print("note: a debug build; run `swift run -c release cache-bench` for numbers worth comparing\n")
#endif

let origin = try LoopbackOrigin()
let http = HTTPBench(origin: origin, rounds: rounds)

// Memory first, while nothing else is resident: serving 1 GB of 1 MB hits from a 64 MiB store.
let served = quick ? 256 : 1024
let memory = arguments.contains("--http-only") ? (peak: 0.0, reset: true) : http.peakMemoryServing(megabytes: served)

var (medians, problems) = http.run()

print("per-request time, microseconds (median of \(rounds) interleaved rounds; sequential requests)")
print("body     " + HTTPBench.variants.map { $0.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined())
var lines: [String] = []
for size in HTTPBench.sizes {
    let m = medians[size.suffix] ?? [:]
    let label = size.bytes >= 1 << 20 ? "1 MB" : size.bytes >= 100 * 1024 ? "100 KB" : "1 KB"
    print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + HTTPBench.variants.map { formatMicros(m[$0] ?? .nan) + " " }.joined())
    let hit = m["hit"] ?? .nan
    lines.append("ratio.hit_over_floor\(size.suffix)=\(formatRatio(hit / (m["floor"] ?? .nan)))")
    lines.append("ratio.hit_over_network\(size.suffix)=\(formatRatio(hit / (m["network"] ?? .nan)))")
    lines.append("ratio.miss_over_network\(size.suffix)=\((formatRatio((m["miss"] ?? .nan) / (m["network"] ?? .nan))))")
    lines.append("ratio.hit_over_urlcache\(size.suffix)=\(formatRatio(hit / (m["urlcache"] ?? .nan)))")
    // What a miss adds to the network's own time, in floors (one URLProtocol round trip).
    let added = (m["miss"] ?? .nan) - (m["network"] ?? .nan)
    lines.append("ratio.miss_minus_network_over_floor\(size.suffix)=\(formatRatio(added / (m["floor"] ?? .nan)))")
    // What keeping the bytes as a memory store does costs the network alone, and what the
    // cache adds beyond that, in floors.
    let kept = (m["keep"] ?? .nan) - (m["network"] ?? .nan)
    lines.append("ratio.keep_minus_network_over_floor\(size.suffix)=\(formatRatio(kept / (m["floor"] ?? .nan)))")
    lines.append("ratio.miss_minus_keep_over_floor\(size.suffix)=\(formatRatio(((m["miss"] ?? .nan) - (m["keep"] ?? .nan)) / (m["floor"] ?? .nan)))")
    // The same for the least a forwarding protocol can do (RelayProtocol), and what the cache
    // adds beyond it, in floors.
    let relayed = (m["relay"] ?? .nan) - (m["network"] ?? .nan)
    lines.append("ratio.relay_minus_network_over_floor\(size.suffix)=\(formatRatio(relayed / (m["floor"] ?? .nan)))")
    lines.append("ratio.miss_minus_relay_over_floor\(size.suffix)=\(formatRatio(((m["miss"] ?? .nan) - (m["relay"] ?? .nan)) / (m["floor"] ?? .nan)))")
    // A miss the forwarding session sends (a session with a delegate), against the same anchors.
    let forwarded = (m["fwdmiss"] ?? .nan) - (m["network"] ?? .nan)
    lines.append("ratio.forwarded_miss_minus_network_over_floor\(size.suffix)=\(formatRatio(forwarded / (m["floor"] ?? .nan)))")
}

// `--http-only`: the per-request table and its ratios alone.
if arguments.contains("--http-only") {
    for line in lines { print(line) }
    exit(problems.isEmpty ? 0 : 1)
}

let statistics = TransparencyBench.statisticsCost(origin: origin, count: quick ? 500 : 2000, rounds: rounds)
print("\n1 KB memory hits: \(formatMicros(statistics.on)) µs with statistics counted, \(formatMicros(statistics.off)) µs without")
lines.append("ratio.hit_statistics_on_over_off=\(formatRatio(statistics.on / statistics.off))")

let total = quick ? 1000 : 4000
let c8 = http.concurrentHits(callers: 8, total: total, rounds: quick ? 3 : 7)
let c64 = http.concurrentHits(callers: 64, total: total, rounds: quick ? 3 : 7)
print("\nconcurrent 1 KB hits: \(Int(c8.hit)) requests/s with 8 callers, \(Int(c64.hit)) with 64; " +
      "the floor protocol: \(Int(c8.floor)) and \(Int(c64.floor))")
lines.append("rps.hit_c8=\(Int(c8.hit))")
lines.append("rps.hit_c64=\(Int(c64.hit))")
lines.append("rps.floor_c8=\(Int(c8.floor))")
lines.append("rps.floor_c64=\(Int(c64.floor))")
lines.append("ratio.hit_c8_over_floor_c8=\(formatRatio(c8.ratio))")
lines.append("ratio.hit_c64_over_floor_c64=\(formatRatio(c64.ratio))")

let storeDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-stores-\(UUID().uuidString)")
let diskStore = try DiskResponseStore(directory: storeDirectory.appendingPathComponent("disk"))
let tieredStore = TieredResponseStore(back: try DiskResponseStore(directory: storeDirectory.appendingPathComponent("tiered")))
let diskHits = TransparencyBench.concurrentHits(origin: origin, store: diskStore, total: total, rounds: 3)
let tieredHits = TransparencyBench.concurrentHits(origin: origin, store: tieredStore, total: total, rounds: 3)
diskStore.close()
(tieredStore.back as? DiskResponseStore)?.close()
try? FileManager.default.removeItem(at: storeDirectory)
print("concurrent 1 KB hits with 8 callers: \(Int(diskHits))/s from a disk store, \(Int(tieredHits))/s from a tiered store")
lines.append("rps.disk_hit_c8=\(Int(diskHits))")
lines.append("rps.tiered_hit_c8=\(Int(tieredHits))")

let neighbour = TransparencyBench.slowNeighbour(origin: origin, total: total, rounds: 3)
print("memory hits with 8 callers: \(Int(neighbour.alone))/s alone, \(Int(neighbour.beside))/s while another session's store takes 300 ms per read")
lines.append("rps.hit_c8_beside_slow_store=\(Int(neighbour.beside))")
lines.append("ratio.hit_rate_beside_slow_store=\(formatRatio(neighbour.beside / neighbour.alone))")

let ttfb = TransparencyBench.timeToFirstByte(origin: origin, rounds: quick ? 5 : 15)
print("time to the response of a 4 MB miss sent at 8 MB/s: \(formatMicros(ttfb.cache)) µs through the cache, \(formatMicros(ttfb.network)) µs without")
lines.append("ratio.ttfb_miss_over_network=\(formatRatio(ttfb.cache / ttfb.network))")

let streamMegabytes = quick ? 256 : 1024
let stream = TransparencyBench.streamPeakDifference(megabytes: streamMegabytes, variant: .cache)
print("peak resident memory streaming \(streamMegabytes) MB to a delegate: \(Int(stream.cache)) MiB through the cache, \(Int(stream.plain)) MiB without")
lines.append("stream_rss_over_plain_mb=\(Int(stream.cache - stream.plain))")
problems += stream.problems
let storable = TransparencyBench.streamPeakDifference(megabytes: 64, variant: .disk)
print("peak resident memory streaming a storable 64 MiB answer to a delegate through a disk store: \(Int(storable.cache)) MiB, \(Int(storable.plain)) MiB without a cache")
lines.append("stream_rss_storable_disk_over_plain_mb=\(Int(storable.cache - storable.plain))")
problems += storable.problems

let collapsed = TransparencyBench.collapsedMisses(origin: origin)
print("64 concurrent misses for one key reached the origin \(collapsed) time(s)")
lines.append("origin_requests.collapsed_miss_c64=\(collapsed)")
let fleet = try FleetBench.collapsedMisses(origin: origin)
print("4 processes x 16 concurrent misses for one key, one disk store: the origin received \(fleet) request(s)")
lines.append("origin_requests.collapsed_miss_4proc=\(fleet)")

print("peak resident memory while serving \(served) MB of 1 MB hits from a 64 MiB store: \(Int(memory.peak)) MiB" +
      (memory.reset ? "" : " (the peak could not be reset: this is the whole run's peak)"))
lines.append("peak_rss_mb=\(Int(memory.peak))")

let disk = DiskBench(rounds: rounds)
let small = quick ? 20_000 : 100_000
let opening = try disk.openTime(count: small)
print("\ndisk store: wrote \(small) small entries in \(String(format: "%.1f", opening.writeSeconds)) s; opening it takes \(String(format: "%.1f", opening.openMillis)) ms")
lines.append("disk.open_\(small / 1000)k_ms=\(String(format: "%.1f", opening.openMillis))")
print("disk store against plain files of the same bytes, microseconds per operation")
print("body     store write  file write  store read  file read")
for (suffix, bytes, operations) in [("", 1024, 400), ("_100k", 100 * 1024, 150), ("_1m", 1 << 20, 30)] {
    let m = try disk.readWrite(bytes: bytes, operations: operations)
    let label = bytes >= 1 << 20 ? "1 MB" : bytes >= 100 * 1024 ? "100 KB" : "1 KB"
    print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + ["store_write", "file_write", "store_read", "file_read"].map { formatMicros(m[$0] ?? .nan) + "   " }.joined())
    lines.append("ratio.disk_write_over_file\(suffix)=\(formatRatio((m["store_write"] ?? .nan) / (m["file_write"] ?? .nan)))")
    lines.append("ratio.disk_read_over_file\(suffix)=\(formatRatio((m["store_read"] ?? .nan) / (m["file_read"] ?? .nan)))")
}

let shared = try disk.sharedHits(seconds: quick ? 0.5 : 2)
print("\ndisk store reads of 1 KB entries with two processes reading one directory: \(Int(shared)) per second")
lines.append("rps.shared_disk_hit_2proc=\(Int(shared))")

let nearDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-near-\(UUID().uuidString)")
let nearDisk = try NearBench.invalidationLatency(store: nearDirectory.path, processes: 4, writes: quick ? 200 : 1000)
try? FileManager.default.removeItem(at: nearDirectory)
print("tiered store in front of a shared disk store: a replaced entry left 4 other processes' memory " +
      "\(String(format: "%.2f", nearDisk.p50)) ms (median), \(String(format: "%.2f", nearDisk.p99)) ms (99th percentile) after its write returned")
lines.append("disk.invalidation_p99_ms=\(String(format: "%.2f", nearDisk.p99))")

disk.cleanUp() // here, not in a defer: exit() below skips defer in top-level code
let pageCachedHits = try DiskHitBench.run(origin: origin, rounds: rounds)
lines += pageCachedHits.lines
problems += pageCachedHits.problems
let redis = RedisBench.run(origin: origin, rounds: rounds, writes: quick ? 200 : 1000)
lines += redis.lines
let redisCluster = RedisClusterBench.run(origin: origin, rounds: rounds, total: total)
lines += redisCluster.lines
origin.stop()
if !problems.isEmpty {
    print("\nproblems (the numbers above are suspect):")
    for problem in problems { print("  \(problem)") }
}
print("\nfinished in \(Int(now() - began)) s on \(ProcessInfo.processInfo.activeProcessorCount) cores\n")
for line in lines { print(line) }
exit(problems.isEmpty && redis.problems.isEmpty && redisCluster.problems.isEmpty ? 0 : 1)
