import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// A short, comparable description of a decision.
func outcome(_ action: CacheAction) -> String {
    switch action {
    case .serve(let plan):
        var text = plan.status == .stale && !plan.refresh ? "stale-no-refresh" : plan.status.rawValue
        switch plan.form {
        case .whole: break
        case .headersOnly: text += "-head"
        case .range(let bytes): text += "-range(\(bytes.lowerBound)-\(bytes.upperBound))"
        case .rangeNotSatisfiable: text += "-416"
        case .notModified: text += "-304"
        }
        return text
    case .forward(let plan):
        if plan.invalidates { return "invalidate" }
        if plan.passThrough { return "bypass" }
        var text: String
        switch plan.status {
        case .expired: text = plan.validate ? "revalidate" : "fetch"
        default: text = plan.status.rawValue
        }
        if plan.fallback { text += "+fallback" }
        if !plan.store && plan.status != .bypass { text += "+nostore" }
        return text
    case .fail(let error): return error == .notCached ? "unsatisfiable" : "fail(\(error))"
    }
}

struct FixedVerdict: CachePolicyRule {
    let verdict: CachePolicyVerdict
    func verdict(for context: CachePolicyContext) -> CachePolicyVerdict { verdict }
}

@Suite("The decision: pure, every branch")
struct CacheDecisionTests {
    static let url = URL(string: "http://example.test/items?page=1")!
    static let storedAt = Date(timeIntervalSince1970: 1_000_000)

