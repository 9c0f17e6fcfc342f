import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching

/// `cache-demo fetch URL ...`: fetches a URL through the cache, repeatedly.
enum FetchCommand {
    /// Runs the command. - Returns: the exit status.
    static func run(_ options: FetchOptions) async -> Int32 {
        guard let cache = Runner.makeCache(store: options.store, windows: options.windows, policy: options.policy) else { return 1 }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let runner = Runner(session: URLSession(configuration: configuration))
        let table = Table(columns: [("n", 4), ("elapsed s", 9), ("cache", 11), ("status", 6), ("bytes", 9), ("ms", 8)])

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

        if !options.json {
            Output.line("fetching \(options.url.absoluteString) \(options.repeatCount) time(s); policy \(options.policy); windows: fresh \(format(options.windows.fresh, 2)) s, usable \(format(options.windows.usable, 2)) s")
            table.header()
        }
        var status: Int32 = 0
        for n in 1...options.repeatCount {
            if n > 1 && options.interval > 0 {
                try? await Task.sleep(nanoseconds: UInt64(options.interval * 1e9))
            }
            do {
                let row = try await runner.request(n, options.url)
                if options.json {
                    Output.line(row.jsonLine.text)
                } else {
                    table.row([String(n), format(row.elapsed, 2), row.cache, String(row.status),
                               String(row.body.count), format(row.ms)])
                }
            } catch {
                if options.json {
                    Output.line(JSONLine([("n", .int(n)), ("error", .string(error.localizedDescription))]).text)
                }
                Output.error("request \(n) to \(options.url.absoluteString) failed: \(error.localizedDescription)")
                status = 1
                break
            }
        }
        await refreshes.wait()
        if let format = options.stats { StatsReport.write(cache.statistics, as: format, json: options.json) }
        return status
    }
}
