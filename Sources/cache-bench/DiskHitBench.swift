import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// Fresh hits through a caching URLSession from a memory store (the anchor), from a disk store
/// whose entries are in the page cache (read in place, on Foundation's queue), and from the
/// same disk store read only on the I/O queue (what a hit cost before in-place reads, and what
/// one whose bytes are not in memory pays besides the disk's own time), and a plain read of a
/// file of the body's size (open, read, close: the least a hit from disk can add to a memory
/// hit), interleaved round by round. The memory and in-place hits are also timed in the
/// process's CPU time, which leaves out the time a thread waits to be woken.
enum DiskHitBench {
    static let sizes = [(suffix: "", bytes: 1024, requests: 400), (suffix: "_100k", bytes: 100 * 1024, requests: 150)]
    static let variants = ["memory", "disk", "disk-io", "file"]
    static let hotKeys = 8

    /// Prints the table and returns the `ratio.` lines and any problems (requests that failed,
    /// reached the origin or were not fresh hits).
    static func run(origin: LoopbackOrigin, rounds: Int) throws -> (lines: [String], problems: [String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-disk-hits-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let disk = try DiskResponseStore(directory: directory, byteLimit: 1 << 30)
        defer { disk.close() }
        let stores: [String: any ResponseStore] = ["memory": try MemoryResponseStore(byteLimit: 256 << 20), "disk": disk,
                                                   "disk-io": IOQueueOnlyStore(disk)]
        // Anything but a fresh hit during the measured rounds is reported with its reason.
        let measuring = Atomic<Bool>(false)
        let unexpected = Mutex<Set<String>>([])
        var observations: [CacheObservation] = []
        defer { observations.forEach { $0.cancel() } }
        var sessions: [String: URLSession] = [:]
        for (name, store) in stores {
            // The two disk variants share one store, so they answer from the same files.
            let cache = HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200)), store: store)
            observations.append(cache.observe { event in
                guard measuring.load(ordering: .relaxed) else { return }
                guard event.kind != .served(.fresh), event.kind != .stored else { return }
                unexpected.withLock { _ = $0.insert("disk hits \(name): \(event.kind)") }
            })
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            sessions[name] = URLSession(configuration: configuration)
        }
        defer { sessions.values.forEach { $0.finishTasksAndInvalidate() } }
        var problems: [String] = []
        let files = directory.appendingPathComponent("plain").path
        mkdir(files, 0o700)
        for size in sizes {
            for k in 0..<hotKeys { DiskBench.writePlain("\(files)/\(size.bytes)-\(k)", Data(count: size.bytes)) }
            origin.route("/disk-hits/\(size.bytes)", response: .init(headers: [("Content-Type", "application/octet-stream")],
                                                                      body: Data((0..<size.bytes).map { UInt8(truncatingIfNeeded: $0 &* 11) })))
            for variant in ["memory", "disk"] {
                for k in 0..<hotKeys where get(sessions[variant]!, url(origin, size.bytes, k)) != size.bytes {
                    problems.append("disk hits \(variant) \(size.bytes): a warm-up request failed")
                }
            }
        }
        measuring.store(true, ordering: .relaxed)
        let samples = sample(sessions, files: files, origin: origin, rounds: rounds, problems: &problems)
        measuring.store(false, ordering: .relaxed)
        problems += unexpected.withLock { $0 }
        return report(samples, rounds: rounds, problems: problems)
    }

    private static func url(_ origin: LoopbackOrigin, _ size: Int, _ i: Int) -> URL {
        origin.url("/disk-hits/\(size)?k=\(i % hotKeys)")
    }

    /// Seconds per request, by size suffix and variant (the process's CPU time under the
    /// variant's name with a `-cpu` suffix), one sample per round, the variants in a new order
    /// each round.
    private static func sample(_ sessions: [String: URLSession], files: String, origin: LoopbackOrigin, rounds: Int,
                               problems: inout [String]) -> [String: [String: [Double]]] {
        var samples: [String: [String: [Double]]] = [:]
        for _ in 0..<rounds {
            for size in sizes {
                for variant in variants.shuffled() {
                    let before = origin.requestCount()
                    let start = now(), cpuStart = processCPUTime()
                    for i in 0..<size.requests {
                        let read = variant == "file" ? DiskBench.readPlain("\(files)/\(size.bytes)-\(i % hotKeys)").count
                            : get(sessions[variant]!, url(origin, size.bytes, i))
                        if read != size.bytes { problems.append("disk hits \(variant) \(size.bytes): a request failed") }
                    }
                    samples[size.suffix, default: [:]][variant, default: []].append((now() - start) / Double(size.requests))
                    samples[size.suffix, default: [:]][variant + "-cpu", default: []]
                        .append((processCPUTime() - cpuStart) / Double(size.requests))
                    if origin.requestCount() != before { problems.append("disk hits \(variant) \(size.bytes): reached the origin") }
                }
            }
        }
        return samples
    }

    private static func report(_ samples: [String: [String: [Double]]], rounds: Int, problems: [String]) -> (lines: [String], problems: [String]) {
        print("\nfresh hits, microseconds per request (median of \(rounds) interleaved rounds; sequential requests)")
        print("body     memory    disk, in place  disk, I/O queue  file read")
        var lines: [String] = []
        for size in sizes {
            let m = (samples[size.suffix] ?? [:]).mapValues(median)
            let memory = m["memory"] ?? .nan
            let label = size.bytes >= 100 * 1024 ? "100 KB" : "1 KB"
            print(label.padding(toLength: 7, withPad: " ", startingAt: 0) + formatMicros(memory) + "   "
                  + formatMicros(m["disk"] ?? .nan) + "       " + formatMicros(m["disk-io"] ?? .nan) + "        "
                  + formatMicros(m["file"] ?? .nan))
            lines.append("ratio.disk_hit_in_place_over_memory_hit\(size.suffix)=\(formatRatio((m["disk"] ?? .nan) / memory))")
            // The same, in CPU time of the whole process: the work a hit does, where the line
            // above also counts the time the caller's thread waits to be woken.
            let memoryCPU = m["memory-cpu"] ?? .nan
            print("        CPU: " + formatMicros(memoryCPU) + "   " + formatMicros(m["disk-cpu"] ?? .nan))
            lines.append("disk.memory_hit_cpu_us\(size.suffix)=\(String(format: "%.1f", memoryCPU * 1e6))")
            lines.append("ratio.disk_hit_in_place_over_memory_hit_cpu\(size.suffix)=\(formatRatio((m["disk-cpu"] ?? .nan) / memoryCPU))")
            lines.append("ratio.disk_hit_io_queue_over_memory_hit\(size.suffix)=\(formatRatio((m["disk-io"] ?? .nan) / memory))")
            // What a hit from disk adds to a memory hit, in plain reads of a file of the body's size.
            lines.append("disk.file_read_us\(size.suffix)=\(String(format: "%.1f", (m["file"] ?? .nan) * 1e6))")
            lines.append("ratio.disk_hit_in_place_minus_memory_over_file_read\(size.suffix)="
                         + formatRatio(((m["disk"] ?? .nan) - memory) / (m["file"] ?? .nan)))
        }
        let unique = Array(Set(problems)).sorted()
        if !unique.isEmpty {
            print("disk hit problems (the numbers above are suspect):")
            for problem in unique { print("  \(problem)") }
        }
        return (lines, unique)
    }
}

/// A store answering everything from another, except that it never answers in place: every
/// lookup is read on the cache's I/O queue, as a disk store's were before in-place reads.
final class IOQueueOnlyStore: ResponseStore {
    let inner: any ResponseStore

    init(_ inner: any ResponseStore) {
        self.inner = inner
    }

    func entry(for key: CacheKey) throws -> CacheEntry? { try inner.entry(for: key) }
    @discardableResult
    func write(_ entry: CacheEntry) throws -> StoreWriteResult { try inner.write(entry) }
    func makeWriter(for key: CacheKey) throws -> any ResponseStoreWriter { try inner.makeWriter(for: key) }
    func removeEntry(for key: CacheKey) throws { try inner.removeEntry(for: key) }
    func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        try inner.removeEntries(where: predicate, progress: progress)
    }
    func entryInfos() throws -> [StoredEntryInfo] { try inner.entryInfos() }
    var maxEntrySize: Int { inner.maxEntrySize }
    func partitionSecret() throws -> [UInt8] { try inner.partitionSecret() }
    func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool { inner.claimRefresh(of: key, lease: lease) }
    func releaseRefresh(of key: CacheKey) { inner.releaseRefresh(of: key) }
}
