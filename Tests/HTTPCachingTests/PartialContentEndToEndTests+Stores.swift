import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
@testable import HTTPCaching

extension PartialContentEndToEndTests {
    @Test("the span bound: a part that would leave more than maxPartialSpans spans is not stored, and the stored parts stay")
    func spanBound() async throws {
        let body = Self.representation(1000)
        let h = try Harness(configuration: CacheConfiguration(storesPartialContent: true, maxPartialSpans: 2))
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        _ = try await Self.ranged(h, "bytes=0-9")
        _ = try await Self.ranged(h, "bytes=20-29")
        let third = try await Self.ranged(h, "bytes=40-49")
        #expect(third.data == body.subdata(in: 40..<50))
        #expect(third.response.value(forHTTPHeaderField: "Cache-Status")?.contains("detail=not-stored-too-many-spans") == true)
        #expect(h.recorder.count(.notStored(.tooManySpans(limit: 2))) == 1)
        #expect(try await Self.ranged(h, "bytes=40-49").status == .bypass, "not stored: to the origin again")
        #expect(try await Self.ranged(h, "bytes=20-29").status == .fresh, "the stored parts stay")
        let joining = try await Self.ranged(h, "bytes=10-19")
        #expect(joining.data == body.subdata(in: 10..<20) && h.recorder.count(.stored) == 3, "a part that joins two spans makes one")
        let why = h.cache.manage.explain(URLRequest(url: h.origin.url("/media")))
        #expect(why.entry?.partialContent == "bytes 0-29 of 1000 (30 bytes in 1 span)")
        #expect(h.origin.requestCount("/media") == 5)
    }

    @Test("Redis: two caches (two processes) sharing a server combine their parts, and one serves the range the other fetched", .redisServer)
    func redisSharedParts() async throws {
        let server = try RedisServer()
        defer { server.stop() }
        let body = Self.representation(1000)
        let shared = server.configuration()
        let first = try Harness(configuration: Self.partial, store: try RedisResponseStore(configuration: shared))
        first.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        // Redis expires a key at its entry's usefulUntil, in the server's time: the clock starts now.
        first.clock.advance(by: Date().timeIntervalSince(first.clock.now))
        _ = try await Self.ranged(first, "bytes=0-99")

        let cache = HTTPCache(configuration: Self.partial, store: try RedisResponseStore(configuration: shared), now: first.clock.closure)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        func get(_ range: String) async throws -> FetchResult {
            var request = URLRequest(url: first.origin.url("/media"))
            request.setValue(range, forHTTPHeaderField: "Range")
            return try await fetch(session, request)
        }
        #expect(try await get("bytes=10-19").status == .fresh, "the other process's part")
        let fetched = try await get("bytes=100-199")
        #expect(fetched.data == body.subdata(in: 100..<200))
        let combined = try await Self.ranged(first, "bytes=50-149")
        #expect(combined.status == .fresh && combined.data == body.subdata(in: 50..<150), "combined in the shared store")
        #expect(first.origin.requestCount("/media") == 2)
    }
}
