import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

extension FidelityEndToEndTests {
    // MARK: - Status codes, must-understand

    @Test("RFC 9111 §3 end to end under .httpSemantics: a status with max-age is stored and served while fresh, then fetched again",
          arguments: [299, 400, 499, 500, 502, 503, 504, 599])
    func anyStatus(status: Int) async throws {
        let h = try Harness(configuration: Self.http)
        h.origin.route("/s") { _, hit in
            hit == 1 ? .init(status: status, headers: [("Cache-Control", "max-age=100")], text: "first") : .init(text: "second")
        }
        let stored = try await h.get("/s")
        #expect(stored.response.statusCode == status && stored.cacheStatusField?.hasSuffix("stored") == true)
        let fresh = try await h.get("/s")
        #expect(fresh.response.statusCode == status && fresh.text == "first" && fresh.status == .fresh)
        h.clock.advance(by: 100)
        let again = try await h.get("/s")
        #expect(again.response.statusCode == 200 && again.text == "second" && again.status == .expired)
        #expect(h.origin.requestCount("/s") == 2)
    }

    @Test("RFC 9111 §5.2.2.3 end to end: must-understand with an understood status is stored beside no-store; an unknown one is not")
    func mustUnderstand() async throws {
        let h = try Harness(configuration: Self.http)
        h.origin.routeVersioned("/ok", headers: [("Cache-Control", "max-age=100, no-store, must-understand")])
        h.origin.routeVersioned("/odd", headers: [("Cache-Control", "max-age=100, no-store, must-understand")], status: 299)
        _ = try await h.get("/ok")
        #expect(try await h.get("/ok").status == .fresh)
        let odd = try await h.get("/odd")
        #expect(odd.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=299; detail=not-stored-must-understand")
        #expect(try await h.get("/odd").text == "v2")
        #expect(h.recorder.count(.notStored(.statusNotUnderstood(299))) == 2)
    }

    // MARK: - HEAD, immutable, the two-tier default

    @Test("RFC 9111 §4 end to end: a HEAD is answered from a fresh stored GET, status and fields only")
    func head() async throws {
        let h = try Harness(configuration: Self.http)
        h.origin.route("/h") { _, _ in .init(headers: [("Cache-Control", "max-age=100"), ("ETag", "\"h\"")], text: "twelve bytes") }
        _ = try await h.get("/h")
        var request = URLRequest(url: h.origin.url("/h"))
        request.httpMethod = "HEAD"
        let head = try await fetch(h.session, request)
        #expect(head.response.statusCode == 200 && head.data.isEmpty)
        #expect(head.header("ETag") == "\"h\"" && head.header("Content-Length") == "12")
        #expect(head.cacheStatusField == "HTTPCaching; hit; ttl=100")
        #expect(h.origin.requestCount("/h") == 1)
        h.clock.advance(by: 200)
        _ = try await fetch(h.session, request)
        #expect(h.origin.requests(for: "/h").last?.method == "HEAD", "a stale entry does not answer a HEAD")
    }

    @Test("RFC 9111 §4.3.5: a 200 to a HEAD with the stored GET's validator and length updates it; another ETag updates nothing",
          arguments: [("\"v1\"", true), ("\"v2\"", false)])
    func headUpdatesStoredGet(headETag: String, updates: Bool) async throws {
        let h = try Harness(configuration: Self.http)
        h.origin.route("/h") { request, hit in
            request.method == "HEAD"
                ? .init(headers: [("Cache-Control", "max-age=1000"), ("ETag", headETag), ("Content-Length", "5"), ("X-Seen", "head")])
                : .init(headers: [("Cache-Control", "max-age=2"), ("ETag", "\"v1\"")], text: "get \(hit)")
        }
        #expect(try await h.get("/h").text == "get 1")
        h.clock.advance(by: 3)
        var head = URLRequest(url: h.origin.url("/h"))
        head.httpMethod = "HEAD"
        #expect(try await fetch(h.session, head).response.statusCode == 200)
        let again = try await h.get("/h")
        #expect((again.status == .fresh) == updates && again.text == (updates ? "get 1" : "get 3"))
        #expect(again.response.value(forHTTPHeaderField: "X-Seen") == (updates ? "head" : nil), "the HEAD's fields")
        #expect(h.origin.requestCount("/h") == (updates ? 2 : 3))
    }

