import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// A request or an answer as a test builds it: a name, and the fields it sets.
struct FieldShape: Sendable, CustomTestStringConvertible {
    let name: String
    var method = "GET"
    var status = 200
    let headers: [(String, String)]
    var body: Data? = nil
    var testDescription: String { name }
}

/// What a request carries reaches the origin as it does without the cache: method, target and
/// every header field, with what Foundation and libcurl add or drop. Not their order: Foundation
/// keeps a request's fields in a dictionary, so their order varies without the cache too.
@Suite("Request fields through the cache")
struct RequestFieldsTests {
    static let shapes: [FieldShape] = [
        FieldShape(name: "plain GET", method: "GET", headers: [], body: nil),
        FieldShape(name: "headers in mixed case, an empty one, a long one", method: "GET",
              headers: [("x-lower", "a"), ("X-UPPER", "b"), ("X-Empty", ""), ("X-Long", String(repeating: "v", count: 4000))], body: nil),
        FieldShape(name: "Accept, Accept-Encoding and Accept-Language set", method: "GET",
              headers: [("Accept", "application/json"), ("Accept-Encoding", "identity"), ("Accept-Language", "de")], body: nil),
        FieldShape(name: "Connection: close and a User-Agent", method: "GET",
              headers: [("Connection", "close"), ("User-Agent", "fields-test/1")], body: nil),
        FieldShape(name: "a query with encoded characters", method: "GET", headers: [], body: nil),
        FieldShape(name: "lowercase method with a body", method: "post", headers: [("Content-Type", "text/plain")], body: Data("x=1".utf8)),
        FieldShape(name: "DELETE with no body", method: "DELETE", headers: [], body: nil),
        FieldShape(name: "POST with no body", method: "POST", headers: [], body: nil),
        FieldShape(name: "PATCH with JSON", method: "PATCH", headers: [("Content-Type", "application/json")], body: Data("{}".utf8)),
        FieldShape(name: "credentials: Authorization and Cookie", method: "GET",
              headers: [("Authorization", "Bearer t"), ("Cookie", "a=1; b=2")], body: nil),
        FieldShape(name: "Cache-Control: no-cache and Pragma", method: "GET", headers: [("Cache-Control", "no-cache"), ("Pragma", "no-cache")], body: nil),
        FieldShape(name: "the caller's own If-None-Match", method: "GET", headers: [("If-None-Match", "\"v0\"")], body: nil),
        FieldShape(name: "a Range", method: "GET", headers: [("Range", "bytes=0-1")], body: nil),
    ]

    @Test("a request reaches the origin with the same method, target, body and fields as without the cache",
          arguments: shapes)
    func sameOnTheWire(_ shape: FieldShape) async throws {
        let h = try Harness()
        h.origin.route("/f") { _, _ in .init(text: "ok") }
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            var request = URLRequest(url: h.origin.url("/f?q=a%20b&r=%C3%A9&s=1+2"))
            request.httpMethod = shape.method
            for (name, value) in shape.headers { request.setValue(value, forHTTPHeaderField: name) }
            request.httpBody = shape.body
            let before = h.origin.requestCount("/f")
            _ = try await fetch(session, request)
            let received = try #require(h.origin.requests(for: "/f").dropFirst(before).first)
            seen[caching] = [received.method, received.target, "\(received.body.count)"]
                + received.headers.map { "\($0.name): \($0.value)" }.sorted()
        }
        #expect(seen[true] == seen[false], "with the cache, then without:\n\(seen[true] ?? [])\n\(seen[false] ?? [])")
    }
}

