import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// One table per rule of issue 11, each citing the section it follows. Entries are stored at
/// `storedAt` (1970-01-12 13:46:40 GMT, a Monday); a row's age is the time since then.
@Suite("HTTP fidelity: one table per rule")
struct FidelityRuleTests {
    static let url = CacheDecisionTests.url
    static let storedAt = CacheDecisionTests.storedAt
    static let http = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .httpSemantics)
    static let twoTier = CacheConfiguration(windows: .test(fresh: 60, usable: 3600))

    static func entry(_ status: Int = 200, _ headers: [String: String] = [:], body: String = "x") -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: status, headers: headers, body: Data(body.utf8), storedAt: storedAt)
    }

    static func decide(_ request: URLRequest = CacheDecisionTests.request(), entry: CacheEntry?, age: TimeInterval,
                       _ configuration: CacheConfiguration = http) -> CacheAction {
        CacheDecision.decide(request: request, entry: entry, now: storedAt.addingTimeInterval(age), configuration: configuration)
    }

    static func notStored(_ status: Int, _ headers: [String: String], _ configuration: CacheConfiguration = http,
                          credentialed: Bool = false) -> NotStoredReason? {
        Storability.reasonNotToStore(method: "GET", response: ResponseHead(statusCode: status, headers: headers, url: url),
                                     policy: configuration.policy, credentialed: credentialed, configuration: configuration)
    }

    // MARK: - RFC 9111 section 3: any final status with explicit freshness

    static let finalStatuses = [200, 203, 204, 299, 301, 302, 303, 307, 308, 400, 404, 410, 499, 500, 502, 503, 504, 599]

    @Test("RFC 9111 §3 and §4.2: under .httpSemantics any final status with max-age is stored, served while fresh, not reused once stale",
          arguments: finalStatuses)
    func explicitFreshnessAnyStatus(status: Int) {
        let headers = ["Cache-Control": "max-age=100"]
        #expect(Self.notStored(status, headers) == nil, "stored")
        #expect(outcome(Self.decide(entry: Self.entry(status, headers), age: 99)) == "fresh", "served while fresh")
        // Once stale it goes to the origin; a stored error is never served as a fallback for another.
        #expect(outcome(Self.decide(entry: Self.entry(status, headers), age: 100)) == (status >= 500 ? "fetch" : "fetch+fallback"))
    }

    struct StoreRow: Sendable, CustomTestStringConvertible {
        let status: Int
        let headers: [String: String]
        let stored: Bool
        var testDescription: String { "\(status) \(headers)" }
    }

    static let future = HTTPDate.format(storedAt.addingTimeInterval(100))
    static let storeRows: [StoreRow] = [
        StoreRow(status: 500, headers: ["Expires": future], stored: true),
        StoreRow(status: 503, headers: ["Cache-Control": "public"], stored: true),
        StoreRow(status: 599, headers: ["Cache-Control": "private"], stored: true),
        StoreRow(status: 299, headers: ["Expires": "0"], stored: true), // explicit, already expired
        StoreRow(status: 500, headers: [:], stored: false),
        StoreRow(status: 302, headers: [:], stored: false),
        StoreRow(status: 299, headers: ["Last-Modified": future], stored: false), // no heuristics for 299
        StoreRow(status: 200, headers: [:], stored: true), // heuristically cacheable
        StoreRow(status: 404, headers: [:], stored: true),
        StoreRow(status: 501, headers: [:], stored: true),
        StoreRow(status: 206, headers: ["Cache-Control": "max-age=100"], stored: false),
        StoreRow(status: 304, headers: ["Cache-Control": "max-age=100"], stored: false),
        StoreRow(status: 100, headers: ["Cache-Control": "max-age=100"], stored: false),
        StoreRow(status: 200, headers: ["Cache-Control": "max-age=100, no-store"], stored: false),
        StoreRow(status: 200, headers: ["Cache-Control": "s-maxage=100"], stored: true),
    ]

    @Test("RFC 9111 §3: what makes a response storable under .httpSemantics (explicit freshness, heuristics, final status)",
          arguments: storeRows)
    func storability(row: StoreRow) {
        #expect((Self.notStored(row.status, row.headers) == nil) == row.stored)
    }

    struct LifetimeRow: Sendable, CustomTestStringConvertible {
        let status: Int
        let cacheControl: String?
        let lifetime: TimeInterval
        var testDescription: String { "\(status) \(cacheControl ?? "-")" }
    }

    static let lifetimeRows: [LifetimeRow] = [
        LifetimeRow(status: 200, cacheControl: nil, lifetime: 8_640),
        LifetimeRow(status: 599, cacheControl: "public", lifetime: 8_640), // section 5.2.2.9
        LifetimeRow(status: 500, cacheControl: "public, must-revalidate", lifetime: 8_640),
        LifetimeRow(status: 500, cacheControl: nil, lifetime: 0),
        LifetimeRow(status: 599, cacheControl: "private", lifetime: 0), // storable, not heuristically cacheable
        LifetimeRow(status: 599, cacheControl: "public, max-age=5", lifetime: 5),
    ]

    @Test("RFC 9111 §4.2.2, §5.2.2.9: a heuristic lifetime (10% since Last-Modified) for heuristically cacheable statuses and for public",
          arguments: lifetimeRows)
    func heuristicLifetime(row: LifetimeRow) {
        let headers = ["Last-Modified": HTTPDate.format(Self.storedAt.addingTimeInterval(-86_400)),
                       "Date": HTTPDate.format(Self.storedAt)].merging(row.cacheControl.map { ["Cache-Control": $0] } ?? [:]) { $1 }
        let computed = Freshness.lifetimeAndSource(statusCode: row.status, header: { headers[$0] }, storedAt: Self.storedAt)
        #expect(computed.lifetime == row.lifetime)
    }

    // MARK: - RFC 9111 section 5.2.2.3: must-understand

    struct UnderstandRow: Sendable, CustomTestStringConvertible {
        let status: Int
        let cacheControl: String
        let twoTier: Bool
        let expected: NotStoredReason?
        var testDescription: String { "\(status) \(cacheControl)\(twoTier ? " two-tier" : "")" }
    }

    static let understandRows: [UnderstandRow] = [
        UnderstandRow(status: 200, cacheControl: "must-understand, no-store, max-age=60", twoTier: false, expected: nil),
        UnderstandRow(status: 404, cacheControl: "must-understand, no-store", twoTier: true, expected: nil),
        UnderstandRow(status: 302, cacheControl: "must-understand, no-store, max-age=60", twoTier: false, expected: nil),
        UnderstandRow(status: 200, cacheControl: "must-understand, max-age=60", twoTier: false, expected: nil),
        UnderstandRow(status: 299, cacheControl: "must-understand, no-store, max-age=60", twoTier: false, expected: .statusNotUnderstood(299)),
        UnderstandRow(status: 500, cacheControl: "must-understand, max-age=60", twoTier: false, expected: .statusNotUnderstood(500)),
        UnderstandRow(status: 418, cacheControl: "MUST-UNDERSTAND, no-store, max-age=60", twoTier: false, expected: .statusNotUnderstood(418)),
        UnderstandRow(status: 200, cacheControl: "no-store, max-age=60", twoTier: false, expected: .responseNoStore),
        UnderstandRow(status: 200, cacheControl: "no-store", twoTier: true, expected: .responseNoStore),
    ]

    @Test("RFC 9111 §5.2.2.3: must-understand stores an understood status even beside no-store, never an unknown one",
          arguments: understandRows)
    func mustUnderstand(row: UnderstandRow) {
        let configuration = row.twoTier ? Self.twoTier : Self.http
        #expect(Self.notStored(row.status, ["Cache-Control": row.cacheControl], configuration) == row.expected)
    }

    // MARK: - RFC 9111 section 5.3, RFC 9110 section 5.6.7: Expires, strictly

    struct DecisionRow: Sendable, CustomTestStringConvertible {
        let name: String
        let headers: [String: String]
        let age: TimeInterval
        let expected: String
        var testDescription: String { name }
        init(_ name: String, _ headers: [String: String], age: TimeInterval, _ expected: String) {
            self.name = name
            self.headers = headers
            self.age = age
            self.expected = expected
        }
    }

    static let date = HTTPDate.format(storedAt)
    static let expiresRows: [DecisionRow] = [
        DecisionRow("IMF-fixdate 100 s after Date: fresh", ["Date": date, "Expires": "Mon, 12 Jan 1970 13:48:20 GMT"], age: 50, "fresh"),
        DecisionRow("IMF-fixdate: stale once past", ["Date": date, "Expires": "Mon, 12 Jan 1970 13:48:20 GMT"], age: 150, "fetch+fallback"),
        DecisionRow("obsolete RFC 850 form is read", ["Date": date, "Expires": "Monday, 12-Jan-70 13:48:20 GMT"], age: 50, "fresh"),
        DecisionRow("obsolete asctime form is read", ["Date": date, "Expires": "Mon Jan 12 13:48:20 1970"], age: 50, "fresh"),
        DecisionRow("0 is invalid: already expired", ["Date": date, "Expires": "0"], age: 0, "fetch+fallback"),
        DecisionRow("-1 is invalid: already expired", ["Date": date, "Expires": "-1"], age: 0, "fetch+fallback"),
        DecisionRow("UTC instead of GMT is invalid", ["Date": date, "Expires": "Mon, 12 Jan 1970 13:48:20 UTC"], age: 0, "fetch+fallback"),
        DecisionRow("a date with no time zone is invalid", ["Date": date, "Expires": "Mon, 12 Jan 1970 13:48:20"], age: 0, "fetch+fallback"),
        DecisionRow("two Expires lines folded into one are invalid",
                    ["Date": date, "Expires": "Mon, 12 Jan 1970 13:48:20 GMT, Mon, 12 Jan 1970 13:48:20 GMT"], age: 0, "fetch+fallback"),
        DecisionRow("an empty Expires is invalid", ["Date": date, "Expires": ""], age: 0, "fetch+fallback"),
        DecisionRow("Expires in the past", ["Date": date, "Expires": "Thu, 01 Jan 1970 00:00:00 GMT"], age: 0, "fetch+fallback"),
        DecisionRow("max-age wins over an invalid Expires", ["Cache-Control": "max-age=100", "Expires": "0"], age: 50, "fresh"),
        DecisionRow("an invalid Date falls back to the arrival", ["Date": "yesterday", "Expires": "Mon, 12 Jan 1970 13:48:20 GMT"], age: 50, "fresh"),
    ]

    @Test("RFC 9111 §5.3 and RFC 9110 §5.6.7: Expires read strictly; an invalid one, or two folded into one, means already expired",
          arguments: expiresRows)
    func expires(row: DecisionRow) {
        #expect(outcome(Self.decide(entry: Self.entry(200, row.headers), age: row.age)) == row.expected)
    }

    // MARK: - RFC 9111 section 5.1: Age, strictly

    struct AgeRow: Sendable, CustomTestStringConvertible {
        let age: String?
        let expected: String
        let servedAge: TimeInterval?
        var testDescription: String { "Age: \(age.map { "'\($0)'" } ?? "absent")" }
    }

    // max-age=100, 30 s since stored.
    static let ageRows: [AgeRow] = [
        AgeRow(age: nil, expected: "fresh", servedAge: 30),
        AgeRow(age: "60", expected: "fresh", servedAge: 90),
        AgeRow(age: "80", expected: "fetch+fallback", servedAge: nil),
        AgeRow(age: "7200.0", expected: "fresh", servedAge: 30),
        AgeRow(age: "10, 7200", expected: "fresh", servedAge: 40),
        AgeRow(age: "7200, 10", expected: "fetch+fallback", servedAge: nil),
        AgeRow(age: " 60 ", expected: "fresh", servedAge: 90),
        AgeRow(age: "-1", expected: "fresh", servedAge: 30),
        AgeRow(age: "1e3", expected: "fresh", servedAge: 30),
        AgeRow(age: "abc", expected: "fresh", servedAge: 30),
        AgeRow(age: "", expected: "fresh", servedAge: 30),
        AgeRow(age: "+60", expected: "fresh", servedAge: 30),
        AgeRow(age: "99999999999999999999999", expected: "fetch+fallback", servedAge: nil),
    ]

    @Test("RFC 9111 §5.1: Age is a non-negative integer; anything else is ignored; of a list, the first value counts",
          arguments: ageRows)
    func age(row: AgeRow) {
        var headers = ["Cache-Control": "max-age=100"]
        if let age = row.age { headers["Age"] = age }
        let action = Self.decide(entry: Self.entry(200, headers), age: 30)
        #expect(outcome(action) == row.expected)
        if let served = row.servedAge, case .serve(let plan) = action {
            #expect(plan.age == served, "the Age a hit carries")
        }
    }
}
