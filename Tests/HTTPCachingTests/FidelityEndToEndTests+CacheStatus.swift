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
    // MARK: - Cache-Status

    @Test("RFC 9211 end to end: hit with ttl; fwd=uri-miss, request, stale, method and bypass with fwd-status, ttl and stored")
    func cacheStatusValues() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/s")
        h.origin.route("/error") { _, _ in .init(status: 500, text: "error") }
        let miss = try await h.get("/s")
        #expect(miss.cacheStatusField == "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=60; stored")
        #expect(miss.header(HTTPCachingHeaders.statusField) == "miss", "beside X-HTTP-Caching")
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
            throw HTTPCachingError.unavailable(reason: "reads fail in this test")
        }))
        h.origin.routeVersioned("/u")
        let answer = try await h.get("/u")
        #expect(answer.text == "v1" && answer.cacheStatusField == "HTTPCaching; fwd=miss; fwd-status=200; ttl=60; stored")
        #expect(h.recorder.count { $0.name == "storeFailed" } >= 1)
    }

    @Test("RFC 9211 end to end: a request that waited for another's answer says collapsed")
    func cacheStatusCollapsed() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.routeVersioned("/c", prefix: "c", holdingFirst: .head(gate))
        let request = URLRequest(url: h.origin.url("/c"))
        let first = StartedFetch(h.session, request)
        #expect(await gate.reached())
        let second = StartedFetch(h.session, request)
        let key = try h.cache.manage.key(for: request)
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 1 }, timeout: 30), "the second request waits in the first one's flight")
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
}