/// What an answer carries reaches the caller as it does without the cache, on a miss and on a
/// hit: status, every header field as `HTTPURLResponse` gives it, and the body.
@Suite("Response fields through the cache")
struct ResponseFieldsTests {
    static let shapes: [FieldShape] = [
        FieldShape(name: "a field repeated (Link twice)", status: 200, headers: [("Link", "</a>; rel=preload"), ("Link", "</b>; rel=preload")]),
        FieldShape(name: "fields in odd case, an empty one", status: 200, headers: [("x-lower", "a"), ("X-UPPER", "b"), ("X-Empty", "")]),
        FieldShape(name: "a value with inner spaces and commas", status: 200, headers: [("X-List", "a, b ,c"), ("Content-Type", "text/plain; charset=utf-8")]),
        FieldShape(name: "Content-Disposition and Content-Language", status: 200,
              headers: [("Content-Disposition", "attachment; filename=\"r.txt\""), ("Content-Language", "de")]),
        FieldShape(name: "203 with freshness", status: 203, headers: []),
        FieldShape(name: "validators, Vary and Content-Location", status: 200,
              headers: [("ETag", "\"v1\""), ("Last-Modified", "Tue, 24 Nov 2026 10:00:00 GMT"), ("Vary", "Accept-Encoding"),
                        ("Content-Location", "/r.txt")]),
    ]

    @Test("an answer reaches the caller with the same status, fields and body as without the cache, on the miss and on the hit",
          arguments: shapes)
    func sameForTheCaller(_ shape: FieldShape) async throws {
        let h = try Harness()
        h.origin.route("/r", response: .init(status: shape.status, headers: shape.headers + [("Cache-Control", "max-age=600")], text: "body"))
        var seen: [Bool: [[String]]] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            for _ in 0..<2 {
                let result = try await fetch(session, URLRequest(url: h.origin.url("/r")))
                seen[caching, default: []].append(Self.observed(result))
            }
        }
        #expect(seen[true] == seen[false], "with the cache, then without:\n\(seen[true] ?? [])\n\(seen[false] ?? [])")
        #expect(h.origin.requestCount("/r") == 3, "two without the cache, one with it")
    }

    /// What a caller sees of an answer, but for the fields only a cache adds or a clock moves.
    static func observed(_ result: FetchResult) -> [String] {
        let fields = result.response.allHeaderFields.compactMap { name, value -> String? in
            guard let name = name as? String, !["cache-status", "date", "age"].contains(name.lowercased()),
                  !name.lowercased().hasPrefix("x-http-caching") else { return nil }
            return "\(name): \(value)"
        }.sorted()
        return ["\(result.response.statusCode)", result.text, result.response.mimeType ?? "-",
                result.response.textEncodingName ?? "-", result.response.suggestedFilename ?? "-",
                "\(result.response.expectedContentLength)"] + fields
    }
}

/// A response's URL is the URL of the request it answers, as without the cache, on a hit too:
/// not the URL of the request whose answer was stored.
@Suite("Response URLs through the cache")
struct ResponseURLTests {
    /// Two requests for one entry, as a test sends them: the second URL differs from the first
    /// only where the cache's key does not look.
    struct Pair: Sendable, CustomTestStringConvertible {
        let name: String
        let first: String
        let second: String
        var headers: [(String, String)] = []
        var testDescription: String { name }
    }

    static let pairs: [Pair] = [
        Pair(name: "userinfo, the same both times", first: "http://u:p@HOST/u", second: "http://u:p@HOST/u"),
        Pair(name: "another fragment", first: "http://HOST/f#one", second: "http://HOST/f#two"),
        Pair(name: "no fragment after one", first: "http://HOST/n#one", second: "http://HOST/n"),
        Pair(name: "query order under No-Vary-Search", first: "http://HOST/q?a=1&b=2", second: "http://HOST/q?b=2&a=1",
             headers: [("No-Vary-Search", "key-order")]),
    ]

    /// The paths the pairs ask for.
    static let paths = ["/u", "/f", "/n", "/q"]

    @Test("a hit's response.url is its own request's URL, as without the cache", arguments: pairs)
    func hitURL(_ pair: Pair) async throws {
        let h = try Harness()
        for path in Self.paths {
            h.origin.route(path, response: .init(headers: pair.headers + [("Cache-Control", "max-age=600")], text: "r"))
        }
        let host = "127.0.0.1:\(h.origin.port)"
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            for text in [pair.first, pair.second] {
                let url = try #require(URL(string: text.replacingOccurrences(of: "HOST", with: host)))
                let result = try await fetch(session, URLRequest(url: url))
                seen[caching, default: []].append(result.response.url?.absoluteString ?? "-")
            }
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(Self.paths.map { h.origin.requestCount($0) }.reduce(0, +) == 3, "two without the cache, one with it")
    }
}
