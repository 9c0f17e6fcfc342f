import Foundation
import Testing
@testable import HTTPCaching
import LoopbackOrigin
@testable import cache_demo

/// The demo's statistics: `fetch --stats`, the walkthrough's summary, and their parsing.
@Suite("The demo's statistics")
struct DemoStatsTests {
    @Test("--stats, --stats=FORMAT and --stats FORMAT on fetch; --svg on the walkthrough; stats --store")
    func parsing() throws {
        let url = "http://a.test/s"
        func stats(_ arguments: [String]) throws -> FetchOptions? {
            guard case .fetch(let options) = try DemoCommand.parse(["fetch", url] + arguments) else { return nil }
            return options
        }
        #expect(try stats([])?.stats == nil)
        #expect(try stats(["--stats"])?.stats == .table)
        #expect(try stats(["--stats=table"])?.stats == .table)
        #expect(try stats(["--stats=prometheus"])?.stats == .prometheus)
        #expect(try stats(["--stats", "prometheus", "--repeat", "2"])?.stats == .prometheus)
        #expect(try stats(["--stats", "--repeat", "2"])?.repeatCount == 2, "a bare --stats leaves the next option alone")
        let json = try stats(["--json", "--stats"])
        #expect(json?.json == true && json?.stats == .table)

        #expect(try DemoCommand.parse(["--svg", "/tmp/w.svg"]) == .walkthrough(.memory, svgPath: "/tmp/w.svg"))
        #expect(try DemoCommand.parse(["--store=disk:/tmp/d", "--svg=/tmp/a.svg"]) == .walkthrough(.disk(path: "/tmp/d"), svgPath: "/tmp/a.svg"))
        #expect(try DemoCommand.parse(["--store", "memory"]) != .walkthrough(.memory, svgPath: "x.svg"))
        #expect(try DemoCommand.parse(["--svg", "w.svg", "--help"]) == .help)

        #expect(try DemoCommand.parse(["stats"]) == .stats(StatsOptions()))
        #expect(try DemoCommand.parse(["stats", "--store", "redis://127.0.0.1:6379/2", "--json"])
                == .stats(StatsOptions(store: .redis(url: "redis://127.0.0.1:6379/2"), json: true)))
        #expect(try DemoCommand.parse(["stats", "--store=disk:/tmp/s"]) == .stats(StatsOptions(store: .disk(path: "/tmp/s"))))
        #expect(DemoCommand.usage.contains("cache-demo stats [--store STORE]") && DemoCommand.usage.contains("--stats[=FORMAT]")
                && DemoCommand.usage.contains("--svg PATH"))
    }

    @Test("bad --stats, --svg and stats command lines are usage errors", arguments: [
        (["fetch", "http://a.test", "--stats=xml"], "--stats takes table or prometheus, not 'xml'"),
        (["fetch", "http://a.test", "--json", "--stats=prometheus"], "prints text, not JSON"),
        (["explain", "http://a.test", "--stats"], "unknown option '--stats'"),
        (["--svg"], "--svg needs a value"),
        (["--svg="], "--svg needs a file path"),
        (["--svg", "a.svg", "extra"], "unexpected argument 'extra'"),
        (["--bogus"], "unknown option '--bogus'"),
        (["stats", "--store"], "--store needs a value"),
        (["stats", "--store", "cloud"], "--store takes"),
        (["stats", "http://a.test"], "unexpected argument"),
        (["stats", "--svg", "a.svg"], "unknown option '--svg'"),
        (["fetch", "http://a.test", "--svg", "a.svg"], "unknown option '--svg'"),
    ])
    func usageErrors(arguments: [String], message: String) {
        expectUsageError(arguments, message)
    }

    @Test("a scripted run's statistics: the table, the Prometheus text, the JSON line and the summary give its numbers")
    func scriptedRun() async throws {
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 10, usable: 100)))
        h.origin.routeVersioned("/s")
        #expect(try await h.get("/s").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        #expect(try await h.get("/s").status == .fresh)
        h.clock.advance(by: 20)
        #expect(try await h.get("/s").status == .stale)
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        h.clock.advance(by: 200)
        #expect(try await h.get("/s").status == .expired)
        #expect(await h.recorder.wait(for: .stored, count: 3))
        let statistics = h.cache.statistics
        let table = StatsReport.table(statistics)
        for (name, value) in [("requests", 4), ("  fresh", 1), ("  stale", 1), ("  miss", 1), ("  expired", 1), ("  bypass", 0),
                              ("origin requests", 3), ("stored", 3), ("refreshes started", 1), ("refreshes succeeded", 1),
                              ("store entries", 1), ("bytes fetched from origin", 6), ("bytes served from the store", 4)] {
            #expect(Self.value(table, name) == value, "\(name)")
        }
        #expect(table.contains { $0.contains("hit ratio 50%") })
        let prometheus = statistics.prometheusText()
        for sample in [#"httpcaching_requests_total{status="stale"} 1"#, "httpcaching_origin_requests_total 3",
                       #"httpcaching_refreshes_total{outcome="succeeded"} 1"#, "httpcaching_store_entries 1"] {
            #expect(prometheus.contains(sample + "\n"), "\(sample)")
        }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(StatsReport.jsonLine(statistics).text.utf8)) as? [String: Any])
        let stats = try #require(object["stats"] as? [String: Any])
        #expect((stats["requests"] as? [String: Int]) == ["fresh": 1, "stale": 1, "revalidated": 0, "fallback": 0, "miss": 1, "expired": 1, "bypass": 0])
        #expect(stats["hit_ratio"] as? Double == 0.5 && stats["origin_requests"] as? Int == 3 && stats["request_count"] as? Int == 4)
        #expect((stats["refreshes"] as? [String: Int]) == ["started": 1, "succeeded": 1, "failed": 0])
        #expect(StatsReport.summary(statistics, originReceived: h.origin.requestCount()) == [
            "in this run: 4 requests, 2 answered from the store (1 fresh, 1 stale) and 2 by the origin (1 miss, 1 expired); hit ratio 50%",
            "the cache asked the origin 3 times (1 background refresh); the origin received 3 requests",
            "3 responses stored; the store holds 1 entry (\(statistics.bytes) bytes)",
        ])
    }

    @Test("the summary follows the counts: nothing from the network, a revalidation, requests that did not reach the origin")
    func summaryFollowsCounts() {
        var statistics = CacheStatistics(since: Date())
        statistics.requests = [.fresh: 2, .revalidated: 1, .fallback: 1]
        statistics.originRequests = 2
        statistics.entries = 1
        let summary = StatsReport.summary(statistics, originReceived: 1)
        #expect(summary[0] == "in this run: 4 requests, 4 answered from the store (2 fresh, 1 revalidated, 1 fallback) and 0 by the origin; hit ratio 100%")
        #expect(summary[1] == "the cache asked the origin 2 times (0 background refreshes, 1 revalidation answered 304); the origin received 1 request (1 did not reach it)")
        #expect(summary[2] == "0 responses stored; the store holds 1 entry (0 bytes)")
        #expect(StatsReport.summary(CacheStatistics(since: Date()), originReceived: 0)[0] == "in this run: 0 requests, 0 answered from the store and 0 by the origin; hit ratio 0%")
    }

    @Test("fetch --stats prints the table, --stats=prometheus the exposition text, --json --stats one JSON line")
    func fetchStats() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/f")
        let url = origin.url("/f").absoluteString
        let table = try await DemoProcessTests.run(["fetch", url, "--repeat", "3", "--stats"])
        #expect(table.status == 0)
        let lines = table.output.split(separator: "\n").map(String.init)
        #expect(Self.value(lines, "requests") == 3 && Self.value(lines, "  miss") == 1 && Self.value(lines, "  fresh") == 2)
        #expect(Self.value(lines, "origin requests") == 1)

        let prometheus = try await DemoProcessTests.run(["fetch", url, "--repeat", "2", "--stats=prometheus"])
        #expect(prometheus.status == 0)
        #expect(prometheus.output.contains(#"httpcaching_requests_total{status="fresh"} 1"#)
                && prometheus.output.contains("# TYPE httpcaching_origin_requests_total counter\nhttpcaching_origin_requests_total 1\n"))

        let json = try await DemoProcessTests.run(["fetch", url, "--repeat", "2", "--json", "--stats"])
        let objects = json.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(json.status == 0 && objects.count == json.output.split(separator: "\n").count, "every line is JSON")
        let stats = try #require(objects.last?["stats"] as? [String: Any], "the last line is the statistics")
        #expect((stats["requests"] as? [String: Int])?["fresh"] == 1 && stats["request_count"] as? Int == 2)
        #expect(origin.requestCount("/f") == 3, "each run missed once")
    }

    /// The number on a table line that starts with `name` followed by spaces, if any.
    static func value(_ lines: [String], _ name: String) -> Int? {
        for line in lines where line.hasPrefix(name + " ") {
            let rest = line.dropFirst(name.count).drop { $0 == " " }
            if let number = Int(rest.prefix { $0.isNumber }) { return number }
        }
        return nil
    }
}
