import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// `No-Vary-Search` over the stores: the equivalence table end to end, processes and hosts
/// sharing a disk directory or a Redis server, and the index (its bound, a damaged one).
@Suite("No-Vary-Search: table, stores, index")
struct NoVarySearchStoreTests {
    /// The equivalence rows whose URLs are queries (or nothing) on one path, and whose config
    /// reads the same with the older drafts' syntax accepted, as the cache reads responses.
    static var endToEndRows: [NoVarySearchTests.EquivalenceRow] { NoVarySearchTests.equivalenceRows.filter { row in
        [row.a, row.b].allSatisfy { $0.isEmpty || $0.hasPrefix("?") }
            && (row.legacy || NoVarySearch(fieldValue: row.field) == NoVarySearch(fieldValue: row.field, acceptingLegacySyntax: true))
    } }

    @Test("every row of the equivalence table (the draft's examples, both web-platform-tests files): the second URL is a hit exactly when equivalent")
    func table() async throws {
        let h = try Harness()
        #expect(Self.endToEndRows.count > 60)
        for (number, row) in Self.endToEndRows.enumerated() {
            let path = "/row\(number)"
            NoVarySearchEndToEndTests.route(h.origin, path, nvs: row.field)
            let first = try await fetch(h.session, try #require(URL(string: h.origin.url(path).absoluteString + row.a)))
            let second = try await fetch(h.session, try #require(URL(string: h.origin.url(path).absoluteString + row.b)))
            #expect(first.status == .miss, "\(row.testDescription)")
            #expect(second.status == (row.expected ? .fresh : .miss), "\(row.testDescription)")
            #expect(h.origin.requestCount(path) == (row.expected ? 1 : 2), "\(row.testDescription)")
        }
    }

    @Test("two processes sharing a disk directory: each finds the entry the other stored under the field, streamed or whole")
    func diskShared() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: try DiskResponseStore(directory: directory.url))
        NoVarySearchEndToEndTests.route(h.origin, "/d", nvs: #"params=("utm")"#)
        // The first process stores through a delegate, whose answer streams to the store's file.
        let collector = DelegateCollector()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(h.cache)
        let streaming = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        defer { streaming.finishTasksAndInvalidate() }
        streaming.dataTask(with: h.origin.url("/d?utm=1")).resume()
        _ = try await collector.result()

        let other = try Harness(store: try DiskResponseStore(directory: directory.url))
        let shared = try await fetch(other.session, h.origin.url("/d?utm=2"))
        #expect(shared.status == .fresh && shared.text == "/d?utm=1 #1")
        #expect(h.origin.requestCount("/d") == 1)

        // The second process stores under another config; the first finds it without any memory of it.
        NoVarySearchEndToEndTests.route(h.origin, "/d", nvs: "key-order")
        _ = try await fetch(other.session, h.origin.url("/d?b=1&a=1&utm=3"))
        let back = try await h.get("/d?a=1&utm=3&b=1")
        #expect(back.status == .fresh && back.text == "/d?b=1&a=1&utm=3 #2")
        #expect(h.origin.requestCount("/d") == 2)
    }

    @Test("two hosts sharing a Redis server: each finds the entry the other stored under the field", .redisServer)
    func redisShared() async throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = "nvs-\(UUID().uuidString):"
        let h = try Harness(store: try server.makeStore(prefix: prefix))
        let other = try Harness(store: try server.makeStore(prefix: prefix))
        NoVarySearchEndToEndTests.route(h.origin, "/redis", nvs: #"params, except=("id")"#)
        #expect(try await h.get("/redis?id=1&utm=a").status == .miss)
        let shared = try await fetch(other.session, h.origin.url("/redis?utm=b&id=1"))
        #expect(shared.status == .fresh && shared.text == "/redis?id=1&utm=a #1")
        _ = try await fetch(other.session, h.origin.url("/redis?id=2"))
        #expect(try await h.get("/redis?ref=x&id=2").text == "/redis?id=2 #2")
        #expect(h.origin.requestCount("/redis") == 2)
    }

    @Test("a damaged index is a miss, reported and removed; the next answer writes a good one")
    func damagedIndex() async throws {
        let h = try Harness()
        NoVarySearchEndToEndTests.route(h.origin, "/x", nvs: #"params=("utm")"#)
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/x?utm=1")))
        let indexKey = try #require(NoVarySearch.indexKey(for: key))
        try h.cache.store.write(CacheEntry(key: indexKey, url: h.origin.url("/x"), statusCode: 200, headers: [:],
                                           body: Data("params=(\"utm\")\nnot a config".utf8), storedAt: h.clock.now))
        #expect(try await h.get("/x?utm=1").status == .miss)
        #expect(h.recorder.count(where: { $0.name == "corrupted" }) == 1)
        let index = try #require(try h.cache.store.entry(for: indexKey))
        #expect(NoVarySearch.configs(inIndexBody: index.body) == [NoVarySearch(params: .ignoring(["utm"]))])
        #expect(try await h.get("/x?utm=2").status == .fresh)
    }

    @Test("an index lists at most 8 configs, newest first: entries under the oldest are found no more")
    func bounded() async throws {
        let h = try Harness()
        h.origin.route("/m") { request, hit in
            .init(headers: [("No-Vary-Search", "params=(\"p\(hit)\")")], text: "\(request.target) #\(hit)")
        }
        for number in 1...9 { _ = try await h.get("/m?k=\(number)") }
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/m")))
        let indexKey = try #require(NoVarySearch.indexKey(for: key))
        let index = try #require(try h.cache.store.entry(for: indexKey))
        let listed = try #require(NoVarySearch.configs(inIndexBody: index.body))
        #expect(listed.map(\.params.names) == (2...9).reversed().map { ["p\($0)"] })
        #expect(try await h.get("/m?k=9&p9=x").status == .fresh)
        #expect(try await h.get("/m?k=1&p1=x").status == .miss, "its config fell off the index")
        #expect(h.origin.requestCount("/m") == 10)
    }

    @Test("the index outlives the entries stored through it, and is written again about once per entry lifetime")
    func indexLifetime() async throws {
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 60, usable: 3600), errorFallbackWindow: nil))
        NoVarySearchEndToEndTests.route(h.origin, "/life", nvs: #"params=("utm")"#)
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/life")))
        let indexKey = try #require(NoVarySearch.indexKey(for: key))
        let start = h.clock.now
        _ = try await h.get("/life?id=1")
        #expect(try h.cache.store.entry(for: indexKey)?.usefulUntil == start.addingTimeInterval(7200))
        h.clock.advance(by: 100)
        _ = try await h.get("/life?id=2")
        #expect(try h.cache.store.entry(for: indexKey)?.storedAt == start, "it outlives the new entry: not written")
        h.clock.advance(by: 3900)
        _ = try await h.get("/life?id=3")
        let rewritten = try #require(try h.cache.store.entry(for: indexKey))
        #expect(rewritten.storedAt == start.addingTimeInterval(4000))
        #expect(rewritten.usefulUntil == start.addingTimeInterval(4000 + 7200))
        #expect(try await h.get("/life?id=3&utm=x").status == .fresh && h.origin.requestCount("/life") == 3)
    }
}
