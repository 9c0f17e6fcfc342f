import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// RFC 9111 §4.4 for keyed bodies: a QUERY's target URI is its URL, so a non-error unsafe
/// request to that URL removes its stored QUERY responses, and the keyed POSTs stored for it,
/// whatever their bodies: they are listed in the URL's keyed-body index. Checked through a
/// caching session against the loopback origin.
@Suite("Bodies as keys: invalidated by unsafe requests")
struct BodyKeyingInvalidationTests {
    static func send(_ h: Harness, _ method: String, _ path: String, body: String,
                     session: URLSession? = nil, headers: [String: String] = [:]) async throws -> FetchResult {
        var request = URLRequest(url: h.origin.url(path))
        request.httpMethod = method
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = Data(body.utf8)
        return try await fetch(session ?? h.session, request)
    }

    /// Routes `path` to a storable answer naming the method and body it received and its count.
    static func route(_ h: Harness, _ path: String = "/items", fields: [(String, String)] = []) {
        h.origin.route(path) { request, hit in
            .init(headers: [("Cache-Control", "max-age=600")] + fields,
                  text: "\(request.method) \(String(decoding: request.body, as: UTF8.self)) #\(hit)")
        }
    }

    @Test("RFC 9111 §4.4: a non-error PUT/POST/DELETE to /items invalidates the stored QUERY responses of /items",
          arguments: ["PUT", "POST", "DELETE"])
    func queryEntryInvalidatedByUnsafeMethod(method: String) async throws {
        let h = try Harness()
        h.origin.route("/items") { request, hit in
            .init(headers: [("Cache-Control", "max-age=600")], text: "\(request.method) #\(hit)")
        }
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .miss)
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .fresh)
        let write = try await Self.send(h, method, "/items", body: "new item")
        #expect(write.response.statusCode == 200 && h.recorder.count(.invalidated) == 1)
        let after = try await Self.send(h, "QUERY", "/items", body: "q")
        #expect(after.status == .miss, "served \(after.text) (\(after.status as Any)) after a \(method) changed /items")
        #expect(h.origin.requestCount("/items") == 3)
    }

    @Test("every body stored for the URL is invalidated, in every store; the index goes with them and nothing else does",
          arguments: StoreKind.allCases)
    func everyBody(storeKind: StoreKind) async throws {
        let directory = TemporaryDirectory()
        let store: any ResponseStore = storeKind == .disk ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore()
        defer { (store as? DiskResponseStore)?.close() }
        let h = try Harness(store: store)
        Self.route(h)
        Self.route(h, "/other")
        for body in ["a", "b"] { _ = try await Self.send(h, "QUERY", "/items", body: body) }
        _ = try await Self.send(h, "QUERY", "/other", body: "a")
        _ = try await h.get("/items")
        #expect(h.cache.entryCount == 6, "four entries and the two URLs' indexes")
        _ = try await Self.send(h, "PUT", "/items", body: "new")
        for body in ["a", "b"] {
            #expect(try await Self.send(h, "QUERY", "/items", body: body).status == .miss, "body \(body)")
        }
        #expect(try await h.get("/items").status == .miss)
        #expect(try await Self.send(h, "QUERY", "/other", body: "a").status == .fresh, "another URL's bodies stay")
        #expect(h.origin.requestCount("/items") == 7)
    }

    @Test("a keyed POST entry is invalidated too: opted in by the configuration, or by the request",
          arguments: [true, false])
    func keyedPost(byConfiguration: Bool) async throws {
        let keying = byConfiguration ? BodyKeying(methods: ["QUERY", "POST"]) : .query
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: keying))
        Self.route(h)
        let headers = byConfiguration ? [:] : [HTTPCachingHeaders.bodyKey: "1"]
        _ = try await Self.send(h, "POST", "/items", body: "search", headers: headers)
        #expect(try await Self.send(h, "POST", "/items", body: "search", headers: headers).status == .fresh)
        _ = try await Self.send(h, "DELETE", "/items", body: "")
        let after = try await Self.send(h, "POST", "/items", body: "search", headers: headers)
        #expect(after.status == .miss && after.text == "POST search #3", "\(after.text)")
    }

    @Test("an unsafe request's Content-Location and Location invalidate the bodies stored for those URLs, as their GETs",
          arguments: ["Content-Location", "Location"])
    func namedURLs(field: String) async throws {
        let h = try Harness()
        Self.route(h)
        h.origin.route("/create") { _, _ in .init(status: 201, headers: [(field, "/items")], text: "created") }
        _ = try await Self.send(h, "QUERY", "/items", body: "q")
        _ = try await Self.send(h, "POST", "/create", body: "new")
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .miss)
    }

    @Test("an error answer invalidates nothing; credentials that do not match reach another partition")
    func notInvalidated() async throws {
        let h = try Harness(configuration: CacheConfiguration(storesCredentialedResponses: true))
        Self.route(h)
        h.origin.route("/failing") { _, _ in .init(status: 500, text: "no") }
        _ = try await Self.send(h, "QUERY", "/items", body: "q", headers: ["Authorization": "Bearer alice"])
        _ = try await Self.send(h, "PUT", "/items", body: "x", headers: ["Authorization": "Bearer bob"])
        #expect(try await Self.send(h, "QUERY", "/items", body: "q", headers: ["Authorization": "Bearer alice"]).status == .fresh)
        _ = try await Self.send(h, "QUERY", "/failing", body: "q")
        _ = try await Self.send(h, "PUT", "/failing", body: "x")
        #expect(h.recorder.count(.invalidated) == 1, "bob's PUT only")
    }

    @Test("bodies stored at once, on the cache's several I/O queues, are all listed: one PUT invalidates them all",
          arguments: StoreKind.allCases)
    func concurrentListing(storeKind: StoreKind) async throws {
        let directory = TemporaryDirectory()
        let store: any ResponseStore = storeKind == .disk ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore()
        defer { (store as? DiskResponseStore)?.close() }
        let h = try Harness(store: store)
        Self.route(h)
        let bodies = (0..<24).map { "body \($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for body in bodies { group.addTask { _ = try await Self.send(h, "QUERY", "/items", body: body) } }
            try await group.waitForAll()
        }
        _ = try await Self.send(h, "PUT", "/items", body: "new")
        for body in bodies {
            #expect(try await Self.send(h, "QUERY", "/items", body: body).status == .miss, "\(body)")
        }
    }

    @Test("two caches sharing a disk store: a PUT through one invalidates the bodies the other stored")
    func sharedDiskStore() async throws {
        let directory = TemporaryDirectory()
        let first = try DiskResponseStore(directory: directory.url)
        let second = try DiskResponseStore(directory: directory.url)
        defer { first.close(); second.close() }
        let h = try Harness(store: first)
        Self.route(h)
        let other = HTTPCache(configuration: CacheConfiguration(), store: second, now: h.clock.closure)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(other)
        let otherSession = URLSession(configuration: configuration)
        defer { otherSession.finishTasksAndInvalidate() }
        _ = try await Self.send(h, "QUERY", "/items", body: "q")
        #expect(try await Self.send(h, "QUERY", "/items", body: "q", session: otherSession).status == .fresh)
        _ = try await Self.send(h, "PUT", "/items", body: "new", session: otherSession)
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .miss)
    }
}