    static func entry(headers: [String: String] = [:], windows: CacheWindows? = nil, status: Int = 200,
                      varyValues: [String: String] = [:]) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: status, headers: headers, body: Data("x".utf8),
                   storedAt: storedAt, windows: windows, varyValues: varyValues)
    }

    static func request(_ method: String = "GET", headers: [String: String] = [:]) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    static func decide(_ request: URLRequest = request(), entry: CacheEntry?, age: TimeInterval,
                       configuration: CacheConfiguration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600))) -> CacheAction {
        CacheDecision.decide(request: request, entry: entry, now: storedAt.addingTimeInterval(age), configuration: configuration)
    }

    @Test("no entry is a miss")
    func miss() {
        #expect(outcome(Self.decide(entry: nil, age: 0)) == "miss")
    }

    @Test("ages below the fresh window are served fresh, with their age", arguments: [0.0, 1, 59.75])
    func fresh(age: TimeInterval) {
        #expect(Self.decide(entry: Self.entry(), age: age) == .serve(ServePlan(status: .fresh, age: age, ttl: 60 - age, refresh: false)))
    }

    @Test("from the fresh window up to the usable window: stale, refreshed in the background", arguments: [60.0, 61, 3599.75])
    func stale(age: TimeInterval) {
        #expect(Self.decide(entry: Self.entry(), age: age) == .serve(ServePlan(status: .stale, age: age, ttl: 60 - age, refresh: true)))
    }

    @Test("at or past the usable window: expired, fetched; fallback allowed within the error window", arguments: [
        (3600.0, "fetch+fallback"), (3601.0, "fetch+fallback"), (604_799.0, "fetch+fallback"), (604_800.0, "fetch"), (1e9, "fetch"),
    ] as [(TimeInterval, String)])
    func expired(age: TimeInterval, expected: String) {
        #expect(outcome(Self.decide(entry: Self.entry(), age: age)) == expected)
    }

    @Test("an expired entry with a validator is revalidated with a conditional request")
    func expiredWithValidator() {
        #expect(outcome(Self.decide(entry: Self.entry(headers: ["ETag": "\"1\""]), age: 4000)) == "revalidate+fallback")
        #expect(outcome(Self.decide(entry: Self.entry(headers: ["Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"]), age: 4000)) == "revalidate+fallback")
    }

    @Test("URLRequest.cachePolicy maps onto the decision", arguments: [
        (URLRequest.CachePolicy.useProtocolCachePolicy, "fresh"), (.reloadIgnoringLocalCacheData, "fetch"),
        (.reloadIgnoringLocalAndRemoteCacheData, "fetch"), (.returnCacheDataElseLoad, "fresh"),
        (.returnCacheDataDontLoad, "fresh"), (.reloadRevalidatingCacheData, "revalidate+fallback"),
    ] as [(URLRequest.CachePolicy, String)])
    func requestCachePolicy(policy: URLRequest.CachePolicy, expected: String) {
        var request = Self.request()
        request.cachePolicy = policy
        #expect(outcome(Self.decide(request, entry: Self.entry(headers: ["ETag": "\"1\""]), age: 1)) == expected)
        #expect(outcome(Self.decide(request, entry: Self.entry(headers: ["ETag": "\"1\""]), age: 1e5))
                == (policy == .returnCacheDataElseLoad || policy == .returnCacheDataDontLoad ? "stale-no-refresh"
                    : policy == .reloadIgnoringLocalCacheData || policy == .reloadIgnoringLocalAndRemoteCacheData ? "fetch" : "revalidate+fallback"))
    }

    @Test("fallback can be turned off")
    func fallbackOff() {
        let configuration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), errorFallbackWindow: nil)
        #expect(outcome(Self.decide(entry: Self.entry(), age: 4000, configuration: configuration)) == "fetch")
    }

    @Test("an entry stored in the future (clock moved back) has age zero")
    func futureEntry() {
        #expect(Self.decide(entry: Self.entry(), age: -500) == .serve(ServePlan(status: .fresh, age: 0, ttl: 60, refresh: false)))
    }

    @Test("zero windows: never fresh; equal windows: never stale")
    func degenerateWindows() {
        let none = CacheConfiguration(windows: .test(fresh: 0, usable: 0))
        #expect(outcome(Self.decide(entry: Self.entry(), age: 0, configuration: none)) == "fetch+fallback")
        let noStale = CacheConfiguration(windows: .test(fresh: 10, usable: 10))
        #expect(outcome(Self.decide(entry: Self.entry(), age: 9, configuration: noStale)) == "fresh")
        #expect(outcome(Self.decide(entry: Self.entry(), age: 10, configuration: noStale)) == "fetch+fallback")
    }

    @Test("RFC 9111 section 4.4: every method not known to be safe invalidates, unknown ones too",
          arguments: ["POST", "PUT", "PATCH", "DELETE", "post", "M-SEARCH", "PROPPATCH"])
    func invalidating(method: String) {
        #expect(outcome(Self.decide(Self.request(method), entry: Self.entry(), age: 0)) == "invalidate")
    }

    @Test("safe methods other than GET and HEAD pass through, invalidating nothing", arguments: ["OPTIONS", "TRACE"])
    func otherMethods(method: String) {
        #expect(outcome(Self.decide(Self.request(method), entry: Self.entry(), age: 0)) == "bypass")
    }

    @Test("RFC 9111 section 4: a HEAD is answered from a fresh stored GET (head only), else passed through")
    func head() {
        #expect(outcome(Self.decide(Self.request("HEAD"), entry: Self.entry(), age: 1)) == "fresh-head")
        #expect(outcome(Self.decide(Self.request("HEAD"), entry: Self.entry(), age: 100)) == "bypass")
        #expect(outcome(Self.decide(Self.request("HEAD"), entry: nil, age: 0)) == "bypass")
    }

    @Test("the caller's own If-Match, If-Unmodified-Since or If-Range passes through, with If-None-Match too",
          arguments: ["If-Match", "If-Unmodified-Since", "If-Range"])
    func conditional(header: String) {
        #expect(outcome(Self.decide(Self.request(headers: [header: "x"]), entry: Self.entry(), age: 0)) == "bypass")
        #expect(outcome(Self.decide(Self.request(headers: [header: "x", "If-None-Match": "*"]), entry: Self.entry(), age: 0)) == "bypass")
    }

    static let lastModified = HTTPDate.format(storedAt.addingTimeInterval(-100))

    @Test("RFC 9111 §4.3.2: the caller's own If-None-Match or If-Modified-Since is answered from a fresh entry (304 when it is met); else it passes through",
          arguments: [
              (["If-None-Match": "\"v1\""], 0.0, "fresh-304"), (["If-None-Match": "W/\"v1\""], 0, "fresh-304"),
              (["If-None-Match": "\"a\", \"v1\""], 0, "fresh-304"), (["If-None-Match": "*"], 0, "fresh-304"),
              (["If-None-Match": "\"v2\""], 0, "fresh"), (["If-None-Match": "\"v2\"", "If-Modified-Since": lastModified], 0, "fresh"),
              (["If-Modified-Since": lastModified], 0, "fresh-304"),
              (["If-Modified-Since": HTTPDate.format(storedAt.addingTimeInterval(-200))], 0, "fresh"),
              (["If-Modified-Since": "not a date"], 0, "fresh"),
              (["If-None-Match": "\"v1\""], 100, "bypass"), // stale: the caller's request goes as it is
              (["If-None-Match": "\"v1\"", "Cache-Control": "no-cache"], 0, "bypass"),
          ] as [([String: String], TimeInterval, String)])
    func callerConditionalEvaluated(headers: [String: String], age: TimeInterval, expected: String) {
        let entry = Self.entry(headers: ["ETag": "\"v1\"", "Last-Modified": Self.lastModified])
        #expect(outcome(Self.decide(Self.request(headers: headers), entry: entry, age: age)) == expected)
        #expect(outcome(Self.decide(Self.request("HEAD", headers: headers), entry: entry, age: age))
                == expected.replacingOccurrences(of: "fresh", with: "fresh-head").replacingOccurrences(of: "-head-304", with: "-304"))
        #expect(outcome(Self.decide(Self.request(headers: headers), entry: nil, age: age)) == "bypass", "nothing stored")
    }

    @Test("RFC 9110 §13.1.2, §13.2.1: a stored 404, 410 or 301 never meets the caller's condition; a keyed body's condition passes through",
          arguments: [404, 410, 301])
    func callerConditionalNeedsRepresentation(status: Int) {
        let entry = Self.entry(headers: ["ETag": "\"v1\"", "Date": Self.lastModified, "Cache-Control": "max-age=600"], status: status)
        let http = CacheConfiguration(policy: .httpSemantics)
        for headers in [["If-None-Match": "*"], ["If-None-Match": "\"v1\""], ["If-Modified-Since": HTTPDate.format(Self.storedAt)]] {
            #expect(outcome(Self.decide(Self.request(headers: headers), entry: entry, age: 0, configuration: http)) == "fresh")
        }
        let query = Self.request("QUERY", headers: ["If-None-Match": "\"v1\""])
        let keyed = CacheDecision.decide(request: query, entry: Self.entry(headers: ["ETag": "\"v1\""]), keyedBody: true,
                                         now: Self.storedAt, configuration: CacheConfiguration(windows: .test(fresh: 60, usable: 3600)))
        #expect(outcome(keyed) == "bypass")
    }

    @Test("RFC 9110 section 14: a single bytes range is answered from a fresh complete entry; others pass through", arguments: [
        ("bytes=0-0", 1.0, "fresh-range(0-0)"), ("bytes=0-", 1, "fresh-range(0-0)"), ("bytes=-1", 1, "fresh-range(0-0)"),
        ("bytes=5-", 1, "fresh-416"), ("bytes=0-0,1-1", 1, "bypass"), ("items=0-1", 1, "bypass"), ("bytes=x-y", 1, "bypass"),
        ("bytes=0-0", 100, "bypass"),
    ] as [(String, TimeInterval, String)])
    func range(field: String, age: TimeInterval, expected: String) {
        #expect(outcome(Self.decide(Self.request(headers: ["Range": field]), entry: Self.entry(), age: age)) == expected)
    }

    @Test("windows: the request's own beat the entry's, which beat the default")
    func windowPrecedence() throws {
        let entryWindows = CacheWindows.test(fresh: 5, usable: 10)
        let fallback = CacheWindows.standard
        #expect(CacheDecision.windows(for: Self.request(), entry: nil, default: fallback) == fallback)
        #expect(CacheDecision.windows(for: Self.request(), entry: Self.entry(windows: entryWindows), default: fallback) == entryWindows)
        var own = Self.request()
        own.cacheWindows = CacheWindows.test(fresh: 1, usable: 2)
        #expect(CacheDecision.windows(for: own, entry: Self.entry(windows: entryWindows), default: fallback)
                == CacheWindows.test(fresh: 1, usable: 2))
        #expect(own.cacheWindows == CacheWindows.test(fresh: 1, usable: 2))
        var malformed = Self.request()
        malformed.setValue("fresh=9, usable=1", forHTTPHeaderField: HTTPCachingHeaders.windows)
        #expect(CacheDecision.windows(for: malformed, entry: nil, default: fallback) == fallback)
    }

    @Test("the default windows are 60 seconds and 2 days")
    func defaults() {
        #expect(CacheWindows.standard.fresh == 60)
        #expect(CacheWindows.standard.usable == 2 * 24 * 3600)
        #expect(CacheConfiguration().windows == .standard)
        #expect(CacheConfiguration().policy == .twoTier)
        #expect(CacheConfiguration().errorFallbackWindow == 604_800.0)
    }

    @Test("invalid windows are an error when they are made",
          arguments: [(-1.0, 10.0), (10, 5), (.nan, 10), (0, .infinity), (1, .nan)])
    func invalidWindows(fresh: TimeInterval, usable: TimeInterval) {
        #expect(throws: HTTPCachingError.self) { try CacheWindows(fresh: fresh, usable: usable) }
    }

    @Test("valid windows are accepted", arguments: [(0.0, 0.0), (0, 10), (10, 10), (0.5, 1.5)])
    func validWindows(fresh: TimeInterval, usable: TimeInterval) throws {
        let windows = try CacheWindows(fresh: fresh, usable: usable)
        #expect(windows.fresh == fresh && windows.usable == usable)
    }

    static func response(_ status: Int, _ headers: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    static func storable(_ response: HTTPURLResponse, request: URLRequest = request(),
                         _ configuration: CacheConfiguration = CacheConfiguration()) -> Bool {
        let headers = RequestHeaders(request)
        return Storability.reasonNotToStore(method: request.httpMethod?.uppercased() ?? "GET", response: ResponseHead(response),
                                            policy: configuration.policy,
                                            credentialed: !configuration.partitioning.inputs(headers).isEmpty,
                                            configuration: configuration) == nil
    }

    @Test("the default storable statuses are stored, others are not")
    func storableStatuses() {
        let codes = CacheConfiguration.defaultStorableStatusCodes
        #expect(codes == [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501])
        for status in 100..<600 {
            #expect(Self.storable(Self.response(status)) == (codes.contains(status) && status >= 200), "status \(status)")
        }
    }

    @Test("not stored: no-store, Vary: *, Set-Cookie (unless allowed), non-GET, credentials when turned off")
    func notStorable() {
        #expect(!Self.storable(Self.response(200, ["Cache-Control": "max-age=60, No-Store"])))
        #expect(Self.storable(Self.response(200, ["Cache-Control": "max-age=60, private"])))
        #expect(!Self.storable(Self.response(200, ["Vary": "Accept, *"])))
        #expect(Self.storable(Self.response(200, ["Vary": "Accept"])))
        #expect(!Self.storable(Self.response(200, ["Set-Cookie": "a=b"])))
        #expect(Self.storable(Self.response(200, ["Set-Cookie": "a=b"]), CacheConfiguration(storesResponsesSettingCookies: true)))
        #expect(!Self.storable(Self.response(200), request: Self.request("POST")))
        #expect(!Self.storable(Self.response(200), request: Self.request("HEAD")))
        #expect(Self.storable(Self.response(500), CacheConfiguration(storableStatusCodes: [500])))
        let credentialed = Self.request(headers: ["Authorization": "Bearer x"])
        #expect(Self.storable(Self.response(200), request: credentialed))
        #expect(!Self.storable(Self.response(200), request: credentialed, CacheConfiguration(storesCredentialedResponses: false)))
        #expect(outcome(Self.decide(credentialed, entry: Self.entry(), age: 0,
                                    configuration: CacheConfiguration(storesCredentialedResponses: false))) == "bypass")
    }
}
