import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

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
        Row("only-if-cached: a stale-while-revalidate entry is served stale, never refreshed", response: ["Cache-Control": "max-age=10, stale-while-revalidate=100"], request: ["Cache-Control": "only-if-cached"], age: 50, "stale-no-refresh"),
        Row("only-if-cached: a range of a stale entry is served from it", response: ["Cache-Control": "max-age=10, stale-while-revalidate=100"], request: ["Cache-Control": "only-if-cached", "Range": "bytes=0-1"], age: 50, "stale-no-refresh-range(0-0)"),
        Row("only-if-cached with the caller's own conditional: evaluated against the entry (RFC 9111 4.3.2), never sent", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "only-if-cached", "If-None-Match": tag], age: 10, "fresh-304"),
        Row("only-if-cached with the caller's own conditional on a stale entry it may use: evaluated, never sent", response: ["Cache-Control": "max-age=5, stale-while-revalidate=100", "ETag": tag], request: ["Cache-Control": "only-if-cached", "If-None-Match": tag], age: 10, "stale-no-refresh-304"),
        Row("only-if-cached with the caller's own If-Match: not answered, never sent", response: ["Cache-Control": "max-age=100", "ETag": tag], request: ["Cache-Control": "only-if-cached", "If-Match": tag], age: 10, "unsatisfiable"),
        Row("cache-only with the caller's own conditional that the entry does not meet: the entry, never sent", request: ["If-None-Match": tag], age: 10, policy: .cacheOnly, "fresh"),
        Row("request min-fresh: a stale-while-revalidate entry is validated, never served stale", response: ["Cache-Control": "max-age=100, stale-while-revalidate=1000", "ETag": tag], request: ["Cache-Control": "min-fresh=95"], age: 10, "revalidate+fallback"),
        Row("request no-store: served from the store, the answer not stored", response: ["Cache-Control": "max-age=100"], request: ["Cache-Control": "no-store"], age: 150, "fetch+fallback+nostore"),
        Row("two-tier honours the origin's no-cache: revalidated before each use, no fallback", response: ["Cache-Control": "no-cache", "ETag": tag], age: 30, policy: .twoTier, "revalidate"),
        Row("two-tier honours must-revalidate: fresh within the window", response: ["Cache-Control": "must-revalidate"], age: 30, policy: .twoTier, "fresh"),
        Row("two-tier honours must-revalidate: no stale serving, no fallback", response: ["Cache-Control": "must-revalidate"], age: 70, policy: .twoTier, "fetch"),
        Row("two-tier honours proxy-revalidate like must-revalidate", response: ["Cache-Control": "proxy-revalidate", "ETag": tag], age: 70, policy: .twoTier, "revalidate"),
        Row("two-tier with honorsOriginDirectives off ignores response directives", response: ["Cache-Control": "no-cache, must-revalidate"], age: 70, policy: .twoTier, honors: false, "stale"),
        Row("two-tier honours request max-age", request: ["Cache-Control": "max-age=10"], age: 30, policy: .twoTier, "fetch+fallback"),
        Row("two-tier honours request no-cache", response: ["ETag": tag], request: ["Cache-Control": "no-cache"], age: 1, policy: .twoTier, "revalidate+fallback"),
        Row("two-tier honours only-if-cached past the usable window", request: ["Cache-Control": "only-if-cached"], age: 5000, policy: .twoTier, "unsatisfiable"),
        Row("two-tier: only-if-cached serves a usable stale entry without refreshing it", request: ["Cache-Control": "only-if-cached"], age: 120, policy: .twoTier, "stale-no-refresh"),
        Row("two-tier honours min-fresh: validated, not served stale", response: ["ETag": tag], request: ["Cache-Control": "min-fresh=55"], age: 10, policy: .twoTier, "revalidate+fallback"),
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

    @Test("only-if-cached never reaches the network, not even where the request would pass by the store: network-only, credentials not cached, the caller's own conditional, a reload, another method")
    func onlyIfCachedNeverBypasses() {
        let offline = ["Cache-Control": "only-if-cached"]
        let networkOnly = CacheConfiguration(policy: .networkOnly)
        var noCredentials = CacheConfiguration(windows: .test(fresh: 60, usable: 3600))
        noCredentials.storesCredentialedResponses = false
        let credentialed = CacheDecisionTests.request(headers: offline.merging(["Authorization": "Bearer t"]) { $1 })
        let stored = CacheDecisionTests.entry(headers: ["Cache-Control": "max-age=100"])
        for (request, configuration) in [(CacheDecisionTests.request(headers: offline), networkOnly), (credentialed, noCredentials),
                                         (CacheDecisionTests.request(headers: offline.merging(["If-Match": "\"a\""]) { $1 }),
                                          CacheConfiguration(windows: .test(fresh: 60, usable: 3600)))] {
            #expect(outcome(CacheDecisionTests.decide(request, entry: stored, age: 10, configuration: configuration)) == "unsatisfiable")
        }
        // Without the directive each of them goes out.
        #expect(outcome(CacheDecisionTests.decide(entry: stored, age: 10, configuration: networkOnly)) == "bypass")
        var withCredentials = credentialed
        withCredentials.setValue(nil, forHTTPHeaderField: "Cache-Control")
        #expect(outcome(CacheDecisionTests.decide(withCredentials, entry: nil, age: 0, configuration: noCredentials)) == "bypass")
        var reload = CacheDecisionTests.request(headers: offline)
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        #expect(outcome(CacheDecisionTests.decide(reload, entry: stored, age: 10)) == "unsatisfiable", "a reload ignores the entry")
        for method in ["POST", "OPTIONS", "query"] {
            #expect(outcome(CacheDecisionTests.decide(CacheDecisionTests.request(method, headers: offline), entry: nil, age: 0)) == "unsatisfiable")
        }
    }

    @Test("a request naming an unknown policy fails instead of going to the network; a custom one listed in the configuration is found by name")
    func unknownPolicy() {
        var request = CacheDecisionTests.request()
        request.setValue("no-such-policy", forHTTPHeaderField: HTTPCachingHeaders.policy)
        #expect(outcome(CacheDecisionTests.decide(request, entry: CacheDecisionTests.entry(), age: 1)) == "fail(the request names the caching policy no-such-policy, which this cache does not know)")
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

    @Test("only-if-cached: a HEAD on a stale entry is answered from it, never sent")
    func headOnlyIfCached() {
        let configuration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .twoTier)
        var request = CacheDecisionTests.request(headers: ["Cache-Control": "only-if-cached"])
        request.httpMethod = "HEAD"
        let entry = CacheDecisionTests.entry(headers: [:])
        #expect(outcome(CacheDecisionTests.decide(request, entry: entry, age: 120, configuration: configuration)) == "stale-no-refresh-head")
        request.setValue(nil, forHTTPHeaderField: "Cache-Control")
        #expect(outcome(CacheDecisionTests.decide(request, entry: entry, age: 120, configuration: configuration)) != "stale-no-refresh-head",
                "without it, a stale HEAD goes out")
    }
}
