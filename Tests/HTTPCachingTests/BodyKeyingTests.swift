import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Bodies as keys: `QUERY` (draft-ietf-httpbis-safe-method-w-body) is cached under a key holding
/// its body's digest; a POST to a search or GraphQL endpoint is when the configuration or the
/// request says so. Checked against the loopback origin: what it received, and what callers got.
@Suite("Bodies as keys")
struct BodyKeyingTests {
    /// Routes `/q` to answer with the body it received and how many requests it has had.
    static func echo(_ origin: LoopbackOrigin, _ path: String = "/q", cacheControl: String = "max-age=600",
                     etag: String? = nil) {
        origin.route(path) { request, hit in
            if let etag, request.header("If-None-Match") == etag { return .init(status: 304, headers: [("ETag", etag)]) }
            var headers = [("Cache-Control", cacheControl)]
            if let etag { headers.append(("ETag", etag)) }
            return .init(headers: headers, text: "\(request.method) \(String(decoding: request.body, as: UTF8.self)) #\(hit)")
        }
    }

    static func request(_ h: Harness, _ method: String, _ body: String, path: String = "/q",
                        contentType: String = "application/json") -> URLRequest {
        var request = URLRequest(url: h.origin.url(path))
        request.httpMethod = method
        request.httpBody = Data(body.utf8)
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        return request
    }

