import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// `HTTPCache.statistics` counts what happened, exactly, and `prometheusText` exposes it in
/// the text format (checked here with a parser written from the format's grammar).
@Suite("Statistics and Prometheus metrics")
struct StatisticsTests {
    @Test("a scripted run: every status, collapsing, a refresh, not-stored reasons, bytes and origin requests counted exactly")
    func scriptedRun() async throws {
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 10, usable: 100)))
        h.origin.route("/a") { _, hit in .init(headers: [("ETag", "\"a\"")], text: "body-\(hit)") }
        h.origin.route("/e") { request, _ in
            request.header("If-None-Match") == "\"e\"" ? .init(status: 304) : .init(headers: [("ETag", "\"e\"")], text: "eeee")
        }
        h.origin.route("/private", response: .init(headers: [("Cache-Control", "no-store")], text: "nope"))
        h.origin.route("/slow") { _, _ in .init(text: "slow", delay: 0.2) }
        _ = try await h.get("/a")                                       // miss, stored
        _ = try await h.get("/a")                                       // fresh
        h.clock.advance(by: 20)
        _ = try await h.get("/a")                                       // stale, a refresh
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        _ = try await h.get("/e")                                       // miss
        h.clock.advance(by: 200)
        _ = try await h.get("/e")                                       // expired -> revalidated
        _ = try await h.get("/private")                                 // bypass, not stored
        let fetches = (0..<4).map { _ in StartedFetch(h.session, URLRequest(url: h.origin.url("/slow"))) }
        for fetch in fetches { _ = try await fetch.value }              // one miss, three collapsed

        let stats = h.cache.statistics
        #expect(stats.requests == [.miss: 6, .fresh: 1, .stale: 1, .revalidated: 1, .bypass: 1], "collapsed requests are misses")
        #expect(stats.collapsed == 3)
        #expect(stats.originRequests == h.origin.requestCount(), "every request the origin saw, the refresh included")
        #expect(stats.refreshesStarted == 1 && stats.refreshesSucceeded == 1 && stats.refreshesFailed == 0)
        #expect(stats.notStored["responseNoStore"] == 1)
        #expect(stats.stored == h.recorder.count(.stored))
        #expect(stats.bytesServedFromStore == "body-1".count + "body-1".count + "eeee".count + 3 * "slow".count)
        #expect(stats.bytesFetchedFromOrigin == ["body-1", "body-2", "eeee", "nope", "slow"].reduce(0) { $0 + $1.count })
        #expect(stats.entries == h.cache.entryCount && stats.bytes == h.cache.totalBytes)
        #expect(stats.requestCount == 10 && abs(stats.hitRatio - 3.0 / 10.0) < 1e-9, "\(stats.requests)")
        h.cache.resetStatistics()
        #expect(h.cache.statistics.requestCount == 0 && h.cache.statistics.originRequests == 0)
    }

    @Test("each installation counts its own sessions' requests; the store's counters are the cache's")
    func perInstallation() async throws {
        let h = try Harness()
        h.origin.route("/x", response: .init(text: "x"))
        let configuration = URLSessionConfiguration.ephemeral
        let other = configuration.enableHTTPCaching(h.cache)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        _ = try await h.get("/x")
        _ = try await fetch(session, h.origin.url("/x"))
        _ = try await fetch(session, h.origin.url("/x"))
        #expect(other.statistics.requests == [.fresh: 2] && other.statistics.originRequests == 0)
        #expect(other.statistics.stored == 1, "the store's counters are shared")
        #expect(h.cache.statistics.requestCount == 3 && h.cache.statistics.originRequests == 1)
    }

    @Test("the Prometheus text parses by the format's grammar and gives back every value, labels escaped")
    func prometheusText() throws {
        var stats = CacheStatistics(since: Date())
        stats.requests = [.fresh: 7, .miss: 2]
        stats.notStored = ["status": 3, "weird \"reason\"\\\n": 1]
        stats.originRequests = 5
        stats.bytesServedFromStore = 1234
        stats.entries = 9
        let families = try PrometheusText.parse(stats.prometheusText(prefix: "my_cache"))
        #expect(families["my_cache_requests_total"]?.type == "counter")
        #expect(families["my_cache_requests_total"]?.samples[["status": "fresh"]] == 7)
        #expect(families["my_cache_requests_total"]?.samples[["status": "stale"]] == 0, "every status, zero or not")
        #expect(families["my_cache_not_stored_total"]?.samples[["reason": "weird \"reason\"\\\n"]] == 1)
        #expect(families["my_cache_origin_requests_total"]?.samples[[:]] == 5)
        #expect(families["my_cache_served_bytes_total"]?.samples[["source": "store"]] == 1234)
        #expect(families["my_cache_store_entries"]?.type == "gauge" && families["my_cache_store_entries"]?.samples[[:]] == 9)
        #expect(families.count == 14 && families.values.allSatisfy { !$0.help.isEmpty })
    }
}

/// A parser for the Prometheus text exposition format 0.0.4, written from its grammar: `#
/// HELP name text`, `# TYPE name counter|gauge|...`, and samples `name{label="value",...}
/// number`, label values with `\\`, `\"` and `\n` escapes. Throws on anything else.
enum PrometheusText {
    struct Family {
        var help = ""
        var type = ""
        var samples: [[String: String]: Double] = [:]
    }

    struct Malformed: Error { let line: String }

    static func parse(_ text: String) throws -> [String: Family] {
        var families: [String: Family] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ", maxSplits: 1)
                guard parts.count == 2, isName(parts[0]) else { throw Malformed(line: String(line)) }
                if line.hasPrefix("# HELP ") { families[String(parts[0]), default: Family()].help = String(parts[1]) }
                guard !line.hasPrefix("# TYPE ") || ["counter", "gauge", "histogram", "summary", "untyped"].contains(String(parts[1]))
                else { throw Malformed(line: String(line)) }
                if line.hasPrefix("# TYPE ") { families[String(parts[0]), default: Family()].type = String(parts[1]) }
                continue
            }
            let (name, labels, value) = try sample(Substring(line))
            guard families[name]?.type.isEmpty == false else { throw Malformed(line: "sample before its TYPE: \(line)") }
            families[name]?.samples[labels] = value
        }
        return families
    }

    private static func isName(_ name: Substring) -> Bool {
        guard let first = name.first, first.isLetter || first == "_" || first == ":" else { return false }
        return name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
    }

    private static func sample(_ line: Substring) throws -> (String, [String: String], Double) {
        var rest = line
        let name = rest.prefix { $0 != "{" && $0 != " " }
        guard isName(name) else { throw Malformed(line: String(line)) }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let label = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(label.count)
                guard isName(label), rest.hasPrefix("=\"") else { throw Malformed(line: String(line)) }
                rest = rest.dropFirst(2)
                var value = ""
                while let character = rest.first, character != "\"" {
                    rest = rest.dropFirst()
                    guard character == "\\" else { value.append(character); continue }
                    switch rest.first {
                    case "\\": value.append("\\")
                    case "\"": value.append("\"")
                    case "n": value.append("\n")
                    default: throw Malformed(line: String(line))
                    }
                    rest = rest.dropFirst()
                }
                guard rest.first == "\"" else { throw Malformed(line: String(line)) }
                rest = rest.dropFirst()
                labels[String(label)] = value
                if rest.first == "," { rest = rest.dropFirst() }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " ", let value = Double(rest.dropFirst()) else { throw Malformed(line: String(line)) }
        return (String(name), labels, value)
    }
}
