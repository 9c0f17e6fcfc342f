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

    /// The walkthrough's URLs, each a row of the timeline, with the windows their entries get.
    static let lanes = [Timeline.Lane(path: "/resource", fresh: windows.fresh, usable: windows.usable),
                        Timeline.Lane(path: "/validated", fresh: 0.5, usable: 1)]

    /// Runs the walkthrough. - Returns: the exit status.
    static func run(store choice: StoreChoice, svgPath: String?) async -> Int32 {
        let recorder = TimelineRecorder(title: "swift-http-caching walkthrough: how each request was served", lanes: lanes)
        guard let origin = startOrigin(recorder) else { return 1 }
        defer { origin.stop() }
        let url = origin.url("/resource")
        guard let cache = openCache(choice, origin: origin) else { return 1 }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let runner = Runner(session: URLSession(configuration: configuration))
        let following = recorder.follow(cache)
        let observation = cache.observe { event in
            if event.kind.name == "refreshed" { Output.line("      -> \(event.summary)") }
        }
        defer { observation.cancel(); following.cancel() }
        // After the printing observer: a refresh's line is out before the tracker lets the
        // walkthrough go on (observers are called in the order they were added).
        let refreshes = RefreshTracker(cache)

        let table = printIntro(url)
        var steps = Steps(runner: runner, table: table, origin: origin, url: url, recorder: recorder)
        do {
            try await play(&steps, refreshes: refreshes)
        } catch {
            Output.error("walkthrough request failed: \(error.localizedDescription)")
            return 1
        }
        let statistics = cache.statistics
        Output.line("\n" + StatsReport.summary(statistics, originReceived: origin.requestCount()).joined(separator: "\n"))
        Output.line("\n" + StatsReport.table(statistics).joined(separator: "\n"))
        guard let path = svgPath else { return 0 }
        let windows = lanes.map { "\($0.path) fresh \(TimelineSVG.seconds($0.fresh)) s, usable \(TimelineSVG.seconds($0.usable)) s" }
        recorder.setSubtitle("store: \(choice); windows: " + windows.joined(separator: "; "))
        return writeSVG(recorder.snapshot, to: path)
    }

    /// Writes the timeline as SVG. - Returns: the exit status.
    private static func writeSVG(_ timeline: Timeline, to path: String) -> Int32 {
        do {
            try Data(TimelineSVG(timeline).render().utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            Output.error("cannot write the timeline to \(path): \(error.localizedDescription)")
            return 1
        }
        Output.line("\nthe timeline is in \(path)")
        return 0
    }

    /// The embedded origin: `/resource`, whose body changes on every request, and
    /// `/validated`, which has an ETag; nil (the reason printed) if it cannot start.
    private static func startOrigin(_ recorder: TimelineRecorder) -> LoopbackOrigin? {
        guard let origin = DemoOrigin.make() else { return nil }
        origin.route("/resource") { request, hit in
            recorder.mark(.originRequest, url: request.path)
            return .init(headers: [("Content-Type", "text/plain")], text: "version \(hit)", delay: originLatency)
        }
        // A resource with a validator: answers 304 when the request's If-None-Match matches.
        origin.route("/validated") { request, _ in
            recorder.mark(.originRequest, url: request.path)
            if request.header("If-None-Match") == "\"r1\"" {
                return .init(status: 304, headers: [("ETag", "\"r1\"")], delay: originLatency)
            }
            return .init(headers: [("Content-Type", "text/plain"), ("ETag", "\"r1\"")], text: "tagged", delay: originLatency)
        }
        return origin
    }

    /// The cache over the chosen store, saying so if the store holds entries already; nil
    /// (the reason printed) if the store cannot be opened.
    private static func openCache(_ choice: StoreChoice, origin: LoopbackOrigin) -> HTTPCache? {
        let store: any ResponseStore
        do {
            store = try choice.makeStore()
        } catch {
            Output.error("cannot open the store: \(error)")
            return nil
        }
        // The origin's port changes from run to run; key its entries under one fixed name so
        // that a second run with a disk store finds the first run's entries.
        let stableKeys = CacheConfiguration(windows: windows, keyRewriter: DemoOrigin.stableKeys(port: origin.port))
        let cache = HTTPCache(configuration: stableKeys, store: store)
        if store.entryCount > 0 {
            Output.line("the store already holds \(store.entryCount) entr\(store.entryCount == 1 ? "y" : "ies") from an earlier run\n")
        }
        return cache
    }

    /// Prints what the walkthrough runs against and the table's header. - Returns: the table.
    private static func printIntro(_ url: URL) -> Table {
        Output.line("""
        swift-http-caching walkthrough
        origin: \(url.absoluteString) (answers "version N", N counting its requests, after \(Int(originLatency * 1000)) ms)
        windows: fresh \(format(windows.fresh)) s, usable \(format(windows.usable)) s

        """)
        let table = Table(columns: [("#", 3), ("elapsed s", 9), ("served", 11), ("status", 6), ("body", 10), ("ms", 7), ("origin hits", 11)])
        table.header()
        return table
    }

    /// The requests, in order: miss, fresh, stale and its refresh, expired; then, on
    /// `/validated`, a miss, a 304 revalidation and, with the origin stopped, a fallback.
    private static func play(_ steps: inout Steps, refreshes: RefreshTracker) async throws {
        // The second act uses windows of its own, set on the request: fresh 0.5 s, usable 1 s.
        var tagged = URLRequest(url: steps.origin.url("/validated"))
        tagged.cacheWindows = try? CacheWindows(fresh: 0.5, usable: 1)

        try await steps.step()                   // miss (or, from a disk store, whatever is stored)
        try await steps.step()                   // fresh
        try await pause(windows.fresh + 0.2)
        try await steps.step()                   // stale, refreshed in the background
        await refreshes.wait()
        try await steps.step()                   // fresh: the refreshed body
        try await pause(windows.usable + 0.2)
        try await steps.step()                   // expired
        try await steps.step()                   // fresh: the new body

        Output.line("\nvalidators and fallback: /validated sends an ETag; this request sets its own windows (fresh 0.5 s, usable 1 s)")
        try await steps.step(tagged)             // miss
        try await pause(1.2)
        try await steps.step(tagged)             // revalidated: 304
        try await pause(1.2)
        steps.origin.stop()
        steps.recorder.note("origin stopped")
        Output.line("      (the origin is stopped)")
        try await steps.step(tagged)             // fallback
    }

    /// What each way of being served means, printed under its row.
    private static let notes: [String: String] = [
        "miss": "miss: nothing stored, fetched from the origin and stored",
        "fresh": "fresh: younger than \(format(windows.fresh)) s, answered from the store, no network",
        "stale": "stale: past the fresh window, answered from the store at once; refreshing in the background",
        "expired": "expired: older than the \(format(windows.usable)) s usable window, fetched again; the new answer replaced it",
        "revalidated": "revalidated: expired, but it has an ETag; the origin answered 304 and the stored body was served",
        "fallback": "fallback: the origin is unreachable; the expired entry was served instead of an error",
    ]

    /// The walkthrough's numbered requests, each printed as a table row and a note.
    private struct Steps {
        let runner: Runner
        let table: Table
        let origin: LoopbackOrigin
        /// What a step without a request of its own asks for.
        let url: URL
        let recorder: TimelineRecorder
        /// How many requests were made.
        private(set) var count = 0

        init(runner: Runner, table: Table, origin: LoopbackOrigin, url: URL, recorder: TimelineRecorder) {
            self.runner = runner
            self.table = table
            self.origin = origin
            self.url = url
            self.recorder = recorder
        }

        /// Makes the next request (by default a GET for `url`), records it on the timeline
        /// and prints its row and note.
        mutating func step(_ request: URLRequest? = nil) async throws {
            count += 1
            let request = request ?? URLRequest(url: url)
            let start = recorder.now()
            let row = try await runner.request(count, request)
            recorder.request(count, url: request.url?.absoluteString ?? "", start: start, ms: row.ms, status: row.cache)
            table.row([String(count), format(row.elapsed, 2), row.cache, String(row.status),
                       String(decoding: row.body, as: UTF8.self), format(row.ms), String(origin.requestCount())])
            Output.line("      \(notes[row.cache] ?? row.cache)")
        }
    }

    private static func pause(_ seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
    }
}