    @Test("QUERY: the same body is a hit, another body a miss; the origin gets every body it is sent, whole")
    func queryCached() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        let first = try await fetch(h.session, Self.request(h, "QUERY", #"{"q":"a"}"#))
        let second = try await fetch(h.session, Self.request(h, "QUERY", #"{"q":"a"}"#))
        let other = try await fetch(h.session, Self.request(h, "QUERY", #"{"q":"b"}"#))
        #expect(first.text == #"QUERY {"q":"a"} #1"# && first.status == .miss)
        #expect(second.text == first.text && second.status == .fresh)
        #expect(other.text == #"QUERY {"q":"b"} #2"# && other.status == .miss)
        #expect(h.origin.requests(for: "/q").map { String(decoding: $0.body, as: UTF8.self) } == [#"{"q":"a"}"#, #"{"q":"b"}"#])
        #expect(h.origin.requests(for: "/q").allSatisfy { $0.header(HTTPCachingHeaders.bodyKey) == nil })
        #expect(h.cache.entryCount == 2)
    }

    @Test("RFC 9110 9.1: methods are case-sensitive: `query` goes out as written, is never cached, and is unsafe (it invalidates the URL's GET)")
    func methodCaseSensitive() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        let get = URLRequest(url: h.origin.url("/q"))
        _ = try await fetch(h.session, get)
        #expect(try await fetch(h.session, get).status == .fresh)
        let first = try await fetch(h.session, Self.request(h, "query", "a"))
        let second = try await fetch(h.session, Self.request(h, "query", "a"))
        #expect(first.text == "query a #2" && second.text == "query a #3", "sent as written, every time: \(first.text), \(second.text)")
        let after = try await fetch(h.session, get)
        #expect(after.status == .miss && after.text == "GET  #4", "the unknown method's answer invalidated the stored GET")
        // Keyed by the request's own say, `query` is keyed as itself, never as QUERY.
        _ = try await fetch(h.session, Self.request(h, "QUERY", "a"))
        var keyed = Self.request(h, "query", "a")
        keyed.keysBody = true
        #expect(try await fetch(h.session, keyed).text == "query a #6", "not the stored QUERY's answer")
        #expect(try h.cache.manage.key(for: keyed) != h.cache.manage.key(for: Self.request(h, "QUERY", "a")))
        #expect(BodyKeying(methods: ["post", "Query"]).methods == ["POST", "Query"], "configured methods are read as sent")
        // Foundation itself writes these six in capitals; if it stops, `get` would be a method of its own here too.
        for method in ["get", "head", "post", "put", "delete", "connect"] {
            var request = get
            request.httpMethod = method
            #expect(request.httpMethod == method.uppercased(), "Foundation's own spelling")
        }
        #expect(h.origin.requestCount("/q") == 6)
    }

    @Test("the Content-Type is part of the key: the same bytes as another type are a miss")
    func contentTypeKeyed() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        _ = try await fetch(h.session, Self.request(h, "QUERY", "a=1", contentType: "application/x-www-form-urlencoded"))
        let other = try await fetch(h.session, Self.request(h, "QUERY", "a=1", contentType: "text/plain"))
        #expect(other.status == .miss && h.origin.requestCount("/q") == 2)
    }

    @Test("QUERY draft, Caching: the request's Content-Encoding is part of the key: the same bytes gzip-coded are a miss")
    func queryKeyIgnoresContentEncoding() async throws {
        let h = try Harness()
        h.origin.route("/s") { request, hit in
            .init(headers: [("Cache-Control", "max-age=600")], text: "\(request.header("Content-Encoding") ?? "identity") #\(hit)")
        }
        var request = URLRequest(url: h.origin.url("/s"))
        request.httpMethod = "QUERY"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("abc".utf8)
        _ = try await fetch(h.session, request)
        request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        let coded = try await fetch(h.session, request)
        #expect(coded.status == .miss, "answered \(coded.text)")
        #expect(coded.text == "gzip #2")
        #expect(try await fetch(h.session, request).status == .fresh, "the coded body has an entry of its own")
        request.setValue("identity", forHTTPHeaderField: "Content-Encoding")
        #expect(try await fetch(h.session, request).text == "identity #1", "identity is no coding: the uncoded body's entry")
    }

    @Test("transparency: a QUERY sequence gives the caller the same bodies as a plain session, with fewer origin requests")
    func transparency() async throws {
        let h = try Harness()
        Self.echo(h.origin, cacheControl: "max-age=600")
        let plain = uncachedSession()
        defer { plain.finishTasksAndInvalidate() }
        let bodies = [#"{"q":"a"}"#, #"{"q":"b"}"#]
        var seen: [String: [String]] = [:]
        for (name, session) in [("plain", plain), ("caching", h.session)] {
            for body in bodies {
                let answer = try await fetch(session, Self.request(h, "QUERY", body))
                seen[name, default: []].append(String(answer.text.prefix { $0 != "#" }))
            }
        }
        #expect(seen["plain"] == seen["caching"])
        let sent = h.origin.requests(for: "/q").map { String(decoding: $0.body, as: UTF8.self) }
        #expect(sent == bodies + bodies, "each body reached the origin whole, once per session")
        for body in bodies { #expect(try await fetch(h.session, Self.request(h, "QUERY", body)).status == .fresh) }
        #expect(h.origin.requestCount("/q") == 4)
    }

    @Test("POST opted in by URL: cached, and it invalidates nothing; a POST elsewhere still invalidates")
    func postOptIn() async throws {
        let keying = BodyKeying(methods: ["POST"], urls: { $0.path == "/graphql" })
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: keying))
        Self.echo(h.origin, "/graphql")
        Self.echo(h.origin, "/other")
        _ = try await h.get("/graphql")
        let first = try await fetch(h.session, Self.request(h, "POST", #"{"query":"{ me }"}"#, path: "/graphql"))
        let second = try await fetch(h.session, Self.request(h, "POST", #"{"query":"{ me }"}"#, path: "/graphql"))
        #expect(first.status == .miss && second.status == .fresh && second.text == first.text)
        #expect(try await h.get("/graphql").status == .fresh, "the keyed POST did not invalidate the stored GET")
        _ = try await h.get("/other")
        let elsewhere = try await fetch(h.session, Self.request(h, "POST", "x", path: "/other"))
        #expect(elsewhere.status == .bypass && h.recorder.count(.invalidated) == 1)
        #expect(try await h.get("/other").status == .miss)
    }

    @Test("per request: URLRequest.keysBody keys a POST the configuration does not, and unkeys a QUERY")
    func perRequest() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        var post = Self.request(h, "POST", "p")
        post.keysBody = true
        _ = try await fetch(h.session, post)
        #expect(try await fetch(h.session, post).status == .fresh)
        var query = Self.request(h, "QUERY", "q")
        query.keysBody = false
        _ = try await fetch(h.session, query)
        #expect(try await fetch(h.session, query).status == .bypass)
        #expect(h.origin.requestCount("/q") == 3)
        #expect(h.origin.requests(for: "/q").allSatisfy { $0.header(HTTPCachingHeaders.bodyKey) == nil })
    }

    @Test("a body over maxBodySize is not keyed: it passes through whole, and an event says why")
    func overLimit() async throws {
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: BodyKeying(maxBodySize: 8)))
        Self.echo(h.origin)
        let body = String(repeating: "x", count: 9)
        for _ in 0..<2 { #expect(try await fetch(h.session, Self.request(h, "QUERY", body)).status == .bypass) }
        #expect(h.origin.requests(for: "/q").map(\.body) == [Data(body.utf8), Data(body.utf8)])
        #expect(h.recorder.count(.notStored(.bodyTooLargeToKey(bytes: 9, limit: 8))) == 2)
        #expect(try await fetch(h.session, Self.request(h, "QUERY", "12345678")).status == .miss, "at the limit it is keyed")
    }

    @Test("a streamed body is read once, sent whole, and keyed like the same bytes given as data")
    func streamedBody() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        var streamed = Self.request(h, "QUERY", "")
        streamed.httpBody = nil
        streamed.httpBodyStream = InputStream(data: Data("streamed".utf8))
        let first = try await fetch(h.session, streamed)
        #expect(first.text == "QUERY streamed #1" && first.status == .miss)
        #expect(try await fetch(h.session, Self.request(h, "QUERY", "streamed")).status == .fresh)
    }

    @Test("a keyed POST's stream without a Content-Type reaches the origin typed and framed as without the cache, keyed or too large to key",
          arguments: [64, 4])
    func streamedBodyTyped(maxBodySize: Int) async throws {
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: BodyKeying(methods: ["POST"], maxBodySize: maxBodySize)))
        Self.echo(h.origin)
        var fields: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            var request = URLRequest(url: h.origin.url("/q"))
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data("streamed".utf8))
            #expect(try await fetch(session, request).text.hasPrefix("POST streamed #"))
            let sent = h.origin.requests(for: "/q").last
            fields[caching] = ["Content-Type", "Content-Length", "Transfer-Encoding"].map { sent?.header($0) ?? "-" }
        }
        #expect(fields[true] == fields[false], "with the cache, then without: \(fields)")
    }

