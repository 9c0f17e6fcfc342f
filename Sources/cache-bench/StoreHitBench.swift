import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// Fresh hits through a caching URLSession from one kind of store alone, for a profiler
/// (`--store-hits-only memory|disk|disk-io|tiered BYTES COUNT`; disk-io: the
/// disk store read only on the I/O queue): eight hot keys warmed, then COUNT
/// sequential hits. Run it with COUNT 0 as well to subtract what setting up costs.
enum StoreHitBench {
    /// Runs the hits; nil for an unknown store name. Exits with a problem when a request
    /// failed or was not a fresh hit.
    static func run(store name: String, bytes: Int, count: Int) throws -> (micros: Double, problems: [String])? {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-hits-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any ResponseStore
        switch name {
        case "memory": store = try MemoryResponseStore(byteLimit: 256 << 20)
        case "disk": store = try DiskResponseStore(directory: directory, byteLimit: 1 << 30)
        case "disk-io": store = IOQueueOnlyStore(try DiskResponseStore(directory: directory, byteLimit: 1 << 30))
        case "tiered": store = TieredResponseStore(back: try DiskResponseStore(directory: directory, byteLimit: 1 << 30))
        default: return nil
        }
        let underlying = (store as? TieredResponseStore)?.back ?? (store as? IOQueueOnlyStore)?.inner ?? store
        defer { (underlying as? DiskResponseStore)?.close() }
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/hits", response: .init(headers: [("Content-Type", "application/octet-stream")],
                                              body: Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 13) })))
        let cache = HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200)), store: store)
        let unexpected = Atomic<Int>(0)
        let observation = cache.observe { event in
            if event.kind != .served(.fresh) && event.kind != .stored { unexpected.add(1, ordering: .relaxed) }
        }
        defer { observation.cancel() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let urls = (0..<8).map { origin.url("/hits?k=\($0)") }
        for url in urls { get(session, url) } // the misses that store them
        let warmed = unexpected.load(ordering: .relaxed)
        let before = origin.requestCount()
        var problems: [String] = []
        let start = now()
        for i in 0..<count where get(session, urls[i % urls.count]) != bytes {
            problems.append("a request failed")
        }
        let elapsed = now() - start
        if origin.requestCount() != before { problems.append("hits reached the origin") }
        if unexpected.load(ordering: .relaxed) != warmed { problems.append("answers that were not fresh hits") }
        return (count > 0 ? elapsed / Double(count) * 1e6 : 0, problems)
    }
}
