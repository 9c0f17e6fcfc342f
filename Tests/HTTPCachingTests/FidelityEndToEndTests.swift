import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

extension FetchResult {
    /// The response's `Cache-Status` field.
    var cacheStatusField: String? { response.value(forHTTPHeaderField: "Cache-Status") }
    func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
}

@Suite("HTTP fidelity end to end: ranges, variants, invalidation, Cache-Status, cookies")
struct FidelityEndToEndTests {
    static let http = CacheConfiguration(policy: .httpSemantics)

    // MARK: - Ranges

    @Test("RFC 9110 §14 end to end: ranges of a fresh complete entry come from the store; other ranges reach the origin untouched")
    func ranges() async throws {
        let h = try Harness(configuration: Self.http)
        let seen = SeenHeaders()
        h.origin.route("/r") { request, _ in
            seen.record(request)
            if let range = request.header("Range") {
                return .init(status: 206, headers: [("Content-Range", "bytes 0-1/11")], text: "origin \(range)")
            }
            return .init(headers: [("Cache-Control", "max-age=3600"), ("ETag", "\"r\""), ("Content-Type", "text/plain")], text: "0123456789A")
        }
        _ = try await h.get("/r")
        for (field, body, contentRange) in [("bytes=0-1", "01", "bytes 0-1/11"), ("bytes=1-", "123456789A", "bytes 1-10/11"),
                                            ("bytes=-1", "A", "bytes 10-10/11"), ("bytes=4-400", "456789A", "bytes 4-10/11")] {
            let partial = try await h.get("/r", headers: ["Range": field])
            #expect(partial.response.statusCode == 206, "\(field)")
            #expect(partial.text == body)
            #expect(partial.header("Content-Range") == contentRange)
            #expect(partial.header("Content-Length") == String(body.utf8.count))
            #expect(partial.header("ETag") == "\"r\"" && partial.header("Content-Type") == "text/plain", "the stored fields")
            #expect(partial.status == .fresh && partial.cacheStatusField == "HTTPCaching; hit; ttl=3600")
        }
        let outside = try await h.get("/r", headers: ["Range": "bytes=20-"])
        #expect(outside.response.statusCode == 416 && outside.data.isEmpty)
        #expect(outside.header("Content-Range") == "bytes */11")
        #expect(h.origin.requestCount("/r") == 1, "every range above came from the store")

        let several = try await h.get("/r", headers: ["Range": "bytes=0-1,3-4"])
        #expect(several.response.statusCode == 206 && several.text == "origin bytes=0-1,3-4")
        #expect(seen.all.last?.header("Range") == "bytes=0-1,3-4", "the request reached the origin as it was")
        #expect(several.cacheStatusField == "HTTPCaching; fwd=request; fwd-status=206", "a fresh entry the request cannot use")
        let otherUnit = try await h.get("/r", headers: ["Range": "items=0-1"])
        #expect(otherUnit.text == "origin items=0-1")

        h.clock.advance(by: 4000)
        let stale = try await h.get("/r", headers: ["Range": "bytes=0-1"])
        #expect(stale.text == "origin bytes=0-1", "a stale entry does not answer a range")
        #expect(stale.cacheStatusField == "HTTPCaching; fwd=stale; fwd-status=206")
        #expect(h.origin.requestCount("/r") == 4)
        #expect(h.cache.cachedEntry(for: URLRequest(url: h.origin.url("/r")))?.body == Data("0123456789A".utf8),
                "the complete entry is kept: a range answer never replaces it")
    }

    // MARK: - Variants

    @Test("RFC 9111 §4.1 end to end: several variants of one URL live side by side, matched after normalising Accept-Language")
    func variants() async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        let languages = ["en", "fr", "de, en-US"]
        for language in languages {
            let miss = try await h.get("/v", headers: ["Accept-Language": language])
            #expect(miss.status == .miss)
        }
        #expect(try await h.get("/v", headers: ["Accept-Language": "fr"]).cacheStatusField == "HTTPCaching; hit; ttl=60")
        for (index, language) in languages.enumerated() {
            let hit = try await h.get("/v", headers: ["Accept-Language": language])
            #expect(hit.status == .fresh && hit.text == "\(language) \(index + 1)", "each variant is kept, none replaced")
        }
        let reordered = try await h.get("/v", headers: ["Accept-Language": "EN-us ,DE"])
        #expect(reordered.status == .fresh && reordered.text == "de, en-US 3", "case, whitespace and order do not matter")
        let other = try await h.get("/v", headers: ["Accept-Language": "it"])
        #expect(other.cacheStatusField == "HTTPCaching; fwd=vary-miss; fwd-status=200; ttl=60; stored")
        #expect(h.origin.requestCount("/v") == 4)
    }

    @Test("RFC 9111 §4.1 end to end: at most 8 variants per URL; storing a ninth removes the one stored longest ago")
    func boundedVariants() async throws {
        let h = try Harness()
        h.origin.route("/b") { request, hit in
            .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        for n in 0..<10 {
            #expect(try await h.get("/b", headers: ["Accept-Language": "l\(n)"]).status == .miss)
            h.clock.advance(by: 1)
        }
        #expect(h.cache.entryCount == 9, "8 variants and the entry under the URL")
        #expect(h.recorder.count(.evicted) == 2)
        for n in 2..<10 { #expect(try await h.get("/b", headers: ["Accept-Language": "l\(n)"]).status == .fresh) }
        let dropped = try await h.get("/b", headers: ["Accept-Language": "l0"])
        #expect(dropped.status == .miss && dropped.text == "l0 11")
        #expect(dropped.cacheStatusField?.contains("fwd=vary-miss") == true)
    }

    // MARK: - Invalidation

    @Test("RFC 9111 §4.4 end to end: a POST's success invalidates its URL and the same-origin URLs in Location and Content-Location")
    func invalidationByLocation() async throws {
        let h = try Harness()
        let other = try LoopbackOrigin()
        defer { other.stop() }
        h.origin.routeVersioned("/target")
        h.origin.routeVersioned("/described")
        h.origin.routeVersioned("/action")
        other.routeVersioned("/elsewhere")
        let elsewhere = other.url("/elsewhere")
        h.origin.route("/create") { request, _ in
            #expect(request.method == "POST" && request.body == Data("abc".utf8))
            return .init(status: 201, headers: [("Location", "/target"), ("Content-Location", "described"),
                                                ("Link", "unused")], text: "created")
        }
        h.origin.route("/move") { _, _ in .init(status: 200, headers: [("Location", elsewhere.absoluteString)], text: "moved") }
        h.origin.route("/fail") { _, _ in .init(status: 500, headers: [("Location", "/target")], text: "failed") }

        for path in ["/target", "/described", "/action"] { _ = try await h.get(path) }
        _ = try await fetch(h.session, elsewhere)
        for path in ["/target", "/described", "/action"] { #expect(try await h.get(path).status == .fresh) }

        func post(_ path: String) async throws -> FetchResult {
            var request = URLRequest(url: h.origin.url(path))
            request.httpMethod = "POST"
            request.httpBody = Data("abc".utf8)
            return try await fetch(h.session, request)
        }
        let failed = try await post("/fail")
        #expect(failed.response.statusCode == 500 && failed.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=500")
        #expect(try await h.get("/target").status == .fresh, "an error answer invalidates nothing")

        let created = try await post("/create")
        #expect(created.response.statusCode == 201 && created.text == "created")
        #expect(created.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=201")
        #expect(h.recorder.count(.invalidated) == 3, "its own URL, Location and Content-Location")
        let target = try await h.get("/target")
        #expect(target.status == .miss && target.text == "v2")
        #expect(try await h.get("/described").text == "v2")
        #expect(try await h.get("/action").status == .fresh, "another URL is untouched")

        _ = try await post("/move")
        #expect(try await fetch(h.session, elsewhere).status == .fresh, "a Location on another origin is never invalidated")
    }

    @Test("RFC 9111 §4.4 end to end: unknown methods invalidate too, and every stored variant of the URL goes",
          arguments: ["M-SEARCH", "PUT", "DELETE"])
    func invalidationOfVariants(method: String) async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            if request.method != "GET" { return .init(text: "done") }
            return .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        for language in ["en", "fr", "de"] { _ = try await h.get("/v", headers: ["Accept-Language": language]) }
        #expect(try await h.get("/v", headers: ["Accept-Language": "fr"]).status == .fresh)
        var request = URLRequest(url: h.origin.url("/v"))
        request.httpMethod = method
        request.setValue("en", forHTTPHeaderField: "Accept-Language")
        let answer = try await fetch(h.session, request)
        #expect(answer.text == "done" && answer.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=200")
        #expect(h.origin.requests(for: "/v").last?.method == method)
        #expect(h.cache.entryCount == 0, "the entry under the URL and all three variants")
        for language in ["en", "fr", "de"] {
            #expect(try await h.get("/v", headers: ["Accept-Language": language]).status == .miss)
        }
    }

    // MARK: - Cache-Status

    @Test("RFC 9211 end to end: hit with ttl; fwd=uri-miss, request, stale, method and bypass with fwd-status, ttl and stored")
    func cacheStatusValues() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/s")
        h.origin.route("/error") { _, _ in .init(status: 500, text: "error") }
        let miss = try await h.get("/s")
        #expect(miss.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=60; stored")
        #expect(miss.header(HTTPCachingHeaders.status) == "miss", "beside X-HTTP-Caching")
        #expect(try await h.get("/s").cacheStatusField == "HTTPCaching; hit; ttl=60")
        h.clock.advance(by: 10)
        let hit = try await h.get("/s")
        #expect(hit.cacheStatusField == "HTTPCaching; hit; ttl=50" && hit.header("Age") == "10")
        let forced = try await h.get("/s", headers: ["Cache-Control": "no-cache"])
        #expect(forced.cacheStatusField == "HTTPCaching; fwd=request; fwd-status=200; ttl=60; stored")
        h.clock.advance(by: 61)
        let stale = try await h.get("/s")
        #expect(stale.status == .stale && stale.cacheStatusField == "HTTPCaching; hit; ttl=-1")
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        h.clock.advance(by: 3 * 86_400)
        #expect(try await h.get("/s").cacheStatusField == "HTTPCaching; fwd=stale; fwd-status=200; ttl=60; stored")

        var post = URLRequest(url: h.origin.url("/s"))
        post.httpMethod = "POST"
        #expect(try await fetch(h.session, post).cacheStatusField == "HTTPCaching; fwd=method; fwd-status=200")
        var networkOnly = URLRequest(url: h.origin.url("/s"))
        networkOnly.cachingPolicy = .networkOnly
        #expect(try await fetch(h.session, networkOnly).cacheStatusField
                == "HTTPCaching; fwd=bypass; fwd-status=200; detail=not-stored-request-no-store")
        let conditional = try await h.get("/s", headers: ["If-None-Match": "\"x\""])
        #expect(conditional.cacheStatusField == "HTTPCaching; fwd=bypass; fwd-status=200")
        let error = try await h.get("/error")
        #expect(error.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=500; detail=not-stored-status")
        #expect(error.status == .bypass)
    }

    @Test("RFC 9211 end to end: a revalidation is fwd=stale with fwd-status=304; a fallback carries a detail; the HTTP policy's ttl")
    func cacheStatusValidation() async throws {
        let h = try Harness()
        routeValidating(h.origin, "/e", etag: "\"e\"")
        h.origin.route("/down") { _, hit in hit == 1 ? .init(text: "good") : .init(status: 503, text: "down") }
        _ = try await h.get("/e")
        _ = try await h.get("/down")
        h.clock.advance(by: 3 * 86_400)
        let revalidated = try await h.get("/e")
        #expect(revalidated.status == .revalidated)
        #expect(revalidated.cacheStatusField == "HTTPCaching; fwd=stale; fwd-status=304; ttl=60; stored")
        let fallback = try await h.get("/down")
        #expect(fallback.status == .fallback && fallback.text == "good")
        #expect(fallback.cacheStatusField == "HTTPCaching; fwd=stale; fwd-status=503; detail=\"the origin answered 503\"")

        let http = try Harness(configuration: Self.http)
        http.origin.route("/m") { _, _ in .init(headers: [("Cache-Control", "max-age=300"), ("Age", "100")], text: "m") }
        #expect(try await http.get("/m").cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=200; stored")
        http.clock.advance(by: 50)
        let hit = try await http.get("/m")
        #expect(hit.cacheStatusField == "HTTPCaching; hit; ttl=150" && hit.header("Age") == "150")
    }

    @Test("RFC 9211 end to end: fwd=miss when the store cannot be read")
    func cacheStatusMiss() async throws {
        let h = try Harness(store: InstrumentedStore(MemoryResponseStore(), afterRead: { _, _ in
            throw ResponseStoreError.unavailable(reason: "reads fail in this test")
        }))
        h.origin.routeVersioned("/u")
        let answer = try await h.get("/u")
        #expect(answer.text == "v1" && answer.cacheStatusField == "HTTPCaching; fwd=miss; fwd-status=200; ttl=60; stored")
        #expect(h.recorder.count { if case .storeFailed = $0 { return true } else { return false } } >= 1)
    }

    @Test("RFC 9211 end to end: a request that waited for another's answer says collapsed")
    func cacheStatusCollapsed() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.route("/c") { _, hit in
            var response = LoopbackOrigin.Response(text: "c\(hit)")
            if hit == 1 { response.headGate = gate }
            return response
        }
        let request = URLRequest(url: h.origin.url("/c"))
        let first = StartedFetch(h.session, request)
        #expect(await gate.reached())
        let second = StartedFetch(h.session, request)
        let key = try h.cache.key(for: request)
        #expect(await eventually { h.cache.flights.followers(of: key) == 1 }, "the second request waits in the first one's flight")
        gate.open()
        let leader = try await first.value, follower = try await second.value
        #expect(leader.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=60; stored")
        #expect(follower.text == "c1")
        #expect(follower.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=200; stored; collapsed")
        #expect(h.origin.requestCount("/c") == 1)
        #expect(h.recorder.count(.collapsed) == 1)
    }

    @Test("RFC 9211 end to end: the origin's own Cache-Status members come first; the cache's name is configurable")
    func cacheStatusList() async throws {
        let h = try Harness(configuration: CacheConfiguration(cacheName: "edge cache"))
        h.origin.route("/l") { _, _ in .init(headers: [("Cache-Status", "Origin; fwd=uri-miss")], text: "l") }
        #expect(try await h.get("/l").cacheStatusField == "Origin; fwd=uri-miss, \"edge cache\"; fwd=uri-miss; fwd-status=200; ttl=60; stored")
        #expect(try await h.get("/l").cacheStatusField == "Origin; fwd=uri-miss, \"edge cache\"; hit; ttl=60")
    }

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
