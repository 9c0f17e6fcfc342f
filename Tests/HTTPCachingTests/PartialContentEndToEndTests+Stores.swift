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

extension PartialContentEndToEndTests {
    @Test("a request for the whole on parts asks only for the bytes they lack (Range from the first gap, If-Range), and gets the whole (200) once they complete it")
    func completion() async throws {
        let body = Self.representation(1000)
        let h = try Harness(configuration: Self.partial)
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        _ = try await Self.ranged(h, "bytes=0-99")
        _ = try await Self.ranged(h, "bytes=300-399")
        let why = h.cache.manage.explain(URLRequest(url: h.origin.url("/media")))
        #expect(why.outcome.network == "a request for the bytes the stored parts lack (Range, If-Range)")
        #expect(why.outcome.cacheStatusField == "HTTPCaching; fwd=partial")
        #expect(why.entry?.partialContent == "bytes 0-99, 300-399 of 1000 (200 bytes in 2 spans)")
        let whole = try await Self.ranged(h, nil)
        #expect(whole.response.statusCode == 200 && whole.data == body && whole.status == .miss)
        #expect(whole.response.value(forHTTPHeaderField: "Content-Range") == nil)
        #expect(whole.response.value(forHTTPHeaderField: "Cache-Status")?.hasPrefix("HTTPCaching; fwd=partial; fwd-status=206") == true)
        let sent = h.origin.requests(for: "/media").last
        #expect(sent?.header("Range") == "bytes=100-" && sent?.header("If-Range") == "\"v1\"")
        #expect(try await Self.ranged(h, nil).status == .fresh, "stored whole")
        #expect(h.origin.requestCount("/media") == 3)
    }

    @Test("completing parts of a representation that changed: If-Range gets the new whole (200), which replaces them; a 206 that does not complete them asks once more for the whole")
    func completionOfAChangedRepresentation() async throws {
        let first = Self.representation(1000), second = Self.representation(1000, salt: 3)
        let h = try Harness(configuration: Self.partial)
        h.origin.route("/media") { request, hit in
            LoopbackOrigin.rangedResponse(to: request, representation: hit == 1 ? first : second,
                                          etag: hit == 1 ? "\"v1\"" : "\"v2\"", fields: [("Cache-Control", "max-age=3600")])
        }
        _ = try await Self.ranged(h, "bytes=0-99")
        let whole = try await Self.ranged(h, nil)
        #expect(whole.response.statusCode == 200 && whole.data == second)
        #expect(h.origin.requestCount("/media") == 2)
        #expect(try await Self.ranged(h, "bytes=0-9").data == second.subdata(in: 0..<10))

        let short = try Harness(configuration: Self.partial)
        short.origin.route("/media") { request, hit in
            var response = LoopbackOrigin.rangedResponse(to: request, representation: first, etag: "\"v1\"",
                                                         fields: [("Cache-Control", "max-age=3600")])
            if hit == 2 { // only part of what was asked for
                response.body = first.subdata(in: 100..<200)
                response.headers = response.headers.filter { $0.name != "Content-Range" } + [("Content-Range", "bytes 100-199/1000")]
            }
            return response
        }
        _ = try await Self.ranged(short, "bytes=0-99")
        let retried = try await Self.ranged(short, nil)
        #expect(retried.response.statusCode == 200 && retried.data == first)
        #expect(short.origin.requests(for: "/media").map { $0.header("Range") } == ["bytes=0-99", "bytes=100-", nil])
    }
}

extension PartialContentEndToEndTests {
    @Test("Last-Modified as the validator: combined when it is strong (Date a second later or more), not when it is weak (no Date)")
    func lastModifiedValidator() async throws {
        let body = Self.representation(1000)
        let modified = "Mon, 13 Nov 2023 10:00:00 GMT"
        var results: [Int] = []
        for date in ["Tue, 14 Nov 2023 22:13:20 GMT", nil] {
            let h = try Harness(configuration: Self.partial)
            var fields: [(name: String, value: String)] = [("Cache-Control", "max-age=3600")]
            if let date { fields.append(("Date", date)) }
            h.origin.routeRanged("/media", representation: body, lastModified: modified, fields: fields)
            _ = try await Self.ranged(h, "bytes=0-99")
            _ = try await Self.ranged(h, "bytes=200-299")
            let first = try await Self.ranged(h, "bytes=0-9")
            #expect(first.data == body.subdata(in: 0..<10))
            results.append(h.origin.requestCount("/media"))
        }
        #expect(results == [2, 3], "strong: the first part kept beside the second; weak: replaced by it")
    }
}

extension PartialContentEndToEndTests {
    @Test("a stale whole entry, a range, the origin failing (http policy): the range is served from the entry as a fallback (206), not the whole")
    func fallbackServesTheRange() async throws {
        let body = Self.representation(1000)
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics, storesPartialContent: true))
        h.origin.route("/media") { request, hit in
            guard hit == 1 else { return LoopbackOrigin.Response(status: 503, text: "down") }
            return LoopbackOrigin.rangedResponse(to: request, representation: body, etag: "\"v1\"",
                                                 fields: [("Cache-Control", "max-age=60")])
        }
        #expect(try await Self.ranged(h, nil).data == body)
        h.clock.advance(by: 120)
        let result = try await Self.ranged(h, "bytes=10-19")
        #expect(result.response.statusCode == 206 && result.data == body.subdata(in: 10..<20) && result.status == .fallback,
                "\(result.response.statusCode) \(result.response.value(forHTTPHeaderField: "Cache-Status") ?? "")")
        #expect(result.response.value(forHTTPHeaderField: "Content-Range") == "bytes 10-19/1000")
        #expect(h.origin.requests(for: "/media").last?.header("If-None-Match") == "\"v1\"")
    }
}

extension PartialContentEndToEndTests {
    @Test("one disk-backed cache combining parts and serving from them at once (the in-place hit path reads the rewritten entry)")
    func diskStoreInProcess() async throws {
        let directory = TemporaryDirectory()
        let body = Self.representation(4096)
        let h = try Harness(configuration: Self.partial, store: try DiskResponseStore(directory: directory.url))
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        #expect(try await Self.ranged(h, "bytes=0-99").data == body.subdata(in: 0..<100))
        #expect(try await Self.ranged(h, "bytes=10-19").data == body.subdata(in: 10..<20))
        #expect(try await Self.ranged(h, "bytes=100-199").data == body.subdata(in: 100..<200))
        let across = try await Self.ranged(h, "bytes=50-149")
        #expect(across.status == .fresh && across.data == body.subdata(in: 50..<150))
        let whole = try await Self.ranged(h, nil)
        #expect(whole.response.statusCode == 200 && whole.data == body)
        #expect(try await Self.ranged(h, nil).status == .fresh)
        #expect(try await Self.ranged(h, "bytes=4000-").data == body.subdata(in: 4000..<4096))
        #expect(h.origin.requestCount("/media") == 3)
    }
}
