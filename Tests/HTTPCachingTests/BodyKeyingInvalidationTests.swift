import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// RFC 9111 section 4.4: an unsafe request's non-error answer invalidates its target URI, and a
/// QUERY's (or a keyed POST's) target URI is its URL, whatever its body.
@Suite("Unsafe requests invalidate keyed bodies")
struct BodyKeyingInvalidationTests {
    static func send(_ h: Harness, _ method: String, _ path: String, body: String,
                     headers: [String: String] = [:]) async throws -> FetchResult {
        var request = URLRequest(url: h.origin.url(path))
        request.httpMethod = method
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = Data(body.utf8)
        return try await fetch(h.session, request)
    }

    static func route(_ h: Harness, _ path: String = "/items") {
        h.origin.route(path) { request, hit in
            .init(status: path == "/failing" && request.method == "PUT" ? 500 : 200,
                  headers: [("Cache-Control", "max-age=600")], text: "\(request.method) #\(hit)")
        }
    }

    @Test("a non-error PUT, POST or DELETE to /items: its stored QUERY responses are misses, then stored and served again",
          arguments: ["PUT", "POST", "DELETE"])
    func queryEntryInvalidatedByUnsafeMethod(method: String) async throws {
        let h = try Harness()
        Self.route(h)
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .miss)
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .fresh)
        #expect(try await Self.send(h, method, "/items", body: "new item").response.statusCode == 200)
        let after = try await Self.send(h, "QUERY", "/items", body: "q")
        #expect(after.status == .miss && after.text == "QUERY #3", "after a \(method) changed /items: \(after.text)")
        #expect(try await Self.send(h, "QUERY", "/items", body: "q").status == .fresh, "what came after is served")
        #expect(h.origin.requestCount("/items") == 3)
    }

    @Test("every body of the URL, in every store; another URL's, another partition's and a failed write's stay",
          arguments: StoreKind.allCases)
    func everyBody(storeKind: StoreKind) async throws {
        let directory = TemporaryDirectory()
        let store: any ResponseStore = storeKind == .disk ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore()
        defer { (store as? DiskResponseStore)?.close() }
        let h = try Harness(store: store)
        for path in ["/items", "/other", "/failing"] { Self.route(h, path) }
        for body in ["a", "b"] { _ = try await Self.send(h, "QUERY", "/items", body: body) }
        _ = try await Self.send(h, "QUERY", "/other", body: "a")
        _ = try await Self.send(h, "QUERY", "/failing", body: "a")
        _ = try await Self.send(h, "QUERY", "/items", body: "c", headers: ["Authorization": "Bearer alice"])
        _ = try await Self.send(h, "PUT", "/items", body: "x")
        _ = try await Self.send(h, "PUT", "/failing", body: "x")
        for body in ["a", "b"] { #expect(try await Self.send(h, "QUERY", "/items", body: body).status == .miss) }
        #expect(try await Self.send(h, "QUERY", "/other", body: "a").status == .fresh)
        #expect(try await Self.send(h, "QUERY", "/failing", body: "a").status == .fresh, "a 500 invalidates nothing")
        #expect(try await Self.send(h, "QUERY", "/items", body: "c", headers: ["Authorization": "Bearer alice"]).status == .fresh,
                "another partition's entry")
    }

    @Test("a keyed POST (configuration opt-in) is invalidated too; explain reports the miss and changes nothing")
    func keyedPost() async throws {
        let h = try Harness(configuration: CacheConfiguration(bodyKeying: BodyKeying(methods: ["QUERY", "POST"])))
        Self.route(h)
        _ = try await Self.send(h, "POST", "/items", body: "search")
        #expect(try await Self.send(h, "POST", "/items", body: "search").status == .fresh)
        _ = try await Self.send(h, "DELETE", "/items", body: "")
        var request = URLRequest(url: h.origin.url("/items"))
        request.httpMethod = "POST"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("search".utf8)
        #expect(h.cache.manage.explain(request).outcome.cacheStatus == .miss)
        #expect(h.cache.entryCount == 1, "explain removed nothing")
        #expect(try await Self.send(h, "POST", "/items", body: "search").status == .miss)
    }
}

extension BodyKeyingInvalidationTests {
    @Test("the GET key a keyed body's key is invalidated through: its URL without the body's digest, its Host and partition kept")
    func purgesTable() {
        var keyed = CacheKey(method: "QUERY", url: URL(string: "http://a.test/items")!)
        keyed.url = "http://a.test/items#body=abc#host=b.test"
        keyed.partition = CredentialPartition(rawValue: "p")
        var get = CacheKey(method: "GET", url: URL(string: "http://a.test/items")!)
        get.url = "http://a.test/items#host=b.test"
        get.partition = keyed.partition
        #expect(KeyedBodyPurges.base(of: keyed) == get)
        #expect(KeyedBodyPurges.base(of: get) == nil, "a key without a body")
        var purges = KeyedBodyPurges()
        var taken = purges.takeRemoval(of: keyed)
        #expect(!purges.mayRemove(keyed) && !taken, "nothing invalidated")
        purges.invalidate(get)
        #expect(purges.mayRemove(keyed))
        taken = purges.takeRemoval(of: keyed)
        #expect(taken, "the first lookup since")
        taken = purges.takeRemoval(of: keyed)
        #expect(!purges.mayRemove(keyed) && !taken, "once")
        var other = keyed
        other.partition = nil
        taken = purges.takeRemoval(of: other)
        #expect(!taken, "another partition")
        purges.invalidate(get)
        taken = purges.takeRemoval(of: keyed)
        #expect(taken, "invalidated again")
    }
}
