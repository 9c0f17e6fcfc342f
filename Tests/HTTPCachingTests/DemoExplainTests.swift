import Foundation
import Testing
import HTTPCaching
import LoopbackOrigin
@testable import cache_demo

@Suite("The demo's explain command")
struct DemoExplainTests {
    @Test("explain takes a URL, a store, a policy, windows, headers, --fetch-first and --json")
    func parsing() throws {
        let command = try DemoCommand.parse(["explain", "http://a.test/x", "--store", "disk:/tmp/e", "--policy=http",
                                             "--fresh", "5", "--usable", "50", "-H", "Accept-Language: en", "--header=X-Key: a=b",
                                             "--fetch-first", "--json"])
        var expected = ExplainOptions(url: URL(string: "http://a.test/x")!)
        expected.store = .disk(path: "/tmp/e")
        expected.policy = .httpSemantics
        expected.windows = CacheWindows(fresh: 5, usable: 50)
        expected.headers = [.init(name: "Accept-Language", value: "en"), .init(name: "X-Key", value: "a=b")]
        expected.fetchFirst = true
        expected.json = true
        #expect(command == .explain(expected))
        #expect(try DemoCommand.parse(["explain", "https://a.test"]) == .explain(ExplainOptions(url: URL(string: "https://a.test")!)))
        #expect(DemoCommand.usage.contains("cache-demo explain URL") && DemoCommand.usage.contains("--fetch-first"))
    }

    @Test("bad explain command lines are usage errors", arguments: [
        (["explain"], "explain needs a URL"),
        (["explain", "http://a.test", "--repeat", "2"], "unknown option"),
        (["explain", "http://a.test", "--header", "no colon"], "takes 'Name: value'"),
        (["explain", "http://a.test", "-H", ": empty name"], "takes 'Name: value'"),
        (["explain", "http://a.test", "-H"], "needs a value"),
        (["fetch", "http://a.test", "--fetch-first"], "unknown option"),
        (["fetch", "http://a.test", "-H", ": empty name"], "takes 'Name: value'"),
    ])
    func usageErrors(arguments: [String], message: String) {
        expectUsageError(arguments, message)
    }

    @Test("explain reads the store and fetches nothing; --fetch-first fetches once, then explains the entry")
    func run() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/e") { _, _ in .init(headers: [("Cache-Control", "max-age=300"), ("ETag", "\"e\"")], text: "explained") }
        let url = origin.url("/e").absoluteString

        let empty = try await DemoProcessTests.run(["explain", url])
        #expect(empty.status == 0 && origin.requestCount("/e") == 0, "nothing fetched")
        #expect(empty.output.contains("entry    none") && empty.output.contains("miss: fetched from the origin"))

        let fetched = try await DemoProcessTests.run(["explain", url, "--fetch-first", "--policy", "http"])
        #expect(fetched.status == 0 && origin.requestCount("/e") == 1)
        for fragment in ["fetched once first: miss, status 200, 9 bytes", "policy   http (the configuration)",
                         "lifetime 300 s (max-age)", "validators: ETag \"e\"", "fresh: served from the store",
                         "Cache-Status: HTTPCaching; hit; ttl="] {
            #expect(fetched.output.contains(fragment), "\(fragment)")
        }

        let json = try await DemoProcessTests.run(["explain", url, "--fetch-first", "--json", "-H", "Authorization: Bearer s3cret"])
        #expect(json.status == 0)
        let lines = json.output.split(separator: "\n")
        #expect(lines.count == 1, "one JSON object and nothing else")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        let key = try #require(object["key"] as? [String: Any])
        #expect(key["credentialPartition"] as? Bool == true && !json.output.contains("s3cret"))
        #expect((object["outcome"] as? [String: Any])?["cacheStatus"] as? String == "fresh")
        #expect((object["entry"] as? [String: Any])?["statusCode"] as? Int == 200)
    }

    @Test("a disk store written by fetch is explained by a later explain run")
    func diskStore() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/kept")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-demo-explain-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = "disk:\(directory.path)"
        #expect(try await DemoProcessTests.run(["fetch", origin.url("/kept").absoluteString, "--store", store]).status == 0)
        let kept = try await DemoProcessTests.run(["explain", origin.url("/kept").absoluteString, "--store", store])
        #expect(kept.status == 0 && kept.output.contains("status 200, 2 bytes") && kept.output.contains("fresh: served from the store"))
        #expect(origin.requestCount() == 1)
    }
}
