import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching

/// `cache-demo explain URL ...`: what the cache would do with a GET for the URL, and why,
/// read from the store without the network (after one fetch with `--fetch-first`).
enum ExplainCommand {
    /// Runs the command. - Returns: the exit status.
    static func run(_ options: ExplainOptions) async -> Int32 {
        guard let cache = Runner.makeCache(store: options.store, windows: options.windows, policy: options.policy) else { return 1 }
        let configuration = URLSessionConfiguration.ephemeral
        let installation = configuration.enableHTTPCaching(cache)
        var request = URLRequest(url: options.url)
        for header in options.headers { request.addValue(header.value, forHTTPHeaderField: header.name) }

        if options.fetchFirst {
            let refreshes = RefreshTracker(cache)
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            do {
                let row = try await Runner(session: session).request(1, request)
                if !options.json {
                    Output.line("fetched once first: \(row.cache), status \(row.status), \(row.body.count) bytes\n")
                }
            } catch {
                Output.error("the request to \(options.url.absoluteString) failed: \(error.localizedDescription)")
                return 1
            }
            await refreshes.wait()
        }
        let explanation = installation.explain(request)
        if options.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            guard let data = try? encoder.encode(explanation) else {
                Output.error("the explanation could not be encoded")
                return 1
            }
            Output.line(String(decoding: data, as: UTF8.self))
        } else {
            Output.line(explanation.description)
        }
        return 0
    }
}
