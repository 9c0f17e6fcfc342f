import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// Hit, floor, network, miss and URLCache, per body size, interleaved round by round. `miss`
/// is a session without a delegate (Foundation's own class sends it on the task,
/// `DirectForward`); `fwdmiss` the same completion-handler task on a session with a delegate,
/// which the cache's forwarding session sends; `keep` the network with every body kept as the
/// miss's memory store keeps it (`BodyKeeper`, the same byte limit), no cache, on URLs as
/// unique as the miss's.
struct HTTPBench {
    struct Size {
        let suffix: String
        let bytes: Int
        let requests: Int
    }

    static let sizes = [Size(suffix: "", bytes: 1024, requests: 400),
                        Size(suffix: "_100k", bytes: 100 * 1024, requests: 150),
                        Size(suffix: "_1m", bytes: 1 << 20, requests: 90)]
    static let variants = ["hit", "floor", "network", "keep", "miss", "fwdmiss", "relay", "urlcache"]
    static let hotKeys = 8

    let origin: LoopbackOrigin
    let rounds: Int
    let hitSession: URLSession
    let missSession: URLSession
    let forwardedMissSession: URLSession
    let floorSession: URLSession
    let relaySession: URLSession
    let networkSession: URLSession
    let urlCacheSession: URLSession
    let windows = CacheWindows(fresh: 3600, usable: 7200)
    /// The `keep` variant's bodies: as many bytes as the miss session's store holds.
    private let keeper = BodyKeeper(byteLimit: 64 << 20)

    init(origin: LoopbackOrigin, rounds: Int) {
        self.origin = origin
        self.rounds = rounds
        for size in Self.sizes {
            let body = Data((0..<size.bytes).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            origin.route("/body/\(size.bytes)", response: .init(headers: [("Content-Type", "application/octet-stream")], body: body))
            FloorProtocol.bodies["/floor/\(size.bytes)"] = body
        }

        hitSession = Self.cachingSession(windows, megabytes: 256)
        missSession = Self.cachingSession(windows, megabytes: 64)
        forwardedMissSession = Self.cachingSession(windows, megabytes: 64, delegate: Bystander())

        let floor = URLSessionConfiguration.ephemeral
        floor.protocolClasses = [FloorProtocol.self] + (floor.protocolClasses ?? [])
        floorSession = URLSession(configuration: floor)

        let relay = URLSessionConfiguration.ephemeral
        relay.urlCache = nil
        relay.protocolClasses = [RelayProtocol.self] + (relay.protocolClasses ?? [])
        relaySession = URLSession(configuration: relay)

        let network = URLSessionConfiguration.ephemeral
        network.urlCache = nil
        networkSession = URLSession(configuration: network)

        let urlCache = URLSessionConfiguration.ephemeral
        let foundationCache = URLCache(memoryCapacity: 512 << 20, diskCapacity: 0, diskPath: nil)
        urlCache.urlCache = foundationCache
        urlCache.requestCachePolicy = .returnCacheDataElseLoad
        urlCacheSession = URLSession(configuration: urlCache)
        // Foundation's URLCache keys on host, port and path (not the query): give each hot key a path.
        for size in Self.sizes {
            for k in 0..<Self.hotKeys {
                let url = origin.url("/uc/\(size.bytes)/k\(k)")
                let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                               headerFields: ["Content-Type": "application/octet-stream", "Cache-Control": "max-age=3600"])!
                foundationCache.storeCachedResponse(CachedURLResponse(response: response, data: FloorProtocol.bodies["/floor/\(size.bytes)"]!),
                                                    for: URLRequest(url: url))
            }
        }
    }

