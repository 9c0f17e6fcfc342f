import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

@Suite("The decision: pure, every branch")
struct CacheDecisionTests {
    let url = URL(string: "http://example.test/items?page=1")!
    let now = Date(timeIntervalSince1970: 1_000_000)
    let windows = CacheWindows.test(fresh: 60, usable: 3600)

    func entry(age: TimeInterval, windows: CacheWindows? = nil) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data("x".utf8),
                   storedAt: now.addingTimeInterval(-age), windows: windows)
    }

    func request(_ method: String = "GET", headers: [String: String] = [:]) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    @Test("no entry is a miss")
    func miss() {
        #expect(CacheDecision.decide(request: request(), entry: nil, now: now, windows: windows) == .forward(.miss))
    }

    @Test("ages below the fresh window are served fresh", arguments: [0.0, 1, 59.75])
    func fresh(age: TimeInterval) {
        #expect(CacheDecision.decide(request: request(), entry: entry(age: age), now: now, windows: windows)
                == .serve(.fresh, age: age))
    }

    @Test("from the fresh window up to the usable window: stale", arguments: [60.0, 61, 3599.75])
    func stale(age: TimeInterval) {
        #expect(CacheDecision.decide(request: request(), entry: entry(age: age), now: now, windows: windows)
                == .serve(.stale, age: age))
    }

    @Test("at or past the usable window: expired", arguments: [3600.0, 3601, 1e9])
    func expired(age: TimeInterval) {
        #expect(CacheDecision.decide(request: request(), entry: entry(age: age), now: now, windows: windows)
                == .forward(.expired))
    }

    @Test("an entry stored in the future (clock moved back) has age zero")
    func futureEntry() {
        #expect(CacheDecision.decide(request: request(), entry: entry(age: -500), now: now, windows: windows)
                == .serve(.fresh, age: 0))
    }

    @Test("zero windows: never fresh; equal windows: never stale")
    func degenerateWindows() {
        let none = CacheWindows.test(fresh: 0, usable: 0)
        #expect(CacheDecision.decide(request: request(), entry: entry(age: 0), now: now, windows: none) == .forward(.expired))
        let noStale = CacheWindows.test(fresh: 10, usable: 10)
        #expect(CacheDecision.decide(request: request(), entry: entry(age: 9), now: now, windows: noStale) == .serve(.fresh, age: 9))
        #expect(CacheDecision.decide(request: request(), entry: entry(age: 10), now: now, windows: noStale) == .forward(.expired))
    }

    @Test("unsafe methods invalidate", arguments: ["POST", "PUT", "PATCH", "DELETE", "post"])
    func invalidating(method: String) {
        #expect(CacheDecision.decide(request: request(method), entry: entry(age: 0), now: now, windows: windows) == .invalidate)
    }

    @Test("other methods bypass", arguments: ["HEAD", "OPTIONS", "TRACE"])
    func otherMethods(method: String) {
        #expect(CacheDecision.decide(request: request(method), entry: entry(age: 0), now: now, windows: windows) == .forward(.bypass))
    }

    @Test("the caller's own conditional or range request passes through",
          arguments: ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"])
    func conditional(header: String) {
        let decided = CacheDecision.decide(request: request(headers: [header: "x"]), entry: entry(age: 0), now: now, windows: windows)
        #expect(decided == .forward(.bypass))
    }

    @Test("windows: the request's own beat the entry's, which beat the default")
    func windowPrecedence() throws {
        let entryWindows = CacheWindows.test(fresh: 5, usable: 10)
        let fallback = CacheWindows.standard
        #expect(CacheDecision.windows(for: request(), entry: nil, default: fallback) == fallback)
        #expect(CacheDecision.windows(for: request(), entry: entry(age: 0, windows: entryWindows), default: fallback) == entryWindows)
        var own = request()
        own.cacheWindows = CacheWindows.test(fresh: 1, usable: 2)
        #expect(CacheDecision.windows(for: own, entry: entry(age: 0, windows: entryWindows), default: fallback)
                == CacheWindows.test(fresh: 1, usable: 2))
        #expect(own.cacheWindows == CacheWindows.test(fresh: 1, usable: 2))
        var malformed = request()
        malformed.setValue("fresh=9, usable=1", forHTTPHeaderField: HTTPCachingHeaders.windows)
        #expect(CacheDecision.windows(for: malformed, entry: nil, default: fallback) == fallback)
    }

    @Test("the default windows are 60 seconds and 2 days")
    func defaults() {
        #expect(CacheWindows.standard.fresh == 60)
        #expect(CacheWindows.standard.usable == 2 * 24 * 3600)
        #expect(CacheConfiguration().windows == .standard)
    }

    @Test("invalid windows are an error when they are made",
          arguments: [(-1.0, 10.0), (10, 5), (.nan, 10), (0, .infinity), (1, .nan)])
    func invalidWindows(fresh: TimeInterval, usable: TimeInterval) {
        #expect(throws: CacheConfigurationError.self) { try CacheWindows(fresh: fresh, usable: usable) }
    }

    @Test("valid windows are accepted", arguments: [(0.0, 0.0), (0, 10), (10, 10), (0.5, 1.5)])
    func validWindows(fresh: TimeInterval, usable: TimeInterval) throws {
        let windows = try CacheWindows(fresh: fresh, usable: usable)
        #expect(windows.fresh == fresh && windows.usable == usable)
    }

    func response(_ status: Int, _ headers: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    @Test("the default storable statuses are stored, others are not")
    func storableStatuses() {
        let codes = CacheConfiguration.defaultStorableStatusCodes
        #expect(codes == [200, 203, 204, 300, 301, 404, 405, 410, 414, 501])
        for status in 100..<600 {
            #expect(CacheDecision.isStorable(request: request(), response: response(status), statusCodes: codes)
                    == codes.contains(status), "status \(status)")
        }
    }

    @Test("no-store responses and non-GET requests are not stored")
    func notStorable() {
        let codes = CacheConfiguration.defaultStorableStatusCodes
        #expect(!CacheDecision.isStorable(request: request(), response: response(200, ["Cache-Control": "max-age=60, No-Store"]), statusCodes: codes))
        #expect(CacheDecision.isStorable(request: request(), response: response(200, ["Cache-Control": "max-age=60"]), statusCodes: codes))
        #expect(!CacheDecision.isStorable(request: request("POST"), response: response(200), statusCodes: codes))
        #expect(!CacheDecision.isStorable(request: request("HEAD"), response: response(200), statusCodes: codes))
        #expect(CacheDecision.isStorable(request: request(), response: response(500), statusCodes: [500]))
    }
}

