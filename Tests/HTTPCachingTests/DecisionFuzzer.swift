import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// Random requests, entries, configurations and times for the decision and the transaction:
/// valid values, hostile ones (`nan`, 20 digits, dates in year 0 or 9999), and noise.
struct DecisionFuzzer {
    var fields: FieldFuzzer
    let base = Date(timeIntervalSince1970: 1_767_225_600) // 2026-01-01

    init(seed: UInt64) { fields = FieldFuzzer(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { fields.int(range) }
    mutating func bool() -> Bool { int(0...1) == 0 }
    mutating func pick<T>(_ options: [T]) -> T { options[int(0...(options.count - 1))] }

    static let cacheControl = [
        "max-age=60", "max-age=0", "max-age=18446744073709551615", "max-age=99999999999999999999", "max-age=nan", "max-age=-1",
        "max-age", "no-cache", "no-store", "must-revalidate", "proxy-revalidate", "immutable", "private", "public", "must-understand",
        "stale-while-revalidate=30", "stale-while-revalidate=99999999999999999999", "stale-if-error=86400", "stale-if-error=1e20",
        "max-stale", "max-stale=5", "max-stale=abc", "min-fresh=10", "min-fresh=99999999999999999999", "only-if-cached",
    ]
    static let dates = ["Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 2026 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
                        "Mon, 01 Jan 0001 00:00:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "0", "-1", "yesterday"]
    static let ages = ["0", "5", "nan", "inf", "-1", "1e20", "99999999999999999999", "18446744073709551615", "5, 10", "", "7200.0"]
    static let etags = ["\"a\"", "W/\"a\"", "\"b\"", "*", "\"a\", \"b\"", "W/", ""]
    static let varies = ["Accept-Language", "*", "Cookie", "Authorization, Accept", "X-A, x-a", "bad name"]
    static let lengths = ["0", "3", "99999999999999999999", "-1", "abc", "18446744073709551616"]
    static let ranges = ["bytes=0-1", "bytes=-5", "bytes=5-", "bytes=99999999999999999999-", "bytes=0-99999999999999999999",
                         "bytes=0-1,2-3", "bytes=5-1", "items=0-1", "bytes=-0", "bytes=-99999999999999999999", "garbage"]

    /// A value for a field: usually a plausible one for that field, sometimes noise.
    mutating func value(for name: String) -> String {
        if int(0...5) == 0 { return fields.string() }
        switch name.lowercased() {
        case "cache-control": return (0..<int(1...3)).map { _ in pick(Self.cacheControl) }.joined(separator: ", ")
        case "age": return pick(Self.ages)
        case "date", "expires", "last-modified", "if-modified-since": return pick(Self.dates)
        case "etag", "if-none-match": return pick(Self.etags)
        case "vary": return pick(Self.varies)
        case "content-length": return pick(Self.lengths)
        case "range": return pick(Self.ranges)
        case "pragma": return "no-cache"
        case "connection": return pick(["close", "keep-alive, X-Hop", "X-A"])
        case "location", "content-location": return pick(["/other", "http://example.test/x", "http://elsewhere.test/y", "::"])
        case "x-http-caching-windows": return pick(["fresh=1, usable=2", "fresh=nan, usable=1", "fresh=5, usable=1", "fresh=1e308, usable=inf"])
        case "x-http-caching-policy": return pick(["two-tier", "http", "cache-first", "cache-only", "network-only", "custom", "nope"])
        default: return fields.string()
        }
    }

    static let responseFields = ["Cache-Control", "Age", "Date", "Expires", "Last-Modified", "ETag", "Vary", "Content-Length",
                                 "Set-Cookie", "Connection", "X-Hop", "Content-Range", "Location", "Content-Location", "Pragma", "X-Other"]
    static let requestFields = ["Cache-Control", "Pragma", "Range", "If-None-Match", "If-Modified-Since", "Authorization", "Cookie",
                                "X-API-Key", "Accept-Language", "Accept", "X-HTTP-Caching-Windows", "X-HTTP-Caching-Policy"]

    mutating func headers(_ names: [String]) -> [String: String] {
        var headers: [String: String] = [:]
        for _ in 0..<int(0...6) {
            let name = pick(names)
            headers[bool() ? name : name.lowercased()] = value(for: name)
        }
        return headers
    }

    /// A time: near the base, far from it, or at the edges of what a Date holds.
    mutating func date() -> Date {
        switch int(0...9) {
        case 0: return pick([.distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1e15),
                             Date(timeIntervalSince1970: -1e15)])
        case 1: return base.addingTimeInterval(TimeInterval(int(-1_000_000_000...1_000_000_000)))
        default: return base.addingTimeInterval(TimeInterval(int(-300_000...300_000)))
        }
    }

    mutating func windows() -> CacheWindows? {
        switch int(0...4) {
        case 0: return nil
        case 1: return .test(fresh: 0, usable: 0)
        case 2: return .test(fresh: 1e300, usable: 1e300)
        default:
            let fresh = TimeInterval(int(0...100_000))
            return .test(fresh: fresh, usable: fresh + TimeInterval(int(0...1_000_000)))
        }
    }

    static let url = URL(string: "http://example.test/fuzz?q=1")!

    mutating func entry() -> CacheEntry {
        var storedAt = date()
        if int(0...40) == 0 { storedAt = Date(timeIntervalSince1970: pick([.nan, .infinity, -.infinity])) } // a damaged store
        var varyValues: [String: String] = [:]
        if bool() { varyValues["accept-language"] = pick(["en", "fr"]) }
        return CacheEntry(key: CacheKey(url: Self.url), url: Self.url,
                          statusCode: pick([200, 203, 204, 206, 300, 301, 302, 304, 307, 308, 404, 410, 500, 503, 999, 0, -1]),
                          headers: headers(Self.responseFields), body: Data((0..<int(0...64)).map { UInt8(truncatingIfNeeded: $0) }),
                          storedAt: storedAt, windows: windows(), varyValues: varyValues)
    }

    mutating func request() -> URLRequest {
        var request = URLRequest(url: Self.url)
        request.httpMethod = pick(["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "FOO", "get"])
        request.cachePolicy = pick([.useProtocolCachePolicy, .useProtocolCachePolicy, .reloadIgnoringLocalCacheData,
                                    .reloadIgnoringLocalAndRemoteCacheData, .returnCacheDataElseLoad, .returnCacheDataDontLoad,
                                    .reloadRevalidatingCacheData])
        for (name, value) in headers(Self.requestFields) { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    mutating func configuration() -> CacheConfiguration {
        let custom = CachingPolicy.custom("custom", FixedVerdict(verdict: pick([.fresh, .stale, .revalidate, .network])))
        return CacheConfiguration(windows: windows() ?? .standard,
                                  storableStatusCodes: bool() ? CacheConfiguration.defaultStorableStatusCodes : [200, 206, 304, 500, -1],
                                  policy: pick([.twoTier, .httpSemantics, .cacheFirst, .cacheOnly, .networkOnly, custom]),
                                  customPolicies: [custom],
                                  errorFallbackWindow: pick([nil, 0, 60, 7 * 86_400, 1e300, .infinity, .nan]),
                                  storesCredentialedResponses: bool(), storesResponsesSettingCookies: bool(),
                                  honorsOriginDirectives: bool())
    }

    mutating func responseHead() -> ResponseHead {
        ResponseHead(statusCode: pick([200, 200, 200, 203, 204, 206, 301, 302, 304, 304, 400, 403, 404, 500, 503, 100, 999]),
                     headers: headers(Self.responseFields), url: Self.url)
    }
}
