import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// What a request carries reaches the origin as it does without the cache: method, target and
/// every header field, with what Foundation and libcurl add or drop. Not their order: Foundation
/// keeps a request's fields in a dictionary, so their order varies without the cache too.
@Suite("Request fields through the cache")
struct RequestFieldsTests {
    /// A request shape: how the caller builds it.
    struct Shape: Sendable, CustomTestStringConvertible {
        let name: String
        let method: String
        let headers: [(String, String)]
        let body: Data?
        var testDescription: String { name }
    }

    static let shapes: [Shape] = [
        Shape(name: "plain GET", method: "GET", headers: [], body: nil),
        Shape(name: "headers in mixed case, an empty one, a long one", method: "GET",
              headers: [("x-lower", "a"), ("X-UPPER", "b"), ("X-Empty", ""), ("X-Long", String(repeating: "v", count: 4000))], body: nil),
        Shape(name: "Accept, Accept-Encoding and Accept-Language set", method: "GET",
              headers: [("Accept", "application/json"), ("Accept-Encoding", "identity"), ("Accept-Language", "de")], body: nil),
        Shape(name: "Connection: close and a User-Agent", method: "GET",
              headers: [("Connection", "close"), ("User-Agent", "fields-test/1")], body: nil),
        Shape(name: "a query with encoded characters", method: "GET", headers: [], body: nil),
        Shape(name: "lowercase method with a body", method: "post", headers: [("Content-Type", "text/plain")], body: Data("x=1".utf8)),
        Shape(name: "DELETE with no body", method: "DELETE", headers: [], body: nil),
        Shape(name: "POST with no body", method: "POST", headers: [], body: nil),
        Shape(name: "PATCH with JSON", method: "PATCH", headers: [("Content-Type", "application/json")], body: Data("{}".utf8)),
        Shape(name: "credentials: Authorization and Cookie", method: "GET",
              headers: [("Authorization", "Bearer t"), ("Cookie", "a=1; b=2")], body: nil),
        Shape(name: "Cache-Control: no-cache and Pragma", method: "GET", headers: [("Cache-Control", "no-cache"), ("Pragma", "no-cache")], body: nil),
        Shape(name: "the caller's own If-None-Match", method: "GET", headers: [("If-None-Match", "\"v0\"")], body: nil),
        Shape(name: "a Range", method: "GET", headers: [("Range", "bytes=0-1")], body: nil),
    ]

    @Test("a request reaches the origin with the same method, target, body and fields as without the cache",
          arguments: shapes)
    func sameOnTheWire(_ shape: Shape) async throws {
        let h = try Harness()
        h.origin.route("/f") { _, _ in .init(text: "ok") }
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = caching ? h.plainCachingSession() : uncachedSession()
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