    @Test("a keyed stream libcurl sends again on a new connection goes whole, from the bytes it was keyed by, whatever the delegate gives: the answer stored under their digest is theirs",
          arguments: ["new stream", "nil", "no delegate"])
    func keyedStreamSentAgain(delegate mode: String) async throws {
        let payload = Data(repeating: 65, count: 3000)
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: BodyKeying(methods: ["POST"])))
        h.origin.answersExpectContinue = false
        h.origin.route("/prime") { _, _ in .init(text: "primed") }
        h.origin.route("/flaky") { request, hit in
            hit == 1 ? .init(fault: .reset) // the reused connection dies once the body has gone
                : .init(headers: [("Cache-Control", "max-age=600")], text: "\(request.body.count) \(request.body == payload)")
        }
        let probe = ProbeDelegate(bodyStream: { mode == "new stream" ? InputStream(data: Data("other".utf8)) : nil })
        let session = h.session(caching: true, mode == "no delegate" ? nil : probe)
        defer { session.finishTasksAndInvalidate() }
        var prime = URLRequest(url: h.origin.url("/prime"))
        prime.httpMethod = "POST" // through the forwarding session: a connection for it to reuse
        prime.httpBody = Data("p".utf8)
        _ = try await fetch(session, prime)
        var request = URLRequest(url: h.origin.url("/flaky"))
        request.httpMethod = "POST"
        var answers: [String] = []
        for _ in 0..<2 {
            request.httpBodyStream = InputStream(data: payload)
            let result = try await fetch(session, request)
            answers.append("\(result.text) \(result.status.map { "\($0)" } ?? "-")")
        }
        #expect(h.origin.requests(for: "/flaky").map(\.body.count) == [3000, 3000])
        #expect(answers == ["3000 true miss", "3000 true fresh"], "\(answers)")
        #expect(probe.value.bodyStreamRequests == (mode == "no delegate" ? 0 : 1), "the delegate is asked as without the cache")
    }

    @Test("stale: a QUERY is revalidated with its validator; a keyed POST is fetched again, unconditionally")
    func staleEntries() async throws {
        let keying = BodyKeying(methods: ["QUERY", "POST"])
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics, bodyKeying: keying))
        Self.echo(h.origin, cacheControl: "max-age=10", etag: "\"v1\"")
        for method in ["QUERY", "POST"] { _ = try await fetch(h.session, Self.request(h, method, "s")) }
        h.clock.advance(by: 60)
        let query = try await fetch(h.session, Self.request(h, "QUERY", "s"))
        let post = try await fetch(h.session, Self.request(h, "POST", "s"))
        #expect(query.status == .revalidated && query.text == "QUERY s #1", "\(String(describing: query.status))")
        #expect(post.status == .expired && post.text == "POST s #4", "\(String(describing: post.status)) \(post.text)")
        let sent = h.origin.requests(for: "/q")
        #expect(sent.map { $0.header("If-None-Match") } == [nil, nil, "\"v1\"", nil])
        #expect(sent.map(\.body).allSatisfy { $0 == Data("s".utf8) }, "the body goes with the revalidation too")
    }

    @Test("credentials partition keyed bodies as they partition a GET")
    func credentials() async throws {
        let h = try Harness(configuration: CacheConfiguration(storesCredentialedResponses: true))
        Self.echo(h.origin)
        for user in ["alice", "bob", "alice"] {
            var request = Self.request(h, "QUERY", "same")
            request.setValue("Bearer \(user)", forHTTPHeaderField: "Authorization")
            _ = try await fetch(h.session, request)
        }
        #expect(h.origin.requestCount("/q") == 2)
    }

    @Test("a normalizer makes equivalent bodies one key")
    func normalizer() async throws {
        let sorted: @Sendable (Data, String?) -> Data = { body, _ in
            let object = (try? JSONSerialization.jsonObject(with: body)) ?? [:]
            return (try? JSONSerialization.data(withJSONObject: object, options: .sortedKeys)) ?? body
        }
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: BodyKeying(normalizer: sorted)))
        Self.echo(h.origin)
        _ = try await fetch(h.session, Self.request(h, "QUERY", #"{"a":1,"b":2}"#))
        #expect(try await fetch(h.session, Self.request(h, "QUERY", #"{"b":2,"a":1}"#)).status == .fresh)
    }

    @Test("explain names the body as part of the key, and finds the stored entry")
    func explained() async throws {
        let h = try Harness()
        Self.echo(h.origin)
        _ = try await fetch(h.session, Self.request(h, "QUERY", "e"))
        let explanation = h.cache.manage.explain(Self.request(h, "QUERY", "e"))
        #expect(explanation.key.url.contains("#body="))
        #expect(explanation.entry != nil && explanation.outcome.cacheStatus == .fresh)
        #expect(explanation.reasons.contains { $0.contains("body is part of its key") })
        #expect(h.cache.manage.explain(Self.request(h, "QUERY", "other")).entry == nil)
    }
}

