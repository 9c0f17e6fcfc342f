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

    // MARK: - RFC 9111 section 4.4: invalidation

    struct InvalidationRow: Sendable, CustomTestStringConvertible {
        let method: String
        let status: Int
        let invalidates: Bool
        var testDescription: String { "\(method) answered \(status)" }
    }

    static let invalidationRows: [InvalidationRow] = {
        var rows: [InvalidationRow] = []
        for method in ["POST", "PUT", "PATCH", "DELETE", "M-SEARCH", "PROPFIND", "purge"] {
            for status in [200, 201, 204, 301, 303, 399] { rows.append(InvalidationRow(method: method, status: status, invalidates: true)) }
            for status in [400, 404, 409, 500, 503] { rows.append(InvalidationRow(method: method, status: status, invalidates: false)) }
        }
        for method in ["OPTIONS", "TRACE"] { rows.append(InvalidationRow(method: method, status: 200, invalidates: false)) }
        return rows
    }()

    @Test("RFC 9111 §4.4: a method not known to be safe invalidates the URL on a non-error answer, unknown methods included",
          arguments: invalidationRows)
    func invalidation(row: InvalidationRow) {
        var request = CacheDecisionTests.request(row.method)
        request.httpBody = Data("abc".utf8)
        var transaction = CacheTransaction(.init(request: request, headers: RequestHeaders(request), key: CacheKey(url: Self.url),
                                                 configuration: Self.twoTier, role: .foreground(streaming: false)))
        let started = transaction.start(entry: Self.entry(), now: Self.storedAt)
        #expect(started == [.forward(conditional: [:])], "the request goes out as it is")
        let head = ResponseHead(statusCode: row.status, headers: ["Location": "/created", "Content-Location": "http://example.test/cl"],
                                url: Self.url)
        let actions = transaction.head(head, now: Self.storedAt)
        let invalidated = actions.compactMap { action -> [URL]? in
            if case .invalidate(let urls) = action { return urls }
            return nil
        }
        if row.invalidates {
            #expect(invalidated == [[Self.url, URL(string: "http://example.test/created")!, URL(string: "http://example.test/cl")!]])
        } else {
            #expect(invalidated.isEmpty)
        }
        #expect(!actions.contains { if case .store = $0 { return true } else { return false } }, "never stored")
        #expect(!actions.contains { if case .remove = $0 { return true } else { return false } }, "nothing else removed")
    }

    struct LocationRow: Sendable, CustomTestStringConvertible {
        let name: String
        let location: String?
        let contentLocation: String?
        let extra: [String]
        var testDescription: String { name }
    }

    static let locationRows: [LocationRow] = [
        LocationRow(name: "relative path", location: "/a", contentLocation: nil, extra: ["http://example.test/a"]),
        LocationRow(name: "relative to the request's path", location: "b?x=1", contentLocation: nil, extra: ["http://example.test/b?x=1"]),
        LocationRow(name: "absolute, same origin, host case differs", location: "http://EXAMPLE.test/c", contentLocation: nil,
                    extra: ["http://EXAMPLE.test/c"]),
        LocationRow(name: "both fields", location: "/a", contentLocation: "/b", extra: ["http://example.test/a", "http://example.test/b"]),
        LocationRow(name: "both the same URL: listed once", location: "/a", contentLocation: "/a", extra: ["http://example.test/a"]),
        LocationRow(name: "the request's own URL: listed once", location: "/items?page=1", contentLocation: nil, extra: []),
        LocationRow(name: "another host is never invalidated", location: "http://other.test/a", contentLocation: nil, extra: []),
        LocationRow(name: "another port is never invalidated", location: "http://example.test:8080/a", contentLocation: nil, extra: []),
        LocationRow(name: "another scheme is never invalidated", location: "https://example.test/a", contentLocation: nil, extra: []),
        LocationRow(name: "garbage is ignored", location: "http://[::1", contentLocation: "http://", extra: []),
    ]

    @Test("RFC 9111 §4.4: the same-origin URLs in Location and Content-Location are invalidated too, no others",
          arguments: locationRows)
    func invalidatedURLs(row: LocationRow) {
        var headers: [String: String] = [:]
        if let location = row.location { headers["Location"] = location }
        if let contentLocation = row.contentLocation { headers["Content-Location"] = contentLocation }
        let urls = CacheTransaction.invalidatedURLs(request: CacheDecisionTests.request("POST"),
                                                    response: ResponseHead(statusCode: 201, headers: headers, url: Self.url))
        #expect(urls.map(\.absoluteString) == [Self.url.absoluteString] + row.extra)
    }

    // MARK: - RFC 9110 section 14, RFC 9111 section 3.4: ranges from a stored complete response

    struct RangeRow: Sendable, CustomTestStringConvertible {
        let field: String
        let length: Int
        let expected: ByteRange
        var testDescription: String { "\(field) of \(length) bytes" }
    }

    static let rangeRows: [RangeRow] = [
        RangeRow(field: "bytes=0-1", length: 11, expected: .satisfiable(0...1)),
        RangeRow(field: "bytes=3-3", length: 11, expected: .satisfiable(3...3)),
        RangeRow(field: "bytes=1-", length: 11, expected: .satisfiable(1...10)),
        RangeRow(field: "bytes=-1", length: 11, expected: .satisfiable(10...10)),
        RangeRow(field: "bytes=-100", length: 11, expected: .satisfiable(0...10)),
        RangeRow(field: "bytes=5-100", length: 11, expected: .satisfiable(5...10)),
        RangeRow(field: "Bytes=0-0", length: 11, expected: .satisfiable(0...0)),
        RangeRow(field: " bytes=0-0 ", length: 11, expected: .satisfiable(0...0)),
        RangeRow(field: "bytes=11-", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=50-60", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=-0", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=0-0", length: 0, expected: .unsatisfiable),
        RangeRow(field: "bytes=-5", length: 0, expected: .unsatisfiable),
        RangeRow(field: "bytes=0-1,3-4", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=3-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=-", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=a-b", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=+1-2", length: 11, expected: .unsupported),
        RangeRow(field: "items=0-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes 0-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=99999999999999999999-", length: 11, expected: .unsupported),
        RangeRow(field: "", length: 11, expected: .unsupported),
    ]

    @Test("RFC 9110 §14.1.2: one bytes= range, first-last, open-ended or suffix; unsatisfiable ones; anything else unsupported",
          arguments: rangeRows)
    func byteRange(row: RangeRow) {
        #expect(ByteRange.resolve(row.field, length: row.length) == row.expected)
    }

    struct RangeDecisionRow: Sendable, CustomTestStringConvertible {
        let name: String
        let field: String
        let status: Int
        let age: TimeInterval
        let twoTier: Bool
        let expected: String
        var testDescription: String { name }
    }

    static let rangeDecisionRows: [RangeDecisionRow] = [
        RangeDecisionRow(name: "fresh 200: 206", field: "bytes=0-1", status: 200, age: 10, twoTier: false, expected: "fresh-range(0-1)"),
        RangeDecisionRow(name: "fresh: 416", field: "bytes=20-", status: 200, age: 10, twoTier: false, expected: "fresh-416"),
        RangeDecisionRow(name: "stale: passed through", field: "bytes=0-1", status: 200, age: 200, twoTier: false, expected: "bypass"),
        RangeDecisionRow(name: "two-tier fresh: 206", field: "bytes=-2", status: 200, age: 10, twoTier: true, expected: "fresh-range(9-10)"),
        RangeDecisionRow(name: "two-tier stale window: passed through, not served stale", field: "bytes=0-1", status: 200, age: 100,
                         twoTier: true, expected: "bypass"),
        RangeDecisionRow(name: "a stored 404 is not a complete representation", field: "bytes=0-1", status: 404, age: 10,
                         twoTier: false, expected: "bypass"),
        RangeDecisionRow(name: "several ranges: passed through", field: "bytes=0-1,4-5", status: 200, age: 10, twoTier: false,
                         expected: "bypass"),
    ]

    @Test("RFC 9111 §3.4 and RFC 9110 §14.2: a fresh complete entry answers one range (206 or 416); anything else leaves the network untouched",
          arguments: rangeDecisionRows)
    func rangeDecision(row: RangeDecisionRow) {
        let entry = Self.entry(row.status, ["Cache-Control": "max-age=100"], body: "0123456789A")
        let action = Self.decide(CacheDecisionTests.request(headers: ["Range": row.field]), entry: entry, age: row.age,
                                 row.twoTier ? Self.twoTier : Self.http)
        #expect(outcome(action) == row.expected)
        if case .forward(let plan) = action {
            #expect(plan.passThrough && !plan.store && !plan.replacesEntry && !plan.discardEntry && !plan.validate,
                    "what comes back reaches the caller untouched; the entry is neither replaced nor removed")
        }
    }

    @Test("RFC 9110 §14.4 and §15.3.7: a 206 from the store carries Content-Range, its length and the stored fields; a 416 says the length")
    func rangeHeads() {
        let entry = Self.entry(200, ["Cache-Control": "max-age=100", "ETag": "\"e\"", "Content-Type": "text/plain", "Content-Length": "11"],
                               body: "0123456789A")
        let disposition = Disposition(status: .fresh, hit: true, ttl: 90, age: 10)
        let partial = Answers.fromEntry(entry, form: .range(2...4), disposition: disposition, cacheName: "HTTPCaching")
        #expect(partial.head.statusCode == 206)
        #expect(partial.head.header("Content-Range") == "bytes 2-4/11")
        #expect(partial.head.header("Content-Length") == "3")
        #expect(partial.head.header("ETag") == "\"e\"" && partial.head.header("Content-Type") == "text/plain")
        #expect(partial.head.header("Age") == "10")
        #expect(partial.body == 2..<5)
        let unsatisfiable = Answers.fromEntry(entry, form: .rangeNotSatisfiable, disposition: disposition, cacheName: "HTTPCaching")
        #expect(unsatisfiable.head.statusCode == 416)
        #expect(unsatisfiable.head.header("Content-Range") == "bytes */11")
        #expect(unsatisfiable.head.header("Content-Length") == "0" && unsatisfiable.body.isEmpty)
        let head = Answers.fromEntry(entry, form: .headersOnly, disposition: disposition, cacheName: "HTTPCaching")
        #expect(head.head.statusCode == 200 && head.head.header("Content-Length") == "11" && head.body.isEmpty)
    }

    // MARK: - RFC 9111 section 4.1, RFC 9110 section 12.5.5: Vary

    struct VaryRow: Sendable, CustomTestStringConvertible {
        let field: String
        let stored: String?
        let requested: String?
        let matches: Bool
        var testDescription: String { "\(field): \(stored ?? "absent") vs \(requested ?? "absent")" }
    }

    static let varyRows: [VaryRow] = [
        VaryRow(field: "Accept-Language", stored: "en, de", requested: "de,en", matches: true),
        VaryRow(field: "Accept-Language", stored: "en-US, fr;q=0.5", requested: "FR;Q=0.5 ,EN-us", matches: true),
        VaryRow(field: "Accept-Language", stored: "en", requested: "fr", matches: false),
        VaryRow(field: "Accept-Language", stored: "en", requested: "en, fr", matches: false),
        VaryRow(field: "Accept-Encoding", stored: "gzip, br", requested: "br,gzip", matches: true),
        VaryRow(field: "Accept-Encoding", stored: "GZIP", requested: "gzip", matches: true),
        VaryRow(field: "Accept-Encoding", stored: "gzip", requested: nil, matches: false),
        VaryRow(field: "Foo", stored: "1,2", requested: " 1, 2 ", matches: true),
        VaryRow(field: "Foo", stored: "1, 2", requested: "2, 1", matches: false),
        VaryRow(field: "Foo", stored: "1", requested: "2", matches: false),
        VaryRow(field: "Foo", stored: "a", requested: "A", matches: false),
        VaryRow(field: "Foo", stored: nil, requested: nil, matches: true),
        VaryRow(field: "Foo", stored: nil, requested: "1", matches: false),
    ]

    @Test("RFC 9111 §4.1: stored Vary values select requests; Accept-Language and Accept-Encoding compared after case, whitespace and order",
          arguments: varyRows)
    func vary(row: VaryRow) {
        func headers(_ value: String?) -> RequestHeaders {
            RequestHeaders(CacheDecisionTests.request(headers: value.map { [row.field: $0] } ?? [:]))
        }
        let names = [row.field.lowercased()]
        let entry = Self.entry(200, ["Vary": row.field], body: "x")
        var stored = entry
        stored.varyValues = Vary.values(names: names, headers: headers(row.stored))
        #expect(Vary.matches(stored, headers(row.requested)) == row.matches)
        #expect((Vary.variantName(names: names, headers: headers(row.stored))
                 == Vary.variantName(names: names, headers: headers(row.requested))) == row.matches,
                "one variant key per combination of normalized values")
        #expect(Vary.variantName(names: names, values: stored.varyValues) == Vary.variantName(names: names, headers: headers(row.stored)),
                "a stored entry names its own variant")
    }

    @Test("RFC 9111 §4.1: each combination is an entry of its own, at most HTTPCache.maxVariantsPerURL per URL, the oldest removed",
          arguments: [1, 8, 9, 12], [false, true])
    func boundedVariants(count: Int, onDisk: Bool) throws {
        let clock = TestClock()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fidelity-variants-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any ResponseStore = onDisk ? try DiskResponseStore(directory: directory) : MemoryResponseStore()
        let cache = HTTPCache(store: store, now: clock.closure)
        let recorder = EventRecorder(cache)
        func request(_ language: String) -> URLRequest {
            var request = URLRequest(url: Self.url)
            request.setValue(language, forHTTPHeaderField: "Accept-Language")
            return request
        }
        let languages = (0..<count).map { "lang-\($0)" }
        for language in languages {
            let response = HTTPURLResponse(url: Self.url, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Vary": "Accept-Language", "Content-Language": language])!
            try cache.storeResponse(response, data: Data(language.utf8), for: request(language))
            clock.advance(by: 1)
        }
        let kept = min(count, HTTPCache.maxVariantsPerURL)
        #expect(HTTPCache.maxVariantsPerURL == 8)
        #expect(cache.entryCount == kept + 1, "the variants kept, plus the entry under the URL")
        for (index, language) in languages.enumerated() {
            let entry = cache.cachedEntry(for: request(language))
            if index < count - kept {
                #expect(entry == nil, "\(language) was stored longest ago: removed")
            } else {
                #expect(entry.map { String(decoding: $0.body, as: UTF8.self) } == language)
                #expect(entry?.varyValues[Vary.variantListName] == nil, "the cache's bookkeeping is not shown")
            }
        }
        #expect(recorder.count(.evicted) == count - kept)
        let primary = try #require(try cache.store.entry(for: cache.key(for: request("x"))))
        #expect(Vary.variantList(of: primary).count == kept)
    }

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

    // MARK: - RFC 9211: Cache-Status

    struct StatusRow: Sendable, CustomTestStringConvertible {
        let name: String
        let disposition: Disposition
        let expected: String
        var testDescription: String { name }
    }

    static let statusRows: [StatusRow] = [
        StatusRow(name: "hit", disposition: Disposition(status: .fresh, hit: true, ttl: 42.9, age: 17), expected: "HTTPCaching; hit; ttl=42"),
        StatusRow(name: "stale hit: negative ttl", disposition: Disposition(status: .stale, hit: true, ttl: -3.2), expected: "HTTPCaching; hit; ttl=-4"),
        StatusRow(name: "uri-miss, stored", disposition: Disposition(status: .miss, forward: .uriMiss, forwardStatus: 200, stored: true, ttl: 60),
                  expected: "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=60; stored"),
        StatusRow(name: "vary-miss", disposition: Disposition(status: .miss, forward: .varyMiss, forwardStatus: 200),
                  expected: "HTTPCaching; fwd=vary-miss; fwd-status=200"),
        StatusRow(name: "miss", disposition: Disposition(status: .miss, forward: .miss, forwardStatus: 200), expected: "HTTPCaching; fwd=miss; fwd-status=200"),
        StatusRow(name: "stale, revalidated", disposition: Disposition(status: .revalidated, forward: .stale, forwardStatus: 304, stored: true, ttl: 60),
                  expected: "HTTPCaching; fwd=stale; fwd-status=304; ttl=60; stored"),
        StatusRow(name: "request", disposition: Disposition(status: .expired, forward: .request, forwardStatus: 200),
                  expected: "HTTPCaching; fwd=request; fwd-status=200"),
        StatusRow(name: "method", disposition: Disposition(status: .bypass, forward: .method, forwardStatus: 201), expected: "HTTPCaching; fwd=method; fwd-status=201"),
        StatusRow(name: "bypass with a token detail", disposition: Disposition(status: .bypass, forward: .bypass, forwardStatus: 500, detail: "not-stored-status"),
                  expected: "HTTPCaching; fwd=bypass; fwd-status=500; detail=not-stored-status"),
        StatusRow(name: "collapsed", disposition: Disposition(status: .miss, forward: .uriMiss, forwardStatus: 200, stored: true, collapsed: true),
                  expected: "HTTPCaching; fwd=uri-miss; fwd-status=200; stored; collapsed"),
        StatusRow(name: "fallback: a detail that is not a token is a string",
                  disposition: Disposition(status: .fallback, forward: .stale, forwardStatus: 503, detail: "the origin answered 503"),
                  expected: "HTTPCaching; fwd=stale; fwd-status=503; detail=\"the origin answered 503\""),
        StatusRow(name: "quotes and backslashes escaped, controls dropped",
                  disposition: Disposition(status: .bypass, detail: "a \"b\" \\ c\u{7}"), expected: "HTTPCaching; detail=\"a \\\"b\\\" \\\\ c\""),
        StatusRow(name: "a status outside 100-999 is left out", disposition: Disposition(status: .bypass, forward: .bypass, forwardStatus: 1000),
                  expected: "HTTPCaching; fwd=bypass"),
        StatusRow(name: "an infinite ttl is left out", disposition: Disposition(status: .fresh, hit: true, ttl: .infinity), expected: "HTTPCaching; hit"),
    ]

    @Test("RFC 9211 §2: the member names the cache, then hit or fwd, fwd-status, ttl, stored, collapsed, detail", arguments: statusRows)
    func cacheStatusMember(row: StatusRow) {
        #expect(CacheStatusField.member(row.disposition, cacheName: "HTTPCaching") == row.expected)
    }

    @Test("RFC 9211 §2: the cache appends its member after those already in the field; a name that is not a token is quoted")
    func cacheStatusList() {
        #expect(CacheStatusField.appending("HTTPCaching; hit", to: "OriginCache; fwd=uri-miss") == "OriginCache; fwd=uri-miss, HTTPCaching; hit")
        #expect(CacheStatusField.appending("HTTPCaching; hit", to: "  ") == "HTTPCaching; hit")
        #expect(CacheStatusField.member(Disposition(status: .fresh, hit: true), cacheName: "my cache") == "\"my cache\"; hit")
    }
}