    @Test("RFC 8246 end to end: a revalidating reload serves a fresh immutable entry; a stale one is revalidated")
    func immutable() async throws {
        let h = try Harness(configuration: Self.http)
        routeValidating(h.origin, "/i", etag: "\"i\"", extraHeaders: [("Cache-Control", "max-age=100, immutable")])
        routeValidating(h.origin, "/m", etag: "\"m\"", extraHeaders: [("Cache-Control", "max-age=100")])
        _ = try await h.get("/i")
        _ = try await h.get("/m")
        var reload = URLRequest(url: h.origin.url("/i"))
        reload.cachePolicy = .reloadRevalidatingCacheData
        var mutableReload = URLRequest(url: h.origin.url("/m"))
        mutableReload.cachePolicy = .reloadRevalidatingCacheData
        #expect(try await fetch(h.session, reload).status == .fresh)
        #expect(try await fetch(h.session, mutableReload).status == .revalidated, "without immutable, a reload revalidates")
        #expect(h.origin.requestCount("/i") == 1)
        h.clock.advance(by: 150)
        #expect(try await fetch(h.session, reload).status == .revalidated)
        #expect(h.origin.requestCount("/i") == 2)
    }

    @Test("two-tier end to end: the origin's no-cache revalidates every use; must-revalidate forbids stale and fallback; both can be turned off")
    func twoTierOriginDirectives() async throws {
        let h = try Harness()
        routeValidating(h.origin, "/n", etag: "\"n\"", extraHeaders: [("Cache-Control", "no-cache")])
        h.origin.route("/mr") { _, hit in
            hit == 1 ? .init(headers: [("Cache-Control", "must-revalidate")], text: "good") : .init(status: 503, text: "down")
        }
        _ = try await h.get("/n")
        for _ in 0..<3 { #expect(try await h.get("/n").status == .revalidated) }
        #expect(h.origin.requestCount("/n") == 4)
        _ = try await h.get("/mr")
        h.clock.advance(by: 61)
        let refused = try await h.get("/mr")
        #expect(refused.response.statusCode == 503 && refused.status == .bypass, "neither served stale nor as a fallback")

        let old = try Harness(configuration: CacheConfiguration(honorsOriginDirectives: false))
        routeValidating(old.origin, "/n", etag: "\"n\"", extraHeaders: [("Cache-Control", "no-cache")])
        _ = try await old.get("/n")
        #expect(try await old.get("/n").status == .fresh, "the windows alone decide")
    }

    // MARK: - Set-Cookie

    @Test("Set-Cookie end to end: stored with the field when allowed, served back on a hit, never replayed into the session's cookie storage")
    func setCookieStored() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        let jar = try #require(configuration.httpCookieStorage)
        let h = try Harness(configuration: CacheConfiguration(storesResponsesSettingCookies: true), sessionConfiguration: configuration)
        let seen = SeenHeaders()
        h.origin.route("/c") { request, hit in
            seen.record(request)
            return .init(headers: [("Set-Cookie", "n=\(hit); Path=/")], text: "c\(hit)")
        }
        let miss = try await h.get("/c")
        #expect(miss.header("Set-Cookie") == "n=1; Path=/" && miss.cacheStatusField?.hasSuffix("stored") == true)
        #expect(jar.cookies?.map(\.value) == ["1"], "the network's answer reaches the cookie storage once")

        // The next request carries the cookie just set; in a cache private to one user a cookie
        // does not partition entries, so it is a hit, as in a browser's private cache.
        let hit = try await h.get("/c")
        #expect(hit.status == .fresh && hit.text == "c1")
        #expect(hit.header("Set-Cookie") == "n=1; Path=/", "the stored field is served back")
        #expect(h.origin.requestCount("/c") == 1)
        for cookie in jar.cookies ?? [] { jar.deleteCookie(cookie) }
        #expect(try await h.get("/c").status == .fresh)
        #expect(jar.cookies?.isEmpty == true, "a hit never sets a cookie: the stored field is never replayed into storage")
    }

    @Test("Set-Cookie end to end, by default: never stored, so one user's cookie never reaches another")
    func setCookieNotStored() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/c") { _, hit in .init(headers: [("Set-Cookie", "user=\(hit)")], text: "c\(hit)") }
        let cache = HTTPCache()
        func session() -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            return URLSession(configuration: configuration)
        }
        let alice = try await fetch(session(), origin.url("/c"))
        let bob = try await fetch(session(), origin.url("/c"))
        #expect(alice.header("Set-Cookie") == "user=1" && bob.header("Set-Cookie") == "user=2")
        #expect(bob.status == .bypass && bob.cacheStatusField?.hasSuffix("detail=not-stored-set-cookie") == true)
        #expect(cache.entryCount == 0)
    }
}