/// The pure parts: which requests are keyed, the digest, and the decision for a keyed body.
@Suite("Bodies as keys: the decision and the digest")
struct BodyKeyingDecisionTests {
    typealias D = CacheDecisionTests

    @Test("which requests are keyed", arguments: [
        ("QUERY", nil, BodyKeying.query, true), ("query", nil, .query, false), ("POST", nil, .query, false),
        ("GET", true, .query, false), ("HEAD", true, .query, false), ("POST", true, .query, true),
        ("QUERY", false, .query, false), ("POST", nil, BodyKeying(methods: ["post"]), true),
        ("POST", nil, BodyKeying(methods: ["POST"], urls: { $0.path == "/search" }), false),
    ] as [(String, Bool?, BodyKeying, Bool)])
    func applies(method: String, own: Bool?, keying: BodyKeying, keyed: Bool) {
        var request = D.request(method)
        request.keysBody = own
        #expect(keying.applies(to: request) == keyed)
    }

    @Test("the digest: of the body and its Content-Type, after the normalizer; 32 hex digits")
    func digest() {
        let keying = BodyKeying()
        func digest(_ body: String, _ type: String?, keying: BodyKeying = BodyKeying()) -> String {
            keying.digest(of: Data(body.utf8), contentType: type, contentEncoding: nil)
        }
        #expect(digest("a", "text/plain").count == 32 && digest("a", "text/plain").allSatisfy(\.isHexDigit))
        #expect(digest("a", "text/plain") == "74f8caf89a5a7bdb1e6d0d0b799d9aa8", "SHA-256 of the type, a zero byte, the body")
        #expect(digest("a", "text/plain") != digest("b", "text/plain"))
        #expect(digest("a", "text/plain") != digest("a", "text/html"))
        #expect(digest("ab", nil) != digest("b", "a"), "the type and the body are separated")
        let lowered = BodyKeying(normalizer: { body, _ in Data(String(decoding: body, as: UTF8.self).lowercased().utf8) })
        #expect(digest("A", nil, keying: lowered) == digest("a", nil, keying: lowered))
        let fields = RequestHeaders(D.request("QUERY", headers: ["Content-Type": "text/plain"]))
        #expect(keying.digest(of: Data("a".utf8), headers: fields) == digest("a", "text/plain"), "from the request's fields")
    }

