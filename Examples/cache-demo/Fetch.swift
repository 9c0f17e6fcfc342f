import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// `cache-demo fetch URL ...`: fetches a URL through the cache, repeatedly, with the method,
/// header fields and bodies the command line gives; a path alone is fetched from an embedded
/// origin.
enum FetchCommand {
    /// Runs the command. - Returns: the exit status.
    static func run(_ options: FetchOptions) async -> Int32 {
        let payloads: [Data]
        do {
            payloads = try options.payloads()
        } catch {
            Output.error(error.description)
            return 2
        }
        var origin: LoopbackOrigin?
        if options.usesEmbeddedOrigin {
            guard let started = DemoOrigin.start(path: options.url.path, ranged: options.storesPartialContent) else { return 1 }
            origin = started
        }
        defer { origin?.stop() }
        let url = origin?.url(options.url.relativeString) ?? options.url
        guard let cache = Runner.makeCache(store: options.store, windows: options.windows, policy: options.policy,
                                           keyRewriter: origin.map { DemoOrigin.stableKeys(port: $0.port) },
                                           storesPartialContent: options.storesPartialContent) else { return 1 }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let runner = Runner(session: URLSession(configuration: configuration))

        let observation = cache.observe { event in
            if options.json {
                if let line = event.jsonLine { Output.line(line.text) }
            } else if ["refreshed", "refreshFailed"].contains(event.kind.name) {
                Output.line("      \(event.summary)")
            }
        }
        defer { observation.cancel() }
        // Observers are called in the order they were added: the tracker, which lets the command
        // end, hears of a finished refresh after its line has been printed.
        let refreshes = RefreshTracker(cache)

        let status = await send(options.requests(to: url, payloads: payloads), options, url: url, runner: runner)
        await refreshes.wait()
        if let origin, !options.json {
            Output.line("the embedded origin received \(StatsReport.counted(origin.requestCount(), "request"))")
        }
        if let format = options.stats { StatsReport.write(cache.statistics, as: format, json: options.json) }
        return status
    }

    /// Sends the round of requests `repeatCount` times, printing a row (or a JSON line) for
    /// each, and stops at the first failure. - Returns: the exit status.
    private static func send(_ round: [URLRequest], _ options: FetchOptions, url: URL, runner: Runner) async -> Int32 {
        let labels = options.requestLabels
        let table = Table(columns: [("n", 4), ("elapsed s", 9), ("cache", 11), ("status", 6), ("bytes", 9), ("ms", 8), ("request", 24)])
        if !options.json {
            Output.line(heading(options, url: url))
            table.header()
        }
        var n = 0
        for _ in 1...options.repeatCount {
            for (request, label) in zip(round, labels) {
                n += 1
                if n > 1 && options.interval > 0 {
                    try? await Task.sleep(nanoseconds: UInt64(options.interval * 1e9))
                }
                do {
                    let row = try await runner.request(n, request)
                    if options.json {
                        Output.line(row.jsonLine.text)
                    } else {
                        table.row([String(n), format(row.elapsed, 2), row.cache, String(row.status),
                                   String(row.body.count), format(row.ms), label])
                    }
                } catch {
                    if options.json {
                        Output.line(JSONLine([("n", .int(n)), ("error", .string(error.localizedDescription))]).text)
                    }
                    Output.error("request \(n) to \(url.absoluteString) failed: \(error.localizedDescription)")
                    return 1
                }
            }
        }
        return 0
    }

    /// `fetching QUERY http://127.0.0.1:41234/search (the embedded origin) with 2 bodies in
    /// turn, 1 time(s); policy two-tier; windows: ...`: the method only when it is not GET, the
    /// origin only when it is the embedded one, the bodies only when there are some.
    static func heading(_ options: FetchOptions, url: URL) -> String {
        var text = "fetching "
        if options.effectiveMethod != "GET" { text += options.effectiveMethod + " " }
        text += url.absoluteString
        if options.usesEmbeddedOrigin { text += " (the embedded origin)" }
        if options.bodies.count == 1 { text += " with a body," }
        if options.bodies.count > 1 { text += " with \(options.bodies.count) bodies in turn," }
        return text + " \(options.repeatCount) time(s); policy \(options.policy); windows: fresh \(format(options.windows.fresh, 2)) s, "
            + "usable \(format(options.windows.usable, 2)) s"
    }
}