    /// A session caching in a memory store of `megabytes`, with `delegate` if any.
    private static func cachingSession(_ windows: CacheWindows, megabytes: Int, delegate: URLSessionDelegate? = nil) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: windows),
                                                  store: try! MemoryResponseStore(byteLimit: megabytes << 20)))
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    func urls(_ variant: String, _ size: Size, count: Int, unique: inout Int) -> [URL] {
        (0..<count).map { i in
            switch variant {
            case "hit", "network", "relay": return origin.url("/body/\(size.bytes)?k=\(i % Self.hotKeys)")
            case "floor": return origin.url("/floor/\(size.bytes)?k=\(i % Self.hotKeys)")
            case "urlcache": return origin.url("/uc/\(size.bytes)/k\(i % Self.hotKeys)")
            default:
                unique += 1
                return origin.url("/body/\(size.bytes)?u=\(unique)")
            }
        }
    }

    /// Where a variant's bodies are kept: `keep`'s, and nowhere for the others.
    func keeper(for variant: String) -> BodyKeeper? {
        variant == "keep" ? keeper : nil
    }

    func session(_ variant: String) -> URLSession {
        switch variant {
        case "hit": hitSession
        case "floor": floorSession
        case "relay": relaySession
        case "network", "keep": networkSession
        case "urlcache": urlCacheSession
        case "fwdmiss": forwardedMissSession
        default: missSession
        }
    }

    /// Median seconds per request, by size suffix and variant; and whether a variant that
    /// must not touch the origin did.
    func run() -> (medians: [String: [String: Double]], problems: [String]) {
        var samples: [String: [String: [Double]]] = [:]
        var problems: [String] = []
        var unique = 0
        // Warm every session and the hot keys.
        for size in Self.sizes {
            for variant in Self.variants {
                for url in urls(variant, size, count: Self.hotKeys, unique: &unique) where get(session(variant), url) != size.bytes {
                    problems.append("\(variant) \(size.bytes): warm-up request failed")
                }
            }
        }
        for _ in 0..<rounds {
            for size in Self.sizes {
                for variant in Self.variants.shuffled() {
                    let batch = urls(variant, size, count: size.requests, unique: &unique)
                    let session = session(variant)
                    let before = origin.requestCount()
                    let start = now()
                    for url in batch where get(session, url, keeping: keeper(for: variant)) != size.bytes {
                        problems.append("\(variant) \(size.bytes): a request failed")
                    }
                    let perRequest = (now() - start) / Double(batch.count)
                    let touched = origin.requestCount() - before
                    if ["hit", "floor", "urlcache"].contains(variant) && touched > 0 {
                        problems.append("\(variant) \(size.bytes): reached the origin \(touched) times")
                    }
                    samples[size.suffix, default: [:]][variant, default: []].append(perRequest)
                }
            }
        }
        return (samples.mapValues { $0.mapValues(median) }, Array(Set(problems)).sorted())
    }

    /// Requests per second of 1 KB hits, and of the floor protocol's canned 1 KB answers, with
    /// `callers` loops in flight; the median of rounds, the two interleaved round by round, and
    /// the median of the rounds' ratios (each round's pair ran side by side, so drift cancels).
    func concurrentHits(callers: Int, total: Int, rounds: Int) -> (hit: Double, floor: Double, ratio: Double) {
        let hot = (0..<Self.hotKeys).map { origin.url("/body/1024?k=\($0)") }
        let canned = (0..<Self.hotKeys).map { origin.url("/floor/1024?k=\($0)") }
        var hits: [Double] = [], floors: [Double] = []
        for round in 0..<rounds {
            let hitFirst = round % 2 == 0
            if hitFirst { hits.append(requestsPerSecond(hitSession, urls: hot, callers: callers, total: total)) }
            floors.append(requestsPerSecond(floorSession, urls: canned, callers: callers, total: total))
            if !hitFirst { hits.append(requestsPerSecond(hitSession, urls: hot, callers: callers, total: total)) }
        }
        return (median(hits), median(floors), median(zip(hits, floors).map { $0 / $1 }))
    }

    /// Serves `gigabytes` of 1 MB hits from a cache whose store is limited to 64 MiB, and
    /// returns the peak resident memory meanwhile (MiB), or nil if it cannot be measured.
    func peakMemoryServing(megabytes: Int) -> (peak: Double, reset: Bool) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: windows),
                                                  store: try! MemoryResponseStore(byteLimit: 64 << 20)))
        let session = URLSession(configuration: configuration)
        let keys = (0..<40).map { origin.url("/body/\(1 << 20)?m=\($0)") }
        for url in keys { get(session, url) }
        let reset = ResidentMemory.resetPeak()
        for i in 0..<megabytes { get(session, keys[i % keys.count]) }
        return (ResidentMemory.peakMiB(), reset)
    }
}

/// A session delegate that does nothing: its tasks' misses go through the forwarding session.
final class Bystander: NSObject, URLSessionTaskDelegate, Sendable {}
