import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

@Suite("Cache management and persistent caching end to end")
struct CacheManagementTests {
    @Test("removing a request's entry removes every variant of its URL and the variant index, whatever the request's own values")
    func removingVariants() async throws {
        let h = try Harness()
        h.origin.route("/v") { request, _ in .init(headers: [("Vary", "Accept-Language")], text: request.header("Accept-Language") ?? "-") }
        for language in ["en", "fr", "de"] { _ = try await h.get("/v", headers: ["Accept-Language": language]) }
        #expect(h.cache.entryCount == 5, "three variants, the entry under the URL, the index")
        var request = URLRequest(url: h.origin.url("/v"))
        request.setValue("it", forHTTPHeaderField: "Accept-Language")
        try h.cache.manage.removeEntry(for: request)
        #expect(h.cache.entryCount == 0)
        #expect(try await h.get("/v", headers: ["Accept-Language": "en"]).status == .miss)
    }

    @Test("look up, store by hand, remove one, remove since a date, remove all, size and count")
    func management() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/m")
        let a = URLRequest(url: h.origin.url("/m?a"))
        #expect(!h.cache.manage.hasEntry(for: a))
        _ = try await fetch(h.session, a)
        #expect(h.cache.manage.hasEntry(for: a))
        #expect(h.cache.entryCount == 1 && h.cache.totalBytes > 0)

        h.clock.advance(by: 100)
        let handMade = URLRequest(url: h.origin.url("/m?by-hand"))
        let response = HTTPURLResponse(url: handMade.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "text/plain"])!
        #expect(try h.cache.manage.storeResponse(response, data: Data("made by hand".utf8), for: handMade))
        let served = try await fetch(h.session, handMade)
        #expect(served.status == .fresh && served.text == "made by hand")
        #expect(h.origin.requestCount("/m") == 1)

        var reports: [RemovalProgress] = []
        try h.cache.removeEntries(storedSince: h.clock.now) { reports.append($0) }
        #expect(!h.cache.manage.hasEntry(for: handMade) && h.cache.manage.hasEntry(for: a))
        #expect(reports.last == RemovalProgress(removed: 1, total: 1))
        try h.cache.removeAll()
        #expect(h.cache.entryCount == 0 && h.cache.totalBytes == 0)
    }

    @Test("windows set ahead of time for one request apply to its entry now and when it is stored")
    func windowsAheadOfTime() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/w")
        let request = URLRequest(url: h.origin.url("/w"))
        try h.cache.manage.setWindows(.test(fresh: 600, usable: 6000), for: request)
        _ = try await fetch(h.session, request)
        #expect(h.cache.manage.cachedEntry(for: request)?.windows == .test(fresh: 600, usable: 6000))
        h.clock.advance(by: 300)
        #expect(try await fetch(h.session, request).status == .fresh)
        try h.cache.manage.setWindows(.test(fresh: 1, usable: 2), for: request)
        #expect(try await fetch(h.session, request).status == .expired, "the stored entry took the new windows")
    }

    @Test("a disk-backed cache answers a new process's session from the previous one's entries")
    func persistentAcrossCaches() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: try DiskResponseStore(directory: directory.url))
        h.origin.routeVersioned("/p", headers: [("Content-Type", "text/plain")])
        #expect(try await h.get("/p?x=1").status == .miss)
        (h.cache.store as? DiskResponseStore)?.close()

        // A new cache on the same directory, as a new process would open it.
        let clock = TestClock()
        clock.advance(by: 10)
        let cache = HTTPCache(store: try DiskResponseStore(directory: directory.url), now: clock.closure)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let second = try await fetch(URLSession(configuration: configuration), h.origin.url("/p?x=1"))
        #expect(second.status == .fresh && second.text == "v1")
        #expect(second.response.value(forHTTPHeaderField: "Age") == "10")
        #expect(second.response.value(forHTTPHeaderField: "Content-Type") == "text/plain")
        #expect(h.origin.requestCount("/p") == 1)
    }

    @Test("a response over the maximum entry size is delivered whole, not stored, reported as a bypass with the reason")
    func oversizedResponse() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: TieredResponseStore(back: try DiskResponseStore(directory: directory.url, maxEntrySize: 10_000)))
        let big = Data((0..<50_000).map { UInt8($0 % 256) })
        h.origin.route("/big", response: .init(body: big))
        let first = try await h.get("/big")
        #expect(first.data == big)
        #expect(h.cache.entryCount == 0)
        let second = try await h.get("/big")
        #expect(second.data == big && second.status == .bypass)
        #expect(h.origin.requestCount("/big") == 2)
        #expect(h.recorder.count(.notStored(.tooLarge(bytes: 50_000, limit: 10_000))) == 2, "every non-answer says why")
    }
}
