import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

@Suite("End to end against the loopback origin")
struct EndToEndTests {
    @Test("miss, fresh, stale with a background refresh, the refreshed body fresh, then expiry")
    func transitions() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/item")

        let miss = try await h.get("/item")
        #expect(miss.status == .miss && miss.text == "v1")
        #expect(h.origin.requestCount("/item") == 1)

        h.clock.advance(by: 30)
        let fresh = try await h.get("/item")
        #expect(fresh.status == .fresh && fresh.text == "v1")
        #expect(fresh.response.value(forHTTPHeaderField: "Age") == "30")
        #expect(fresh.response.isFromCache)
        #expect(h.origin.requestCount("/item") == 1, "fresh: no network")

        h.clock.advance(by: 40) // age 70: past 60 s fresh, inside 2 days usable
        let stale = try await h.get("/item")
        #expect(stale.status == .stale && stale.text == "v1", "stale: the stored body at once")
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        #expect(h.origin.requestCount("/item") == 2, "one background refresh")

        let refreshed = try await h.get("/item")
        #expect(refreshed.status == .fresh && refreshed.text == "v2")
        #expect(refreshed.response.value(forHTTPHeaderField: "Age") == "0")

        h.clock.advance(by: 2 * 86_400)
        let expired = try await h.get("/item")
        #expect(expired.status == .expired && expired.text == "v3")
        #expect(!expired.response.isFromCache)
        #expect(h.origin.requestCount("/item") == 3)