/// The keyed-body index's pure parts: its key, the entry keys its lines name, its body, and
/// how a stored body changes its lines.
@Suite("Bodies as keys: the keyed-body index")
struct BodyKeyingIndexTests {
    typealias Line = BodyKeying.IndexLine
    static let digest = String(repeating: "0a", count: 16)
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    struct KeyRow: Sendable, CustomTestStringConvertible {
        let entryURL: String
        let indexURL: String?
        var testDescription: String { entryURL }
    }

    static let keyRows: [KeyRow] = [
        KeyRow(entryURL: "http://a.test/items#body=\(digest)", indexURL: "http://a.test/items#body="),
        KeyRow(entryURL: "http://a.test/items?x=1#body=\(digest)#host=b.test", indexURL: "http://a.test/items?x=1#body=#host=b.test"),
        KeyRow(entryURL: "http://a.test/items#host=b.test", indexURL: nil),
        KeyRow(entryURL: "http://a.test/items", indexURL: nil),
    ]

    @Test("the index key: the entry key's URL without its digest, method GET, variant @bodies; the entry key back from a line",
          arguments: keyRows)
    func keys(row: KeyRow) {
        let entry = CacheKey(method: "QUERY", normalizedURL: row.entryURL, partition: CredentialPartition(rawValue: "p"),
                             variant: nil, namespace: "n")
        let index = BodyKeying.indexKey(for: entry)
        #expect(index?.url == row.indexURL)
        guard let index else { return #expect(BodyKeying.digest(in: entry) == nil) }
        #expect(index.method == "GET" && index.variant == "@bodies" && index.partition == entry.partition && index.namespace == "n")
        #expect(BodyKeying.digest(in: entry) == Self.digest)
        #expect(BodyKeying.entryKey(in: index, line: Line(method: "QUERY", digest: Self.digest)) == entry)
        var variant = entry
        variant.variant = "abcd"
        #expect(BodyKeying.indexKey(for: variant) == index, "a variant is listed under its URL's index")
        #expect(BodyKeying.entryKey(in: index, line: Line(method: "QUERY", digest: "not hex")) == nil)
    }

    @Test("the body: a line per body, the end in whole seconds; anything else does not parse")
    func body() {
        let lines = [Line(method: "QUERY", digest: Self.digest, usefulUntil: Self.now), Line(method: "POST", digest: "ab")]
        let body = BodyKeying.indexBody(lines)
        #expect(String(decoding: body, as: UTF8.self) == "QUERY \(Self.digest) 1700000000\nPOST ab -\n")
        #expect(BodyKeying.lines(inIndexBody: body) == lines)
        #expect(BodyKeying.lines(inIndexBody: Data()) == [])
        for damaged in ["QUERY ab", "QUERY AB -", "QUERY ab soon", " ab -", "QUERY ab - x"] {
            #expect(BodyKeying.lines(inIndexBody: Data(damaged.utf8)) == nil, "\(damaged)")
        }
    }

    @Test("a stored body is listed last, once; ended bodies are left out; past the limit the oldest are dropped; nothing is written for a body listed to a lasting end")
    func listing() throws {
        func line(_ digest: String, _ end: TimeInterval?) -> Line {
            Line(method: "QUERY", digest: digest, usefulUntil: end.map { Self.now.addingTimeInterval($0) })
        }
        let listed = [line("a1", 60), line("b2", -1), line("c3", nil)]
        let stored = try #require(BodyKeying.listing(line("a1", 120), in: listed, now: Self.now))
        #expect(stored.lines == [line("c3", nil), line("a1", 120)] && stored.dropped.isEmpty)
        #expect(BodyKeying.listing(line("a1", 30), in: listed, now: Self.now) == nil, "listed to a later end")
        #expect(BodyKeying.listing(line("c3", 30), in: listed, now: Self.now) == nil, "listed with no end")
        #expect(BodyKeying.listing(line("a1", nil), in: listed, now: Self.now) != nil, "an end that does not last through none")
        let post = Line(method: "POST", digest: "a1", usefulUntil: Self.now.addingTimeInterval(60))
        #expect(BodyKeying.listing(post, in: listed, now: Self.now)?.lines.count == 3, "another method is another body")
        let full = (0..<BodyKeying.maxBodiesPerURL).map { line(String($0, radix: 16), 60) }
        let past = try #require(BodyKeying.listing(line("ff0", 60), in: full, now: Self.now))
        #expect(past.dropped == [full[0]] && past.lines.count == BodyKeying.maxBodiesPerURL && past.lines.last?.digest == "ff0")
        #expect(BodyKeying.indexEnd(stored.lines) == nil && BodyKeying.indexEnd([line("a1", 60), line("b2", 120), line("c3", 30)])
                == Self.now.addingTimeInterval(120))
    }
}
