import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension FidelityRuleTests {
    // MARK: - Set-Cookie

    struct CookieRow: Sendable, CustomTestStringConvertible {
        let keeps: Bool
        let setsCookie: Bool
        let stored: Bool
        let headerKept: Bool
        var testDescription: String { "storesResponsesSettingCookies=\(keeps), Set-Cookie \(setsCookie ? "present" : "absent")" }
    }

    @Test("RFC 9111 §7.3 (sensitive information): a response setting a cookie is stored, with the field, only when the configuration says so",
          arguments: [CookieRow(keeps: false, setsCookie: true, stored: false, headerKept: false),
                      CookieRow(keeps: true, setsCookie: true, stored: true, headerKept: true),
                      CookieRow(keeps: false, setsCookie: false, stored: true, headerKept: false),
                      CookieRow(keeps: true, setsCookie: false, stored: true, headerKept: false)])
    func setCookie(row: CookieRow) {
        let configuration = CacheConfiguration(policy: .httpSemantics, storesResponsesSettingCookies: row.keeps)
        var headers = ["Cache-Control": "max-age=100"]
        if row.setsCookie { headers["Set-Cookie"] = "id=1; Path=/" }
        let reason = Self.notStored(200, headers, configuration)
        #expect((reason == nil) == row.stored)
        if !row.stored { #expect(reason == .setsCookie) }
        let kept = Storability.storedHeaders(of: ResponseHead(statusCode: 200, headers: headers, url: Self.url), keepingCookies: row.keeps)
        #expect((kept["Set-Cookie"] != nil) == row.headerKept)
        let notModified = ResponseHead(statusCode: 304, headers: ["Set-Cookie": "id=2"], url: Self.url)
        let merged = Validation.merge(Self.entry(200, headers), notModified: notModified, keepingCookies: row.keeps, now: Self.storedAt)
        #expect(merged.header("Set-Cookie") == (row.keeps ? "id=2" : (row.setsCookie ? "id=1; Path=/" : nil)),
                "a 304 adds a cookie only where storing would keep one")
    }

    // MARK: - RFC 8246: immutable

    struct ImmutableRow: Sendable, CustomTestStringConvertible {
        let name: String
        let cacheControl: String
        let age: TimeInterval
        let twoTier: Bool
        let policy: URLRequest.CachePolicy
        let expected: String
        var testDescription: String { name }
    }

    static let immutableRows: [ImmutableRow] = [
        ImmutableRow(name: "fresh, revalidating reload: served", cacheControl: "max-age=100, immutable", age: 10, twoTier: false,
                     policy: .reloadRevalidatingCacheData, expected: "fresh"),
        ImmutableRow(name: "stale, revalidating reload: revalidated", cacheControl: "max-age=100, immutable", age: 150, twoTier: false,
                     policy: .reloadRevalidatingCacheData, expected: "revalidate+fallback"),
        ImmutableRow(name: "without immutable, revalidating reload: revalidated", cacheControl: "max-age=100", age: 10, twoTier: false,
                     policy: .reloadRevalidatingCacheData, expected: "revalidate+fallback"),
        ImmutableRow(name: "fresh, plain request: served", cacheControl: "max-age=100, immutable", age: 10, twoTier: false,
                     policy: .useProtocolCachePolicy, expected: "fresh"),
        ImmutableRow(name: "fresh, a reload ignoring the cache still reloads", cacheControl: "max-age=100, immutable", age: 10,
                     twoTier: false, policy: .reloadIgnoringLocalCacheData, expected: "fetch"),
        ImmutableRow(name: "two-tier, fresh window, revalidating reload: served", cacheControl: "immutable", age: 10, twoTier: true,
                     policy: .reloadRevalidatingCacheData, expected: "fresh"),
        ImmutableRow(name: "two-tier, stale window, revalidating reload: revalidated", cacheControl: "immutable", age: 100, twoTier: true,
                     policy: .reloadRevalidatingCacheData, expected: "revalidate+fallback"),
    ]

    @Test("RFC 8246 §2: a fresh immutable entry is served without revalidation on a revalidating reload; a stale one is revalidated",
          arguments: immutableRows)
    func immutable(row: ImmutableRow) {
        var request = CacheDecisionTests.request()
        request.cachePolicy = row.policy
        let entry = Self.entry(200, ["Cache-Control": row.cacheControl, "ETag": "\"i\""])
        #expect(outcome(Self.decide(request, entry: entry, age: row.age, row.twoTier ? Self.twoTier : Self.http)) == row.expected)
    }

    // MARK: - RFC 9111 section 4: HEAD from a stored GET

    struct HeadRow: Sendable, CustomTestStringConvertible {
        let name: String
        let age: TimeInterval
        let twoTier: Bool
        let entry: Bool
        let expected: String
        var testDescription: String { name }
    }

    @Test("RFC 9111 §4 and RFC 9110 §9.3.2: a HEAD is answered from a fresh stored GET (status and fields only), else passed through",
          arguments: [HeadRow(name: "fresh", age: 10, twoTier: false, entry: true, expected: "fresh-head"),
                      HeadRow(name: "stale", age: 150, twoTier: false, entry: true, expected: "bypass"),
                      HeadRow(name: "two-tier fresh", age: 10, twoTier: true, entry: true, expected: "fresh-head"),
                      HeadRow(name: "two-tier stale window", age: 100, twoTier: true, entry: true, expected: "bypass"),
                      HeadRow(name: "nothing stored", age: 0, twoTier: false, entry: false, expected: "bypass")])
    func head(row: HeadRow) {
        let entry = row.entry ? Self.entry(200, ["Cache-Control": "max-age=100"]) : nil
        let action = Self.decide(CacheDecisionTests.request("HEAD"), entry: entry, age: row.age, row.twoTier ? Self.twoTier : Self.http)
        #expect(outcome(action) == row.expected)
        if case .forward(let plan) = action { #expect(!plan.store && !plan.invalidates && plan.reason != .method) }
    }

    // MARK: - The two-tier default and the origin's directives

    struct TwoTierRow: Sendable, CustomTestStringConvertible {
        let cacheControl: String
        let age: TimeInterval
        let honors: Bool
        let expected: String
        var testDescription: String { "\(cacheControl) at \(Int(age)) s\(honors ? "" : ", honorsOriginDirectives off")" }
    }

    // Windows: fresh 60, usable 3600; fallback for 7 days. Every response has an ETag.
    static let twoTierRows: [TwoTierRow] = [
        TwoTierRow(cacheControl: "no-cache", age: 1, honors: true, expected: "revalidate"),
        TwoTierRow(cacheControl: "no-cache", age: 100, honors: true, expected: "revalidate"),
        TwoTierRow(cacheControl: "must-revalidate", age: 30, honors: true, expected: "fresh"),
        TwoTierRow(cacheControl: "must-revalidate", age: 100, honors: true, expected: "revalidate"),
        TwoTierRow(cacheControl: "must-revalidate", age: 5000, honors: true, expected: "revalidate"),
        TwoTierRow(cacheControl: "proxy-revalidate", age: 30, honors: true, expected: "fresh"),
        TwoTierRow(cacheControl: "proxy-revalidate", age: 100, honors: true, expected: "revalidate"),
        TwoTierRow(cacheControl: "max-age=5", age: 30, honors: true, expected: "fresh"), // the windows stay the rule
        TwoTierRow(cacheControl: "", age: 100, honors: true, expected: "stale"),
        TwoTierRow(cacheControl: "", age: 5000, honors: true, expected: "revalidate+fallback"),
        TwoTierRow(cacheControl: "no-cache", age: 1, honors: false, expected: "fresh"),
        TwoTierRow(cacheControl: "must-revalidate", age: 100, honors: false, expected: "stale"),
        TwoTierRow(cacheControl: "proxy-revalidate", age: 5000, honors: false, expected: "revalidate+fallback"),
    ]

    @Test("RFC 9111 §5.2.2.4, §5.2.2.2, §5.2.2.8 under two-tier: no-cache revalidates each use; must-/proxy-revalidate forbid stale and fallback",
          arguments: twoTierRows)
    func twoTierOriginDirectives(row: TwoTierRow) {
        let configuration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), honorsOriginDirectives: row.honors)
        let entry = Self.entry(200, ["Cache-Control": row.cacheControl, "ETag": "\"t\""])
        #expect(outcome(Self.decide(entry: entry, age: row.age, configuration)) == row.expected)
    }

    @Test("RFC 9111 §4.2.4: no fallback to a stored error, under either policy", arguments: [500, 503, 599])
    func noErrorFallback(status: Int) {
        let http = Self.entry(status, ["Cache-Control": "max-age=10"])
        #expect(outcome(Self.decide(entry: http, age: 20)) == "fetch")
        #expect(outcome(Self.decide(entry: Self.entry(status), age: 5000, CacheConfiguration(windows: .test(fresh: 60, usable: 3600),
                                                                                           storableStatusCodes: [status]))) == "fetch")
    }
}