    struct CodingRow: Sendable, CustomTestStringConvertible {
        let field: String?
        /// The digest of `a` as `text/plain` coded so; nil: that of the uncoded body.
        let expected: String?
        var testDescription: String { field.map { "Content-Encoding: \($0)" } ?? "no Content-Encoding" }
    }

    static let gzipDigest = "008ed7555a3afa0811ec40b2af2e8e3f"
    static let codingRows: [CodingRow] = [
        CodingRow(field: nil, expected: nil), CodingRow(field: "", expected: nil), CodingRow(field: "identity", expected: nil),
        CodingRow(field: " Identity ", expected: nil), CodingRow(field: "gzip", expected: gzipDigest),
        CodingRow(field: " GZIP ", expected: gzipDigest), CodingRow(field: "gzip, identity", expected: gzipDigest),
        CodingRow(field: "br", expected: "br"), CodingRow(field: "gzip, br", expected: "gzip,br"),
        CodingRow(field: "br,gzip", expected: "br,gzip"),
    ]

    @Test("QUERY draft, Caching: the request's Content-Encoding is keyed (trimmed, lower-cased, identity none); an uncoded body keeps its digest",
          arguments: codingRows)
    func digestOfCoding(row: CodingRow) {
        let keying = BodyKeying()
        let plain = keying.digest(of: Data("a".utf8), contentType: "text/plain", contentEncoding: nil)
        let coded = keying.digest(of: Data("a".utf8), contentType: "text/plain", contentEncoding: row.field)
        switch row.expected {
        case nil: #expect(coded == plain)
        case Self.gzipDigest?: #expect(coded == Self.gzipDigest)
        case let codings?:
            #expect(coded != plain && coded != Self.gzipDigest)
            #expect(BodyKeying.codings(row.field) == codings)
        }
        let fields = ["Content-Type": "text/plain"].merging(row.field.map { ["Content-Encoding": $0] } ?? [:]) { $1 }
        #expect(keying.digest(of: Data("a".utf8), headers: RequestHeaders(D.request("QUERY", headers: fields))) == coded)
    }

    static func decide(_ method: String, keyed: Bool, entry: CacheEntry?, age: TimeInterval) -> String {
        let configuration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600))
        return outcome(CacheDecision.decide(request: D.request(method), entry: entry, keyedBody: keyed,
                                            now: D.storedAt.addingTimeInterval(age), configuration: configuration))
    }

    @Test("a keyed body is decided as a GET; only QUERY revalidates; unkeyed, QUERY bypasses and POST invalidates", arguments: [
        ("QUERY", true, false, 0.0, "miss"), ("QUERY", true, true, 10, "fresh"), ("QUERY", true, true, 120, "stale"),
        ("POST", true, true, 10, "fresh"), ("POST", true, false, 0, "miss"),
        ("QUERY", false, true, 10, "bypass"), ("POST", false, true, 10, "invalidate"),
    ] as [(String, Bool, Bool, TimeInterval, String)])
    func decision(method: String, keyed: Bool, stored: Bool, age: TimeInterval, expected: String) {
        #expect(Self.decide(method, keyed: keyed, entry: stored ? D.entry(headers: ["ETag": "\"e\""]) : nil, age: age) == expected)
    }

    @Test("past its usable window with a validator: a keyed QUERY revalidates, a keyed POST fetches again")
    func pastUsable() {
        let entry = D.entry(headers: ["ETag": "\"e\""])
        #expect(Self.decide("QUERY", keyed: true, entry: entry, age: 7200) == "revalidate+fallback")
        #expect(Self.decide("POST", keyed: true, entry: entry, age: 7200) == "fetch+fallback")
    }
}
