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

    @Test("the caller's own conditional request passes through",
          arguments: ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range"])
    func conditional(header: String) {
        #expect(outcome(Self.decide(Self.request(headers: [header: "x"]), entry: Self.entry(), age: 0)) == "bypass")
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
        #expect(throws: CacheConfigurationError.self) { try CacheWindows(fresh: fresh, usable: usable) }
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

/// One row per case: the stored response's headers, the request's, the entry's age, the
/// policy, and what must happen. Stored at T; `Date` is T unless a row says otherwise.
@Suite("HTTP semantics and request directives, one row per case")
struct DirectiveTableTests {
    struct Row: CustomTestStringConvertible, Sendable {
        let name: String
        let response: [String: String]
        let request: [String: String]
        let age: TimeInterval
        let policy: CachingPolicy
        let honors: Bool
        let reload: Bool
        let expected: String
        var testDescription: String { name }

        init(_ name: String, response: [String: String] = [:], request: [String: String] = [:], age: TimeInterval,
             policy: CachingPolicy = .httpSemantics, honors: Bool = true, reload: Bool = false, _ expected: String) {
            self.name = name
            self.response = response
            self.request = request
            self.age = age
            self.policy = policy
            self.honors = honors
            self.reload = reload
            self.expected = expected
        }
    }

    static let date = HTTPDate.format(CacheDecisionTests.storedAt)
    static let tag = "\"v1\""

    static let rows: [Row] = [
        Row("max-age: fresh within it", response: ["Cache-Control": "max-age=100"], age: 50, "fresh"),
        Row("max-age: past it, no validator: fetched", response: ["Cache-Control": "max-age=100"], age: 150, "fetch+fallback"),
        Row("max-age: past it, ETag: revalidated", response: ["Cache-Control": "max-age=100", "ETag": tag], age: 150, "revalidate+fallback"),
        Row("weak ETag is a validator too", response: ["Cache-Control": "max-age=100", "ETag": "W/\"v1\""], age: 150, "revalidate+fallback"),
        Row("Expires minus Date: fresh", response: ["Date": date, "Expires": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(100))], age: 50, "fresh"),
        Row("Expires minus Date: expired", response: ["Date": date, "Expires": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(100))], age: 150, "fetch+fallback"),
        Row("an invalid Expires is in the past", response: ["Expires": "0"], age: 1, "fetch+fallback"),
        Row("max-age wins over Expires", response: ["Cache-Control": "max-age=10", "Date": date, "Expires": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(1000))], age: 50, "fetch+fallback"),
        Row("the Age header counts: 60 + 50 > 100", response: ["Cache-Control": "max-age=100", "Age": "60"], age: 50, "fetch+fallback"),
        Row("the Age header counts: 60 + 30 < 100", response: ["Cache-Control": "max-age=100", "Age": "60"], age: 30, "fresh"),
        Row("Date before arrival counts (apparent age 30 + 50 < 100)", response: ["Cache-Control": "max-age=100", "Date": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(-30))], age: 50, "fresh"),
        Row("Date before arrival counts (30 + 75 > 100)", response: ["Cache-Control": "max-age=100", "Date": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(-30))], age: 75, "fetch+fallback"),
        Row("heuristic: 10% of 1000 s since Last-Modified, fresh", response: ["Date": date, "Last-Modified": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(-1000))], age: 50, "fresh"),
        Row("heuristic: past 10%, revalidated with Last-Modified", response: ["Date": date, "Last-Modified": HTTPDate.format(CacheDecisionTests.storedAt.addingTimeInterval(-1000))], age: 150, "revalidate+fallback"),
        Row("no freshness information at all: fetched", age: 1, "fetch+fallback"),
        Row("response no-cache: always revalidated, no fallback", response: ["Cache-Control": "no-cache, max-age=100", "ETag": tag], age: 10, "revalidate"),
        Row("must-revalidate: fresh while fresh", response: ["Cache-Control": "max-age=100, must-revalidate"], age: 50, "fresh"),
        Row("must-revalidate: once stale, no stale serving and no fallback", response: ["Cache-Control": "max-age=100, must-revalidate", "ETag": tag], age: 150, "revalidate"),
        Row("s-maxage is ignored (shared caches only)", response: ["Cache-Control": "s-maxage=1000, max-age=10"], age: 50, "fetch+fallback"),
        Row("s-maxage alone gives no lifetime", response: ["Cache-Control": "s-maxage=1000"], age: 50, "fetch+fallback"),
        Row("private is allowed in a private cache", response: ["Cache-Control": "private, max-age=100"], age: 50, "fresh"),
        Row("stale-while-revalidate: served stale, refreshed", response: ["Cache-Control": "max-age=10, stale-while-revalidate=100"], age: 50, "stale"),
        Row("stale-while-revalidate: past it, fetched", response: ["Cache-Control": "max-age=10, stale-while-revalidate=100"], age: 150, "fetch+fallback"),
        Row("request no-cache: revalidated", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "no-cache"], age: 10, "revalidate+fallback"),
        Row("Pragma: no-cache: revalidated", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Pragma": "no-cache"], age: 10, "revalidate+fallback"),
        Row("request max-age below the age: revalidated", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "max-age=30"], age: 50, "revalidate+fallback"),
        Row("request max-age above the age: fresh", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "max-age=30"], age: 20, "fresh"),
        Row("request max-age=0: revalidated", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "max-age=0"], age: 0, "revalidate+fallback"),
        Row("request min-fresh: not fresh enough", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "min-fresh=60"], age: 50, "revalidate+fallback"),
        Row("request min-fresh: fresh enough", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "min-fresh=60"], age: 30, "fresh"),
        Row("request max-stale=100: stale served", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "max-stale=100"], age: 150, "stale"),
        Row("request max-stale=100: too stale", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "max-stale=100"], age: 250, "revalidate+fallback"),
        Row("request max-stale without a limit: any staleness", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "max-stale"], age: 100_000, "stale"),
        Row("max-stale does not override must-revalidate", response: ["Cache-Control": "max-age=100, must-revalidate", "ETag": tag], request: ["Cache-Control": "max-stale"], age: 150, "revalidate"),
        Row("only-if-cached: fresh is served", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "only-if-cached"], age: 50, "fresh"),
        Row("only-if-cached: nothing usable is 504", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "only-if-cached"], age: 150, "unsatisfiable"),
        Row("request no-store: served from the store, the answer not stored", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "no-store"], age: 150, "fetch+fallback+nostore"),
        Row("two-tier honours the origin's no-cache: revalidated before each use, no fallback", response: ["Cache-Control": "no-cache", "ETag": tag], age: 30, policy: .twoTier, "revalidate"),
        Row("two-tier honours must-revalidate: fresh within the window", response: ["Cache-Control": "must-revalidate"], age: 30, policy: .twoTier, "fresh"),
        Row("two-tier honours must-revalidate: no stale serving, no fallback", response: ["Cache-Control": "must-revalidate"], age: 70, policy: .twoTier, "fetch"),
        Row("two-tier honours proxy-revalidate like must-revalidate", response: ["Cache-Control": "proxy-revalidate", "ETag": tag], age: 70, policy: .twoTier, "revalidate"),
        Row("two-tier with honorsOriginDirectives off ignores response directives", response: ["Cache-Control": "no-cache, must-revalidate"], age: 70, policy: .twoTier, honors: false, "stale"),
        Row("two-tier honours request max-age", request: ["Cache-Control": "max-age=10"], age: 30, policy: .twoTier, "fetch+fallback"),
        Row("two-tier honours request no-cache", response: ["ETag": tag], request: ["Cache-Control": "no-cache"], age: 1, policy: .twoTier, "revalidate+fallback"),
        Row("two-tier honours only-if-cached past the usable window", request: ["Cache-Control": "only-if-cached"], age: 5000, policy: .twoTier, "unsatisfiable"),
        Row("two-tier honours max-stale past the usable window", request: ["Cache-Control": "max-stale"], age: 5000, policy: .twoTier, "stale"),
        Row("network-only never reads the store", response: ["Cache-Control": "max-age=100"], age: 1, policy: .networkOnly, "bypass"),
        Row("cache-first serves any age, no refresh", age: 1e8, policy: .cacheFirst, "stale-no-refresh"),
        Row("cache-first serves fresh entries as fresh", age: 1, policy: .cacheFirst, "fresh"),
        Row("cache-only serves any age", age: 1e8, policy: .cacheOnly, "stale-no-refresh"),
        Row("a custom policy decides", age: 1, policy: .custom("always-revalidate", FixedVerdict(verdict: .revalidate)), "fetch+fallback"),
        Row("RFC 8246: a fresh immutable entry is served on a revalidating reload", response: ["Cache-Control": "max-age=100, immutable", "ETag": tag], age: 10, reload: true, "fresh"),
        Row("RFC 8246: a stale immutable entry is revalidated as usual", response: ["Cache-Control": "max-age=100, immutable", "ETag": tag], age: 150, reload: true, "revalidate+fallback"),
        Row("a revalidating reload revalidates a fresh entry without immutable", response: ["Cache-Control": "max-age=100", "ETag": tag], age: 10, reload: true, "revalidate+fallback"),
        Row("two-tier: a fresh immutable entry is served on a revalidating reload", response: ["Cache-Control": "immutable", "ETag": tag], age: 10, policy: .twoTier, reload: true, "fresh"),
    ]

    @Test("each row", arguments: rows)
    func row(_ row: Row) {
        let configuration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: row.policy,
                                               honorsOriginDirectives: row.honors)
        let entry = CacheDecisionTests.entry(headers: row.response)
        var request = CacheDecisionTests.request(headers: row.request)
        if row.reload { request.cachePolicy = .reloadRevalidatingCacheData }
        let action = CacheDecisionTests.decide(request, entry: entry, age: row.age, configuration: configuration)
        #expect(outcome(action) == row.expected)
    }

    @Test("with no entry: cache-only and only-if-cached are unsatisfiable, cache-first and network-only go out")
    func noEntry() {
        for (policy, expected) in [(CachingPolicy.cacheOnly, "unsatisfiable"), (.cacheFirst, "miss"), (.networkOnly, "bypass"), (.httpSemantics, "miss")] {
            #expect(outcome(CacheDecisionTests.decide(entry: nil, age: 0, configuration: CacheConfiguration(policy: policy))) == expected)
        }
        #expect(outcome(CacheDecisionTests.decide(CacheDecisionTests.request(headers: ["Cache-Control": "only-if-cached"]),
                                                  entry: nil, age: 0)) == "unsatisfiable")
        #expect(outcome(CacheDecisionTests.decide(CacheDecisionTests.request(headers: ["Cache-Control": "no-store"]),
                                                  entry: nil, age: 0)) == "miss+nostore")
    }

    @Test("a request naming an unknown policy fails instead of going to the network; a custom one listed in the configuration is found by name")
    func unknownPolicy() {
        var request = CacheDecisionTests.request()
        request.setValue("no-such-policy", forHTTPHeaderField: HTTPCachingHeaders.policy)
        #expect(outcome(CacheDecisionTests.decide(request, entry: CacheDecisionTests.entry(), age: 1)) == "fail(unknownPolicy(\"no-such-policy\"))")
        let custom = CachingPolicy.custom("never", FixedVerdict(verdict: .network))
        request.cachingPolicy = custom
        #expect(outcome(CacheDecisionTests.decide(request, entry: CacheDecisionTests.entry(), age: 1,
                                                  configuration: CacheConfiguration(customPolicies: [custom]))) == "fetch+fallback")
        #expect(CachingPolicy(builtInNamed: "http") == .httpSemantics)
        #expect(CachingPolicy(builtInNamed: "no-such-policy") == nil)
    }

    @Test("the request's policy header overrides the configuration's")
    func perRequestPolicy() {
        var request = CacheDecisionTests.request()
        request.cachingPolicy = .networkOnly
        #expect(request.value(forHTTPHeaderField: HTTPCachingHeaders.policy) == "network-only")
        #expect(outcome(CacheDecisionTests.decide(request, entry: CacheDecisionTests.entry(), age: 0)) == "bypass")
    }

    @Test("policy precedence: the private header, then URLRequest.cachePolicy, then the configuration; and the served age follows it")
    func policyPrecedence() {
        let configuration = CacheConfiguration(policy: .httpSemantics)
        var request = CacheDecisionTests.request()
        #expect(CacheDecision.policy(for: request, configuration: configuration) == .httpSemantics)
        request.cachePolicy = .returnCacheDataElseLoad
        #expect(CacheDecision.policy(for: request, configuration: configuration) == .cacheFirst)
        request.cachingPolicy = .networkOnly
        #expect(CacheDecision.policy(for: request, configuration: configuration) == .networkOnly)
        let entry = CacheDecisionTests.entry(headers: ["Age": "100"])
        let now = CacheDecisionTests.storedAt.addingTimeInterval(5)
        #expect(CacheDecision.servedAge(of: entry, policy: .httpSemantics, now: now) == 105, "the Age it arrived with counts")
        #expect(CacheDecision.servedAge(of: entry, policy: .twoTier, now: now) == 5)
    }

    @Test("stale-if-error extends the fallback past the configured error window")
    func staleIfError() {
        let configuration = CacheConfiguration(policy: .httpSemantics, errorFallbackWindow: 60)
        let withSIE = CacheDecisionTests.entry(headers: ["Cache-Control": "max-age=10, stale-if-error=1000"])
        let without = CacheDecisionTests.entry(headers: ["Cache-Control": "max-age=10"])
        #expect(outcome(CacheDecisionTests.decide(entry: withSIE, age: 500, configuration: configuration)) == "fetch+fallback")
        #expect(outcome(CacheDecisionTests.decide(entry: without, age: 500, configuration: configuration)) == "fetch")
    }

    @Test("Vary: served only to requests whose named headers match; Vary: * never")
    func vary() {
        let entry = CacheDecisionTests.entry(headers: ["Vary": "Accept-Language, Accept", "Cache-Control": "max-age=100"],
                                             varyValues: ["accept-language": "en"])
        func decide(_ headers: [String: String], session: [String: String] = [:]) -> String {
            let request = CacheDecisionTests.request(headers: headers)
            return Vary.matches(entry, RequestHeaders(request, session: session)) ? "fresh" : "miss"
        }
        #expect(decide(["Accept-Language": "en"]) == "fresh")
        #expect(decide(["Accept-Language": "fr"]) == "miss")
        #expect(decide([:]) == "miss")
        #expect(decide(["Accept-Language": "en", "Accept": "text/html"]) == "miss", "Accept was absent when stored")
        #expect(decide(["Accept-Language": " EN "]) == "fresh", "Accept-* values compare after normalising case and spaces")
        #expect(decide([:], session: ["Accept-Language": "en"]) == "fresh", "the session's additional headers count")
        let star = CacheDecisionTests.entry(headers: ["Vary": "*"])
        #expect(!Vary.matches(star, RequestHeaders(CacheDecisionTests.request())))
    }

    @Test("Cache-Control parsing: case, spaces, quoted arguments, bad numbers")
    func parsing() {
        let directives = CacheControl(#"Max-Age=60 , no-cache="Set-Cookie, X", private, stale-if-error=abc"#)
        #expect(directives.seconds("max-age") == 60)
        #expect(directives.has("no-cache") && directives.has("private"))
        #expect(directives.seconds("stale-if-error") == nil)
        #expect(!directives.has("x"))
        #expect(CacheControl(nil, pragma: "no-cache").has("no-cache"))
    }

    @Test("HTTP dates: the three formats, and round trips", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    ])
    func dates(text: String) {
        #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: 784_111_777))
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("not a date") == nil)
    }

    @Test("a 304 replaces stored header fields but framing ones, keeps the body and resets the age")
    func merge() {
        let entry = CacheDecisionTests.entry(headers: ["ETag": "\"1\"", "Content-Length": "1", "X-Old": "a", "Cache-Control": "max-age=1"])
        let now = CacheDecisionTests.storedAt.addingTimeInterval(500)
        let notModified = ResponseHead(statusCode: 304, headers: ["Cache-Control": "max-age=99", "Content-Length": "0", "X-New": "b",
                                                                  "Set-Cookie": "sid=1", "Connection": "close"], url: CacheDecisionTests.url)
        let merged = Validation.merge(entry, notModified: notModified, keepingCookies: false, now: now)
        #expect(merged.header("Cache-Control") == "max-age=99")
        #expect(merged.header("Content-Length") == "1")
        #expect(merged.header("X-Old") == "a" && merged.header("X-New") == "b")
        #expect(merged.header("Set-Cookie") == nil && merged.header("Connection") == nil, "never adds what storing would refuse")
        #expect(merged.body == entry.body && merged.storedAt == now)
        #expect(merged.generation != entry.generation)
        #expect(Validation.conditionalHeaders(for: entry) == ["If-None-Match": "\"1\""])
        #expect(Validation.conditionalHeaders(for: CacheDecisionTests.entry(headers: ["Last-Modified": "x"])) == ["If-Modified-Since": "x"])
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

@Suite("Fast paths agree with the slow ones")
struct FastPathTests {
    @Test("a URL already in normal form keys the same with or without parsing", arguments: [
        "http://example.com/a?b=C", "https://example.com/", "http://example.com:8080/x?y", "https://h/a%20b",
        "HTTP://Example.com/a", "http://example.com:80/a", "https://example.com:443/", "http://example.com",
        "http://user@example.com/a", "http://example.com/a#frag", "http://[::1]:8080/a", "https://example.com:4430/a",
    ])
    func normalizedURLs(string: String) {
        let url = URL(string: string)!
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)!
        let scheme = components.scheme?.lowercased()
        components.scheme = scheme
        components.percentEncodedUser = nil // userinfo joins the credential partition, never the key
        components.percentEncodedPassword = nil
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443) { components.port = nil }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        components.fragment = nil
        #expect(CacheKey.normalize(url) == components.string!)
    }

    @Test("ASCII case-insensitive header names")
    func asciiCase() {
        #expect("Content-Type".equalsIgnoringASCIICase("content-type"))
        #expect("ETAG".equalsIgnoringASCIICase("etag"))
        #expect(!"ETag".equalsIgnoringASCIICase("ETags"))
        #expect(!"a-b".equalsIgnoringASCIICase("a_b"))
        #expect(!"[".equalsIgnoringASCIICase("{"), "only letters fold")
    }

    @Test("a hit response is reused within the same second of age, rebuilt past it")
    func builtResponses() {
        let url = URL(string: "http://example.test/")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: ["ETag": "1"], body: Data(), storedAt: Date())
        let built = BuiltResponses()
        func response(_ entry: CacheEntry, _ status: CacheStatus, _ age: TimeInterval) -> HTTPURLResponse {
            built.response(for: entry, form: .whole, disposition: Disposition(status: status, hit: true, ttl: 60 - age, age: age),
                           cacheName: "HTTPCaching").response
        }
        let first = response(entry, .fresh, 3.2)
        #expect(response(entry, .fresh, 3.9) === first)
        #expect(response(entry, .fresh, 4.0) !== first)
        #expect(response(entry, .stale, 4.0).cacheStatus == .stale)
        var newer = entry
        newer.generation = entry.generation &+ 1
        #expect(response(newer, .stale, 4.0) !== response(entry, .stale, 4.0), "a new version of the entry, even stored at the same moment, is built anew")
        #expect(response(newer, .stale, 4.0).value(forHTTPHeaderField: "Age") == "4")
    }
}
