import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// `cache-demo` with no arguments: every transition, in a few seconds of real time, against
/// an embedded origin whose body changes on every request.
enum Walkthrough {
    static let windows = CacheWindows(fresh: 1, usable: 3)
    static let originLatency: TimeInterval = 0.05

    /// Runs the walkthrough. - Returns: the exit status.
    static func run(store choice: StoreChoice) async -> Int32 {
        let origin: LoopbackOrigin
        do {
            origin = try LoopbackOrigin()
        } catch {
            Output.error("cannot start the embedded origin: \(error)")
            return 1
        }
        defer { origin.stop() }
        origin.route("/resource") { _, hit in
            .init(headers: [("Content-Type", "text/plain")], text: "version \(hit)", delay: originLatency)
        }
        // A resource with a validator: answers 304 when the request's If-None-Match matches.
        origin.route("/validated") { request, _ in
            if request.header("If-None-Match") == "\"r1\"" {
                return .init(status: 304, headers: [("ETag", "\"r1\"")], delay: originLatency)
            }
            return .init(headers: [("Content-Type", "text/plain"), ("ETag", "\"r1\"")], text: "tagged", delay: originLatency)
        }
        let url = origin.url("/resource")
        let store: any ResponseStore
        do {
            store = try choice.makeStore()
        } catch {
            Output.error("cannot open the store: \(error)")
            return 1
        }
        // The origin's port changes from run to run; key its entries under one fixed name so
        // that a second run with a disk store finds the first run's entries.
        let stableKeys = CacheConfiguration(windows: windows, keyRewriter: { key, _ in
            CacheKey(method: key.method, normalizedURL: key.url.replacingOccurrences(of: "127.0.0.1:\(origin.port)", with: "demo-origin"))
        })
        let cache = HTTPCache(configuration: stableKeys, store: store)
        if store.entryCount > 0 {
            Output.line("the store already holds \(store.entryCount) entr\(store.entryCount == 1 ? "y" : "ies") from an earlier run\n")
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let runner = Runner(session: URLSession(configuration: configuration))
        let observation = cache.observe { event in
            if case .refreshed = event.kind { Output.line("      -> \(event.summary)") }
        }
        defer { observation.cancel() }
        // After the printing observer: a refresh's line is out before the tracker lets the
        // walkthrough go on (observers are called in the order they were added).
        let refreshes = RefreshTracker(cache)

        Output.line("""
        swift-http-caching walkthrough
        origin: \(url.absoluteString) (answers "version N", N counting its requests, after \(Int(originLatency * 1000)) ms)
        windows: fresh \(format(windows.fresh)) s, usable \(format(windows.usable)) s

        """)
        let table = Table(columns: [("#", 3), ("elapsed s", 9), ("served", 11), ("status", 6), ("body", 10), ("ms", 7), ("origin hits", 11)])
        table.header()

        var n = 0
        let notes: [String: String] = [
            "miss": "miss: nothing stored, fetched from the origin and stored",
            "fresh": "fresh: younger than \(format(windows.fresh)) s, answered from the store, no network",
            "stale": "stale: past the fresh window, answered from the store at once; refreshing in the background",
            "expired": "expired: older than the \(format(windows.usable)) s usable window, fetched again; the new answer replaced it",
            "revalidated": "revalidated: expired, but it has an ETag; the origin answered 304 and the stored body was served",
            "fallback": "fallback: the origin is unreachable; the expired entry was served instead of an error",
        ]
        func step(_ request: URLRequest = URLRequest(url: url)) async throws {
            n += 1
            let row = try await runner.request(n, request)
            table.row([String(n), format(row.elapsed, 2), row.cache, String(row.status),
                       String(decoding: row.body, as: UTF8.self), format(row.ms), String(origin.requestCount())])
            Output.line("      \(notes[row.cache] ?? row.cache)")
        }
        // The second act uses windows of its own, set on the request: fresh 0.5 s, usable 1 s.
        var tagged = URLRequest(url: origin.url("/validated"))
        tagged.cacheWindows = try? CacheWindows(fresh: 0.5, usable: 1)

        do {
            try await step()                   // miss (or, from a disk store, whatever is stored)
            try await step()                   // fresh
            try await pause(windows.fresh + 0.2)
            try await step()                   // stale, refreshed in the background
            await refreshes.wait()
            try await step()                   // fresh: the refreshed body
            try await pause(windows.usable + 0.2)
            try await step()                   // expired
            try await step()                   // fresh: the new body

            Output.line("\nvalidators and fallback: /validated sends an ETag; this request sets its own windows (fresh 0.5 s, usable 1 s)")
            try await step(tagged)             // miss
            try await pause(1.2)
            try await step(tagged)             // revalidated: 304
            try await pause(1.2)
            origin.stop()
            Output.line("      (the origin is stopped)")
            try await step(tagged)             // fallback
        } catch {
            Output.error("walkthrough request failed: \(error.localizedDescription)")
            return 1
        }
        Output.line("\nthe origin answered \(origin.requestCount()) of \(n) requests (one of them with a 304); the cache answered the rest.")
        return 0
    }

    private static func pause(_ seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
    }
}
