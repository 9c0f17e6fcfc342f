import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// What the cache costs beside the memory hit: hits from disk and tiered stores, a slow
/// neighbour, the time to first byte of a slow miss, memory while streaming, and collapsing.
enum TransparencyBench {
    /// Requests per second of 1 KB hits with 8 callers from a cache on `store`.
    static func concurrentHits(origin: LoopbackOrigin, store: any ResponseStore, total: Int, rounds: Int) -> Double {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200)),
                                                  store: store))
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let hot = (0..<HTTPBench.hotKeys).map { origin.url("/body/1024?store=\($0)") }
        for url in hot { get(session, url) }
        return median((0..<rounds).map { _ in requestsPerSecond(session, urls: hot, callers: 8, total: total) })
    }

    /// Sequential 1 KB memory hits, in microseconds, with the cache's statistics counted and
    /// without (`HTTP_CACHING_STATISTICS=off` when the second cache is made), interleaved, each
    /// going first in every other round.
    static func statisticsCost(origin: LoopbackOrigin, count: Int, rounds: Int) -> (on: Double, off: Double) {
        func session() -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200))))
            return URLSession(configuration: configuration)
        }
        let counting = session()
        setenv("HTTP_CACHING_STATISTICS", "off", 1)
        let silent = session()
        unsetenv("HTTP_CACHING_STATISTICS")
        defer { [counting, silent].forEach { $0.finishTasksAndInvalidate() } }
        let hot = (0..<HTTPBench.hotKeys).map { origin.url("/body/1024?statistics=\($0)") }
        for url in hot { get(counting, url); get(silent, url) }
        var on: [Double] = [], off: [Double] = []
        for round in 0..<rounds {
            // Each first in turn, so neither pays for going first.
            let order = round % 2 == 0 ? [(counting, 0), (silent, 1)] : [(silent, 1), (counting, 0)]
            for (session, times) in order {
                let start = now()
                for index in 0..<count { get(session, hot[index % hot.count]) }
                let perRequest = (now() - start) / Double(count)
                if times == 0 { on.append(perRequest) } else { off.append(perRequest) }
            }
        }
        return (median(on), median(off))
    }

    /// Memory hits per second on one session, alone and while another session's store takes
    /// 300 ms per read, in the same process.
    static func slowNeighbour(origin: LoopbackOrigin, total: Int, rounds: Int) -> (alone: Double, beside: Double) {
        let fast = URLSessionConfiguration.ephemeral
        fast.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200))))
        let fastSession = URLSession(configuration: fast)
        let slow = URLSessionConfiguration.ephemeral
        slow.enableHTTPCaching(HTTPCache(store: InstrumentedStore(MemoryResponseStore(), afterRead: { _, _ in Thread.sleep(forTimeInterval: 0.3) })))
        let slowSession = URLSession(configuration: slow)
        defer {
            fastSession.finishTasksAndInvalidate()
            slowSession.finishTasksAndInvalidate()
        }
        let hot = (0..<HTTPBench.hotKeys).map { origin.url("/body/1024?neighbour=\($0)") }
        for url in hot { get(fastSession, url) }
        let alone = median((0..<rounds).map { _ in requestsPerSecond(fastSession, urls: hot, callers: 8, total: total) })
        // Keep 8 requests of the slow session in its store at all times while measuring.
        let running = Box(true)
        let lock = NSLock()
        let done = DispatchGroup()
        for loop in 0..<8 {
            done.enter()
            DispatchQueue.global().async {
                var n = 0
                while lock.withLock({ running.value }) {
                    get(slowSession, origin.url("/body/1024?slow=\(loop)-\(n)"))
                    n += 1
                }
                done.leave()
            }
        }
        let beside = median((0..<rounds).map { _ in requestsPerSecond(fastSession, urls: hot, callers: 8, total: total) })
        lock.withLock { running.value = false }
        done.wait()
        return (alone, beside)
    }

    /// Reports the moment a task's response arrives, then cancels it.
    final class FirstByte: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        let arrived = DispatchSemaphore(value: 0)
        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            completionHandler(.allow)
            arrived.signal()
        }
    }

    /// Median seconds to the response of a 4 MB miss the origin sends at 8 MB/s, through a
    /// delegate-based caching session and through a plain one, interleaved.
    static func timeToFirstByte(origin: LoopbackOrigin, rounds: Int) -> (cache: Double, network: Double) {
        origin.route("/slow4m", response: .paced(bytes: 4 << 20, bytesPerSecond: 8 << 20, chunkSize: 64 << 10))
        let cached = URLSessionConfiguration.ephemeral
        cached.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 3600, usable: 7200))))
        let plain = URLSessionConfiguration.ephemeral
        plain.urlCache = nil
        let cacheDelegate = FirstByte(), plainDelegate = FirstByte()
        let cacheSession = URLSession(configuration: cached, delegate: cacheDelegate, delegateQueue: nil)
        let plainSession = URLSession(configuration: plain, delegate: plainDelegate, delegateQueue: nil)
        defer {
            cacheSession.invalidateAndCancel()
            plainSession.invalidateAndCancel()
        }
        var cacheTimes: [Double] = [], plainTimes: [Double] = []
        for round in 0..<(rounds * 2 + 1) {
            for (session, delegate, isCache) in [(cacheSession, cacheDelegate, true), (plainSession, plainDelegate, false)] {
                let task = session.dataTask(with: origin.url("/slow4m?r=\(round)-\(isCache)"))
                let start = now()
                task.resume()
                delegate.arrived.wait()
                let elapsed = now() - start
                task.cancel()
                if round > 0 { // the first round warms connections
                    if isCache { cacheTimes.append(elapsed) } else { plainTimes.append(elapsed) }
                }
            }
        }
        return (median(cacheTimes), median(plainTimes))
    }

    /// Counts bytes and drops them.
    final class Sink: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        let lock = NSLock()
        var bytes = 0
        var chunks = 0
        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            lock.withLock {
                bytes += data.count
                chunks += 1
            }
        }
        var error: (any Error)?
        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            lock.withLock { self.error = error }
            done.signal()
        }
    }

    /// How a streaming download is made: without a cache, through a cache whose answer is not
    /// stored (no freshness, memory store), or storable through a disk store.
    enum StreamVariant: String {
        case plain, cache, disk
    }

    /// In this process: downloads `megabytes` through a delegate-based session from an origin
    /// that writes the body as the client takes it, and prints the peak resident memory (and,
    /// for `disk`, whether the answer was stored). Run once per variant, each in a fresh process.
    static func streamPeak(megabytes: Int, variant: StreamVariant) {
        let origin = try! LoopbackOrigin()
        let total = megabytes << 20
        let stream = LoopbackOrigin.BodyStream(framing: .contentLength(total))
        let storable = variant == .disk ? [("Cache-Control", "max-age=600")] : []
        origin.route("/stream", response: .init(headers: [("Content-Type", "application/octet-stream")] + storable, stream: stream))
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-stream-\(UUID().uuidString)")
        var disk: DiskResponseStore?
        switch variant {
        case .plain: break
        case .cache: configuration.enableHTTPCaching(HTTPCache())
        case .disk:
            disk = try! DiskResponseStore(directory: directory, byteLimit: 4 * total, maxEntrySize: 2 * total)
            configuration.enableHTTPCaching(HTTPCache(store: disk!))
        }
        let sink = Sink()
        let session = URLSession(configuration: configuration, delegate: sink, delegateQueue: nil)
        session.dataTask(with: origin.url("/stream")).resume()
        let chunk = LoopbackOrigin.filler(count: 1 << 20)
        let writer = Task {
            _ = await stream.headersSent(timeout: 30)
            for index in 0..<megabytes {
                stream.write(chunk)
                if index % 4 == 3 { _ = await stream.flushed(timeout: 30) } // the client sets the pace
            }
            stream.finish()
        }
        sink.done.wait()
        writer.cancel()
        let received = sink.lock.withLock { (sink.bytes, sink.chunks) }
        print("stream_bytes=\(received.0) chunks=\(received.1) peak_rss_mb=\(Int(ResidentMemory.peakMiB())) stored=\(disk?.entryCount ?? 0)")
        if let error = sink.lock.withLock({ sink.error }) { print("error: \(error)") }
        disk?.close()
        try? FileManager.default.removeItem(at: directory)
        origin.stop()
    }

    /// Peak resident memory of the streaming download in `variant` minus the same without a
    /// cache, each measured in a fresh process.
    static func streamPeakDifference(megabytes: Int, variant: StreamVariant) -> (cache: Double, plain: Double, problems: [String]) {
        func run(_ variant: StreamVariant) -> (Double, String?) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            process.arguments = ["--stream-peak", variant.rawValue, String(megabytes)]
            let pipe = Pipe()
            process.standardOutput = pipe
            guard (try? process.run()) != nil else { return (.nan, "could not start the \(variant) streaming process") }
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let fields = Dictionary(output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { field -> (String, String)? in
                let pair = field.split(separator: "=", maxSplits: 1)
                return pair.count == 2 ? (String(pair[0]), String(pair[1])) : nil
            }, uniquingKeysWith: { $1 })
            let bytes = fields["stream_bytes"].flatMap(Int.init) ?? -1
            var problem = bytes == megabytes << 20 ? nil : "\(variant) streaming received \(bytes) bytes, not \(megabytes << 20)"
            if variant == .disk && fields["stored"] != "1" { problem = "the storable stream was not stored (stored=\(fields["stored"] ?? "?"))" }
            return (fields["peak_rss_mb"].flatMap(Double.init) ?? .nan, problem)
        }
        let (plain, plainProblem) = run(.plain)
        let (cache, cacheProblem) = run(variant)
        return (cache, plain, [plainProblem, cacheProblem].compactMap { $0 })
    }

    /// Origin requests for one key when 64 callers miss it at once (the origin answers after 100 ms).
    static func collapsedMisses(origin: LoopbackOrigin) -> Int {
        origin.route("/collapse") { _, hit in .init(text: "v\(hit)", delay: 0.1) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache())
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let group = DispatchGroup()
        for _ in 0..<64 {
            group.enter()
            session.dataTask(with: origin.url("/collapse")) { _, _, _ in group.leave() }.resume()
        }
        group.wait()
        return origin.requestCount("/collapse")
    }
}