        let kinds = h.recorder.kinds
        #expect(kinds.contains(.served(.miss)) && kinds.contains(.served(.fresh)) && kinds.contains(.served(.stale)) && kinds.contains(.served(.expired)))
        #expect(h.recorder.count(.stored) == 3)
    }

    @Test("a refresh that returns the same body reports it unchanged")
    func refreshUnchanged() async throws {
        let h = try Harness()
        h.origin.route("/same", response: .init(text: "same"))
        _ = try await h.get("/same")
        h.clock.advance(by: 61)
        #expect(try await h.get("/same").status == .stale)
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: false)))
    }

    @Test("completion handlers, async data(for:) and delegates get the same status, headers and body from a hit as from the network")
    func clientStyles() async throws {
        let h = try Harness()
        h.origin.route("/doc", response: .init(status: 200, headers: [("Content-Type", "application/json"), ("ETag", "\"abc\""), ("X-Custom", "kept")],
                                                body: Data((0..<5000).map { UInt8($0 % 251) })))
        let network = try await h.get("/doc")
        #expect(network.status == .miss)

        let viaHandler = try await h.get("/doc")
        let (asyncData, asyncResponse) = try await h.session.data(for: URLRequest(url: h.origin.url("/doc")))
        let collector = DelegateCollector()
        let delegateSession = URLSession(configuration: try #require(sessionConfiguration(of: h)), delegate: collector, delegateQueue: nil)
        delegateSession.dataTask(with: h.origin.url("/doc")).resume()
        let (delegateData, delegateResponse) = try await collector.result()

        for (data, response) in [(viaHandler.data, viaHandler.response as URLResponse), (asyncData, asyncResponse), (delegateData, delegateResponse)] {
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(data == network.data)
            #expect(http.cacheStatus == .fresh)
            for name in ["Content-Type", "ETag", "X-Custom"] {
                #expect(http.value(forHTTPHeaderField: name) == network.response.value(forHTTPHeaderField: name), "\(name)")
            }
        }
        #expect(h.origin.requestCount("/doc") == 1)
        delegateSession.finishTasksAndInvalidate()
    }

    /// The harness's cache on a new configuration, for a second session.
    func sessionConfiguration(of h: Harness) -> URLSessionConfiguration? {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(h.cache)
        return configuration
    }

    @Test("the query string is part of the key")
    func queryIsKey() async throws {
        let h = try Harness()
        h.origin.route("/items") { request, _ in .init(text: request.target) }
        #expect(try await h.get("/items?page=1").text == "/items?page=1")
        #expect(try await h.get("/items?page=2").text == "/items?page=2")
        let again = try await h.get("/items?page=1")
        #expect(again.text == "/items?page=1" && again.status == .fresh)
        #expect(h.origin.requestCount("/items") == 2)
    }

    @Test("a key rewriter can drop a cache-busting query item")
    func keyRewriter() async throws {
        let h = try Harness(configuration: CacheConfiguration(keyRewriter: { key, _ in key.removingQueryItems(named: ["t"]) }))
        h.origin.routeVersioned("/feed")
        #expect(try await h.get("/feed?t=1").text == "v1")
        let second = try await h.get("/feed?t=2")
        #expect(second.text == "v1" && second.status == .fresh)
        #expect(h.cache.store.entryCount == 1)
    }

    @Test("statuses outside the storable set and no-store pass through as bypass; a HEAD is answered from the fresh GET")
    func bypass() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/error", status: 500)
        h.origin.routeVersioned("/unavailable", status: 503)
        h.origin.routeVersioned("/private", headers: [("Cache-Control", "no-store")])
        h.origin.routeVersioned("/gone", status: 404)
        for path in ["/error", "/unavailable", "/private"] {
            let first = try await h.get(path)
            let second = try await h.get(path)
            #expect(first.status == .bypass && second.status == .bypass, "\(path)")
            #expect(first.text == "v1" && second.text == "v2", "\(path)")
        }
        #expect(try await h.get("/gone").status == .miss)
        let gone = try await h.get("/gone")
        #expect(gone.status == .fresh && gone.response.statusCode == 404 && gone.text == "v1")
        var head = URLRequest(url: h.origin.url("/gone"))
        head.httpMethod = "HEAD"
        let headResponse = try await fetch(h.session, head)
        #expect(headResponse.status == .fresh && headResponse.response.statusCode == 404 && headResponse.data.isEmpty)
        #expect(headResponse.response.value(forHTTPHeaderField: "Content-Length") == "2")
        #expect(h.origin.requestCount("/gone") == 1, "RFC 9111 section 4: a HEAD answered from the stored GET")
        #expect(h.cache.store.entryCount == 1)
        #expect(h.recorder.count(.served(.bypass)) == 6)
    }

    @Test("redirects: a completion-handler miss sent by Foundation's own class follows them unseen and stores nothing; the URL's next miss goes through the forwarding session, which stores the final response under the asked URL")
    func redirects() async throws {
        let h = try Harness()
        h.origin.route("/old", response: .init(status: 301, headers: [("Location", "/new")], text: "moved"))
        h.origin.routeVersioned("/new")
        let first = try await h.get("/old")
        #expect(first.text == "v1" && first.response.statusCode == 200)
        #expect(first.response.url?.path == "/new")
        #expect(first.response.value(forHTTPHeaderField: "Cache-Status")?.contains("not-stored-redirected") == true)
        #expect(h.recorder.count(.notStored(.redirectedUnseen)) == 1 && h.cache.store.entryCount == 0)
        let second = try await h.get("/old")
        #expect(second.status == .miss && second.text == "v2" && second.response.url?.path == "/new")
        let third = try await h.get("/old")
        #expect(third.status == .fresh && third.text == "v2" && third.response.url?.path == "/new")
        #expect(h.origin.requestCount("/old") == 2 && h.origin.requestCount("/new") == 2)
    }

    @Test("upload tasks keep their body (a custom protocol never sees it, so they are not intercepted)",
          arguments: ["POST", "PUT", "PATCH"])
    func uploads(method: String) async throws {
        let h = try Harness()
        h.origin.route("/up") { request, _ in .init(text: "\(request.method) got \(String(decoding: request.body, as: UTF8.self))") }
        _ = try await h.get("/up")
        var request = URLRequest(url: h.origin.url("/up"))
        request.httpMethod = method
        let answer: String = try await withCheckedThrowingContinuation { continuation in
            h.session.uploadTask(with: request, from: Data("the payload".utf8)) { data, _, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: String(decoding: data ?? Data(), as: UTF8.self)) }
            }.resume()
        }
        #expect(answer == "\(method) got the payload")
        #expect(h.cache.entryCount == 0, "the upload invalidated the stored GET")
    }

    @Test("URLRequest.cachePolicy keeps its meaning: reload ignores the store, returnCacheData policies read it")
    func requestCachePolicy() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/cp")
        var reload = URLRequest(url: h.origin.url("/cp"))
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        var dontLoad = URLRequest(url: h.origin.url("/cp"))
        dontLoad.cachePolicy = .returnCacheDataDontLoad
        var elseLoad = URLRequest(url: h.origin.url("/cp"))
        elseLoad.cachePolicy = .returnCacheDataElseLoad
        await #expect(throws: (any Error).self) { try await fetch(h.session, dontLoad) }
        #expect(h.origin.requestCount("/cp") == 0)
        #expect(try await h.get("/cp").text == "v1")
        let reloaded = try await fetch(h.session, reload)
        #expect(reloaded.text == "v2" && reloaded.status == .expired, "fresh, but the caller asked for a reload")
        h.clock.advance(by: 30 * 86_400)
        #expect(try await fetch(h.session, elseLoad).text == "v2", "any age")
        #expect(try await fetch(h.session, dontLoad).text == "v2")
        #expect(h.origin.requestCount("/cp") == 2)
    }

    @Test("an expired entry with no validator and no fallback is removed before the network is tried")
    func expiredRemoved() async throws {
        let h = try Harness(configuration: CacheConfiguration(errorFallbackWindow: nil))
        h.origin.route("/gone", response: .init(text: "old"))
        _ = try await h.get("/gone")
        h.clock.advance(by: 3 * 86_400)
        h.origin.stop()
        await #expect(throws: (any Error).self) { try await h.get("/gone") }
        #expect(h.cache.entryCount == 0)
    }

    @Test("the set of storable statuses is configurable")
    func storableStatusesConfigurable() async throws {
        let h = try Harness(configuration: CacheConfiguration(storableStatusCodes: [200, 500]))
        h.origin.routeVersioned("/error", status: 500)
        _ = try await h.get("/error")
        let second = try await h.get("/error")
        #expect(second.status == .fresh && second.response.statusCode == 500 && second.text == "v1")
    }

    @Test("POST, PUT, PATCH and DELETE pass through the cache, body intact, and their success removes the entry for their URL",
          arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func invalidation(method: String) async throws {
        let h = try Harness()
        h.origin.route("/thing") { request, hit in .init(text: "\(request.method) \(hit) \(String(decoding: request.body, as: UTF8.self))") }
        _ = try await h.get("/thing")
        #expect(try await h.get("/thing").status == .fresh)
        var write = URLRequest(url: h.origin.url("/thing"))
        write.httpMethod = method
        write.httpBody = Data("payload".utf8)
        let written = try await fetch(h.session, write)
        #expect(written.text == "\(method) 2 payload" && written.status == .bypass)
        #expect(h.cache.store.entryCount == 0)
        let after = try await h.get("/thing")
        #expect(after.status == .miss && after.text == "GET 3 ")
        #expect(h.recorder.count(.invalidated) == 1)
    }

    @Test("windows per session, per request and per response")
    func windowLevels() async throws {
        let perResponse = CacheConfiguration(
            windows: .test(fresh: 10, usable: 100),
            responseCacher: .windows { entry in
                entry.header("X-Fresh").flatMap(Double.init).map { .test(fresh: $0, usable: 1000) }
            })
        let h = try Harness(configuration: perResponse)
        h.origin.routeVersioned("/session")
        h.origin.routeVersioned("/response", headers: [("X-Fresh", "500")])
        _ = try await h.get("/session")
        _ = try await h.get("/response")
        h.clock.advance(by: 20)
        #expect(try await h.get("/session").status == .stale, "session windows: 10 s fresh")
        #expect(try await h.get("/response").status == .fresh, "the response's own: 500 s fresh")
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/response")))?.windows == .test(fresh: 500, usable: 1000))

        var request = URLRequest(url: h.origin.url("/response"))
        request.cacheWindows = .test(fresh: 1, usable: 5)
        #expect(try await fetch(h.session, request).status == .expired, "the request's own beat the response's")
        #expect(h.origin.requestCount("/response") == 2)
        #expect(h.origin.requestCount() == 3 || h.origin.requestCount() == 4, "the stale /session refresh may or may not have landed yet")
    }

    @Test("forwarded requests carry the caller's additional headers and cookies, never the private header")
    func forwardingKeepsSettings() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-Api-Key": "secret", "User-Agent": "tests/1.0"]
        let cookies = try #require(configuration.httpCookieStorage, "the ephemeral configuration's own storage")
        configuration.timeoutIntervalForRequest = 12
        let h = try Harness(sessionConfiguration: configuration)
        let seen = SeenHeaders()
        h.origin.route("/echo") { request, _ in
            seen.record(request)
            return .init(headers: [("Set-Cookie", "session=abc; Path=/")], text: "ok")
        }
        var request = URLRequest(url: h.origin.url("/echo?x=1"))
        request.cacheWindows = .test(fresh: 0, usable: 0)
        _ = try await fetch(h.session, request)
        _ = try await h.get("/echo?x=2")
        let first = try #require(seen.all.first), second = try #require(seen.all.last)
        #expect(first.header("X-Api-Key") == "secret")
        #expect(first.header("User-Agent") == "tests/1.0")
        #expect(first.header(HTTPCachingHeaders.windows) == nil)
        #expect(second.header("Cookie") == "session=abc", "the cookie set on the first response is sent again")
        #expect(cookies.cookies?.count == 1)
        #expect(configuration.urlCache is InstallationCarrier, "Foundation's own cache is replaced by one that stores nothing")
        #expect(configuration.urlCache?.cachedResponse(for: request) == nil)
        #expect(configuration.protocolClasses?.first is CachingURLProtocol.Type)
    }

    @Test("two sessions with different caches and windows do not affect each other")
    func isolatedSessions() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/shared")
        let clock = TestClock()
        let shortCache = HTTPCache(configuration: CacheConfiguration(windows: .test(fresh: 5, usable: 10)), now: clock.closure)
        let longCache = HTTPCache(configuration: CacheConfiguration(windows: .test(fresh: 500, usable: 1000)), now: clock.closure)
        let short = URLSessionConfiguration.ephemeral, long = URLSessionConfiguration.ephemeral
        short.enableHTTPCaching(shortCache)
        long.enableHTTPCaching(longCache)
        let shortSession = URLSession(configuration: short), longSession = URLSession(configuration: long)
        #expect(try await fetch(shortSession, origin.url("/shared")).text == "v1")
        #expect(try await fetch(longSession, origin.url("/shared")).text == "v2", "separate stores")
        clock.advance(by: 20)
        #expect(try await fetch(shortSession, origin.url("/shared")).status == .expired)
        #expect(try await fetch(longSession, origin.url("/shared")).status == .fresh)
        #expect(shortCache.store.entryCount == 1 && longCache.store.entryCount == 1)
    }

    @Test("schemes other than http and https are never intercepted")
    func otherSchemes() async throws {
        for string in ["file:///tmp/x", "data:text/plain,hello", "ftp://example.test/x", "ws://example.test/x"] {
            #expect(!CachingURLProtocol.canInit(with: URLRequest(url: URL(string: string)!)), "\(string)")
        }
        #expect(!CachingURLProtocol.canInit(with: URLRequest(url: URL(string: "HTTPS://example.test/")!)),
                "as Foundation's HTTP class, which refuses it: the scheme as written")
        let h = try Harness()
        let (data, _) = try await h.session.data(from: URL(string: "data:text/plain,hello")!)
        #expect(String(decoding: data, as: UTF8.self) == "hello")
        #expect(h.recorder.events.isEmpty)
    }

    @Test("events arrive on an AsyncStream too")
    func asyncStream() async throws {
        let h = try Harness()
        h.origin.route("/s", response: .init(text: "s"))
        let stream = h.cache.events()
        _ = try await h.get("/s")
        _ = try await h.get("/s")
        var kinds: [CacheEvent.Kind] = []
        for await event in stream {
            kinds.append(event.kind)
            #expect(event.key == CacheKey(url: h.origin.url("/s")))
            if kinds.count == 3 { break }
        }
        #expect(kinds == [.served(.miss), .stored, .served(.fresh)])
    }

    @Test("a full store evicts the least recently used entry and says so")
    func eviction() async throws {
        let h = try Harness(store: try MemoryResponseStore(byteLimit: 1 << 20, countLimit: 2))
        h.origin.routeVersioned("/e")
        _ = try await h.get("/e?1")
        _ = try await h.get("/e?2")
        _ = try await h.get("/e?1")   // a use: /e?2 is now least recent
        _ = try await h.get("/e?3")
        let evicted = h.recorder.events.filter { $0.kind == .evicted }
        #expect(evicted.map(\.key) == [CacheKey(url: h.origin.url("/e?2"))])
        #expect(evicted.first?.url == h.origin.url("/e?2"))
        #expect(try await h.get("/e?1").status == .fresh)
        #expect(try await h.get("/e?2").status == .miss)
    }

    @Test("management: look up, remove one, remove all")
    func management() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/m")
        _ = try await h.get("/m?a")
        _ = try await h.get("/m?b")
        let a = URLRequest(url: h.origin.url("/m?a"))
        #expect(h.cache.manage.cachedEntry(for: a).map { String(decoding: $0.body, as: UTF8.self) } == "v1")
        try h.cache.manage.removeEntry(for: a)
        #expect(h.cache.manage.cachedEntry(for: a) == nil)
        #expect(h.cache.store.entryCount == 1)
        try h.cache.removeAll()
        #expect(h.cache.store.entryCount == 0)
    }
}