@Suite("Cache keys")
struct CacheKeyTests {
    func key(_ string: String, _ method: String = "GET") -> CacheKey {
        CacheKey(method: method, url: URL(string: string)!)
    }

    @Test("scheme and host are lower-cased, default ports and fragments dropped, empty path is /")
    func normalization() {
        #expect(key("HTTP://Example.COM:80/A?b=C#frag").url == "http://example.com/A?b=C")
        #expect(key("https://example.com:443").url == "https://example.com/")
        #expect(key("https://example.com:80/x").url == "https://example.com:80/x")
        #expect(key("http://example.com:8080/x").url == "http://example.com:8080/x")
    }

    @Test("the query is part of the key; the method too")
    func queryAndMethod() {
        #expect(key("http://h/items?page=1") != key("http://h/items?page=2"))
        #expect(key("http://h/items?page=1") == key("http://H/items?page=1"))
        #expect(key("http://h/a", "get") == key("http://h/a", "GET"))
        #expect(key("http://h/a", "GET") != key("http://h/a", "HEAD"))
        #expect(key("http://h/a").description == "GET http://h/a")
    }

    @Test("query items can be dropped from a key")
    func removingQueryItems() {
        #expect(key("http://h/a?t=123&page=2").removingQueryItems(named: ["t"]) == key("http://h/a?page=2"))
        #expect(key("http://h/a?t=123").removingQueryItems(named: ["t"]) == key("http://h/a"))
        #expect(key("http://h/a").removingQueryItems(named: ["t"]) == key("http://h/a"))
    }
}
