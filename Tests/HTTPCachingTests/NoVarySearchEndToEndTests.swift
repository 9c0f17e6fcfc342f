import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// `No-Vary-Search` end to end: one stored response answers every URL that differs only in
/// what its field lets differ. Checked against the loopback origin: how many requests it
/// received, which stored response each caller got (the body names the request target that
/// produced it), `Cache-Status`, events and statistics.
@Suite("No-Vary-Search end to end")
struct NoVarySearchEndToEndTests {
    /// Routes `path` to answer with its request target and hit number, with these fields.
    static func route(_ origin: LoopbackOrigin, _ path: String, nvs: String?, vary: String? = nil,
                      cacheControl: String = "max-age=600") {
        origin.route(path) { request, hit in
            var headers = [("Cache-Control", cacheControl)]
            if let nvs { headers.append(("No-Vary-Search", nvs)) }
            if let vary { headers.append(("Vary", vary)) }
            return .init(headers: headers, text: "\(request.target) #\(hit)")
        }
    }

    /// The cache's `Cache-Status` member of an answer.
    static func cacheStatus(_ result: FetchResult) -> String {
        result.response.value(forHTTPHeaderField: "Cache-Status") ?? ""
    }

    @Test("tracking parameters named in params=(...) are ignored: three URLs, one origin request; another id is a miss")
    func trackingParameters() async throws {
        let h = try Harness()
        Self.route(h.origin, "/article", nvs: #"params=("utm_source" "utm_medium")"#)
        let first = try await h.get("/article?id=1&utm_source=news")
        let second = try await h.get("/article?id=1&utm_source=mail&utm_medium=x")
        let third = try await h.get("/article?utm_medium=y&id=1")
        #expect(first.status == .miss && second.status == .fresh && third.status == .fresh)
        #expect([second.text, third.text].allSatisfy { $0 == "/article?id=1&utm_source=news #1" })
        #expect(h.origin.requestCount("/article") == 1)
        #expect(Self.cacheStatus(second).hasSuffix("; detail=no-vary-search"), "\(Self.cacheStatus(second))")
        #expect(!Self.cacheStatus(first).contains("detail"))
        let other = try await h.get("/article?id=2&utm_source=news")
        #expect(other.status == .miss && h.origin.requestCount("/article") == 2)
        #expect(h.cache.statistics.servedThroughNoVarySearch == 2)
        #expect(h.cache.statistics.requests[.fresh] == 2)
        let why = h.cache.manage.explain(URLRequest(url: h.origin.url("/article?id=1&utm_source=ad")))
        #expect(why.entry?.noVarySearch?.config == #"params=("utm_medium" "utm_source")"#)
        #expect(why.entry?.noVarySearch?.storedURL == h.origin.url("/article?id=1&utm_source=news").absoluteString)
    }

    @Test("the URL that stored the response gets it back, without the detail")
    func sameURL() async throws {
        let h = try Harness()
        Self.route(h.origin, "/same", nvs: #"params=("utm")"#)
        _ = try await h.get("/same?utm=1&a=2")
        let again = try await h.get("/same?utm=1&a=2")
        #expect(again.status == .fresh && !Self.cacheStatus(again).contains("detail"))
        #expect(h.cache.statistics.servedThroughNoVarySearch == 0)
    }

    @Test("key-order: the same parameters in another order are a hit; another value is a miss")
    func keyOrder() async throws {
        let h = try Harness()
        Self.route(h.origin, "/list", nvs: "key-order")
        _ = try await h.get("/list?a=1&b=2")
        let reordered = try await h.get("/list?b=2&a=1")
        #expect(reordered.status == .fresh && reordered.text == "/list?a=1&b=2 #1")
        #expect(try await h.get("/list?a=1&b=3").status == .miss)
        #expect(try await h.get("/list?a=1&b=2&b=2").status == .miss, "a parameter repeated is another query")
        #expect(h.origin.requestCount("/list") == 3)
    }

    @Test("except: only the listed parameters count, in the older drafts' syntax browsers send and in the latest")
    func except() async throws {
        let h = try Harness()
        Self.route(h.origin, "/feed", nvs: #"params, except=("page")"#)
        Self.route(h.origin, "/latest", nvs: #"except=("page")"#)
        for path in ["/feed", "/latest"] {
            _ = try await h.get(path + "?page=1&ref=home")
            let hit = try await h.get(path + "?utm=x&page=1")
            #expect(hit.status == .fresh && hit.text == path + "?page=1&ref=home #1")
            #expect(try await h.get(path + "?page=2&ref=home").status == .miss)
            #expect(try await h.get(path).status == .miss, "no page is another value of the parameter that counts")
            #expect(h.origin.requestCount(path) == 3)
        }
    }

    @Test("Vary applies within No-Vary-Search: each language has its variant, each found from any tracking parameter")
    func withVary() async throws {
        let h = try Harness()
        Self.route(h.origin, "/v", nvs: #"params=("utm")"#, vary: "Accept-Language")
        let english = ["Accept-Language": "en"], french = ["Accept-Language": "fr"]
        #expect(try await h.get("/v?utm=1", headers: english).status == .miss)
        #expect(try await h.get("/v?utm=2", headers: english).text == "/v?utm=1 #1")
        let frenchMiss = try await h.get("/v?utm=3", headers: french)
        #expect(frenchMiss.status == .miss && frenchMiss.text == "/v?utm=3 #2")
        let frenchHit = try await h.get("/v?utm=4", headers: french)
        let englishHit = try await h.get("/v", headers: english)
        #expect(frenchHit.status == .fresh && frenchHit.text == "/v?utm=3 #2")
        #expect(englishHit.status == .fresh && englishHit.text == "/v?utm=1 #1")
        #expect(h.origin.requestCount("/v") == 2)
    }

    @Test("a config changed by the origin: both stay usable for what each makes equivalent, newest first")
    func changedConfig() async throws {
        let h = try Harness()
        Self.route(h.origin, "/c", nvs: #"params=("a")"#)
        _ = try await h.get("/c?a=1&b=1")
        Self.route(h.origin, "/c", nvs: #"params=("b")"#)
        let second = try await h.get("/c?a=1&b=2")
        #expect(second.status == .miss, "under the first config, b=2 is another URL")
        #expect(try await h.get("/c?a=9&b=1").text == "/c?a=1&b=1 #1", "the first config still answers b=1")
        #expect(try await h.get("/c?a=1&b=7").text == "/c?a=1&b=2 #2", "the second answers a=1")
        #expect(try await h.get("/c?a=2&b=2").status == .miss)
        #expect(h.origin.requestCount("/c") == 3)
    }

    @Test("an answer without the field supersedes an entry stored under one, and the reverse")
    func superseded() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        Self.route(h.origin, "/s", nvs: #"params=("utm")"#, cacheControl: "max-age=10")
        _ = try await h.get("/s?utm=1")
        h.clock.advance(by: 60)
        Self.route(h.origin, "/s", nvs: nil, cacheControl: "max-age=10")
        #expect(try await h.get("/s?utm=2").status == .expired, "found through the field, stale")
        #expect(try await h.get("/s?utm=3").status == .miss, "the entry stored under the field was replaced")
        #expect(try await h.get("/s?utm=2").status == .fresh)
        #expect(h.origin.requestCount("/s") == 3)

        Self.route(h.origin, "/r", nvs: nil, cacheControl: "max-age=10")
        _ = try await h.get("/r?x=1")
        h.clock.advance(by: 60)
        Self.route(h.origin, "/r", nvs: "key-order", cacheControl: "max-age=10")
        #expect(try await h.get("/r?x=1").status == .expired)
        let again = try await h.get("/r?x=1")
        #expect(again.status == .fresh && again.text == "/r?x=1 #2", "the stale entry under the URL is gone")
        #expect(h.origin.requestCount("/r") == 2)
    }

    @Test("an unsafe method invalidates what is stored under the field for an equivalent URL, and nothing else")
    func invalidation() async throws {
        let h = try Harness()
        Self.route(h.origin, "/i", nvs: #"params=("utm")"#)
        _ = try await h.get("/i?utm=1")
        _ = try await h.get("/i?id=5&utm=1")
        var post = URLRequest(url: h.origin.url("/i?utm=2"))
        post.httpMethod = "POST"
        #expect(try await fetch(h.session, post).status == .bypass)
        #expect(h.recorder.count(.invalidated) == 1)
        #expect(try await h.get("/i?utm=3").status == .miss, "equivalent to the POST's URL: removed")
        #expect(try await h.get("/i?id=5&utm=9").status == .fresh, "another id: kept")
        #expect(h.origin.requestCount("/i") == 4)
        try h.cache.manage.removeEntry(for: URLRequest(url: h.origin.url("/i?id=5&utm=0")))
        #expect(try await h.get("/i?id=5").status == .miss, "removeEntry takes what the field stored too")
    }

    @Test("a response without the field, or with one that changes nothing, behaves as it always did")
    func withoutTheField() async throws {
        let h = try Harness()
        for (path, field) in [("/plain", nil), ("/invalid", #"params=("a"), except=("b")"#), ("/empty", "params=()")] {
            Self.route(h.origin, path, nvs: field)
            #expect(try await h.get(path + "?a=1&b=2").status == .miss)
            #expect(try await h.get(path + "?b=2&a=1").status == .miss)
            let hit = try await h.get(path + "?a=1&b=2")
            #expect(hit.status == .fresh && !Self.cacheStatus(hit).contains("detail"))
            #expect(h.origin.requestCount(path) == 2)
        }
        let keys = try h.cache.store.entryInfos().map(\.key)
        #expect(keys.count == 6 && keys.allSatisfy { !$0.url.contains("#") && $0.variant == nil }, "no index, no marked key")
    }

    @Test("management: a response stored by hand with the field answers equivalent URLs; their windows and removal reach it")
    func management() async throws {
        let h = try Harness()
        Self.route(h.origin, "/h", nvs: nil)
        let manage = h.cache.manage
        let response = try #require(HTTPURLResponse(url: h.origin.url("/h?utm=1"), statusCode: 200, httpVersion: "HTTP/1.1",
                                                    headerFields: ["No-Vary-Search": #"params=("utm")"#]))
        #expect(try manage.storeResponse(response, data: Data("by hand".utf8), for: URLRequest(url: h.origin.url("/h?utm=1"))))
        let other = URLRequest(url: h.origin.url("/h?utm=2"))
        #expect(manage.cachedEntry(for: other)?.body == Data("by hand".utf8))
        let hit = try await fetch(h.session, other)
        #expect(hit.status == .fresh && hit.text == "by hand")
        try manage.setWindows(.test(fresh: 1, usable: 2), for: URLRequest(url: h.origin.url("/h?utm=3")))
        #expect(manage.cachedEntry(for: other)?.windows == .test(fresh: 1, usable: 2))
        try manage.removeEntry(for: URLRequest(url: h.origin.url("/h")))
        #expect(!manage.hasEntry(for: other) && h.origin.requestCount("/h") == 0)
    }

    @Test("honorsNoVarySearch false: every URL is its own entry")
    func turnedOff() async throws {
        let h = try Harness(configuration: CacheConfiguration(honorsNoVarySearch: false))
        Self.route(h.origin, "/off", nvs: #"params=("utm")"#)
        _ = try await h.get("/off?utm=1")
        #expect(try await h.get("/off?utm=2").status == .miss)
        #expect(try await h.get("/off?utm=1").status == .fresh)
        #expect(try h.cache.store.entryInfos().count == 2)
    }

    @Test("a response cacher that removes the field stores the response under its own URL")
    func cacherRemovesTheField() async throws {
        let strip = ResponseCacher.modify { _, entry in
            var entry = entry
            entry.headers = entry.headers.filter { $0.key.lowercased() != "no-vary-search" }
            return entry
        }
        let h = try Harness(configuration: CacheConfiguration(responseCacher: strip))
        Self.route(h.origin, "/q", nvs: #"params=("utm")"#)
        _ = try await h.get("/q?utm=1")
        #expect(try await h.get("/q?utm=1").status == .fresh)
        #expect(try await h.get("/q?utm=2").status == .miss)
        #expect(try h.cache.store.entryInfos().allSatisfy { !NoVarySearch.isEntryKey($0.key) })
    }

    @Test("a stale entry found through the field is refreshed in the background and stored again under the same key")
    func backgroundRefresh() async throws {
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 60, usable: 3600)))
        Self.route(h.origin, "/b", nvs: #"params=("utm")"#)
        _ = try await h.get("/b?utm=1")
        h.clock.advance(by: 120)
        let stale = try await h.get("/b?utm=2")
        #expect(stale.status == .stale && stale.text == "/b?utm=1 #1")
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        let stored = h.recorder.events.filter { $0.kind == .stored }.map(\.key.url)
        #expect(stored.count == 2 && Set(stored).count == 1 && stored[0].hasSuffix("#no-vary-search"), "\(stored)")
        let fresh = try await h.get("/b?utm=3")
        #expect(fresh.status == .fresh && fresh.text == "/b?utm=2 #2")
        #expect(h.origin.requestCount("/b") == 2)

        // The origin drops the field: the refresh stores under the caller's own URL, and the
        // entry stored under the field goes.
        Self.route(h.origin, "/b", nvs: nil)
        h.clock.advance(by: 120)
        #expect(try await h.get("/b?utm=4").status == .stale)
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true), count: 2))
        #expect(try await h.get("/b?utm=4").text == "/b?utm=4 #3")
        #expect(try await h.get("/b?utm=5").status == .miss)
    }

    @Test("entries stored under different configs, or none, are never confused, though their URLs normalize alike",
          arguments: ["memory", "disk"])
    func noConfusion(store: String) async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: store == "disk" ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore())
        Self.route(h.origin, "/n", nvs: nil)
        _ = try await h.get("/n")
        Self.route(h.origin, "/n", nvs: #"params=("utm")"#)
        _ = try await h.get("/n?utm=1")
        #expect(try await h.get("/n").text == "/n #1", "the response for the URL itself")
        #expect(try await h.get("/n?utm=2").text == "/n?utm=1 #2")

        Self.route(h.origin, "/k", nvs: #"params=("a")"#)
        _ = try await h.get("/k?a=1&b=1")
        Self.route(h.origin, "/k", nvs: #"params=("x")"#)
        _ = try await h.get("/k?b=2&x=1")
        let other = try await h.get("/k?b=1&x=5")
        #expect(other.status == .miss, "under params=(\"x\") its key is the first entry's, stored under params=(\"a\")")
        #expect(h.origin.requestCount("/k") == 3 && h.origin.requestCount("/n") == 2)
    }

    @Test("explain names the config and the URL the entry was stored for; Cache-Status says detail=no-vary-search")
    func explain() async throws {
        let h = try Harness()
        Self.route(h.origin, "/e", nvs: #"params=("utm"), key-order"#)
        _ = try await h.get("/e?b=1&utm=1&a=2")
        let other = h.cache.manage.explain(URLRequest(url: h.origin.url("/e?a=2&b=1&utm=2")))
        let match = try #require(other.entry?.noVarySearch)
        #expect(match.config == #"params=("utm"), key-order"# && match.otherURL)
        #expect(match.storedURL == h.origin.url("/e?b=1&utm=1&a=2").absoluteString)
        #expect(other.outcome.cacheStatusField.hasSuffix("; detail=no-vary-search"), "\(other.outcome.cacheStatusField)")
        #expect(other.description.contains("No-Vary-Search: params=(\"utm\"), key-order (stored for "), "\(other.description)")
        #expect(other.reasons.contains { $0.contains("No-Vary-Search") })
        let own = h.cache.manage.explain(URLRequest(url: h.origin.url("/e?b=1&utm=1&a=2")))
        #expect(own.entry?.noVarySearch?.otherURL == false && !own.outcome.cacheStatusField.contains("detail"))
        let none = h.cache.manage.explain(URLRequest(url: h.origin.url("/e?a=3")))
        #expect(none.entry == nil)
        let json = String(decoding: try JSONEncoder().encode(other), as: UTF8.self)
        #expect(json.contains("\"noVarySearch\""))
    }
}
