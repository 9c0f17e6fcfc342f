import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// A store holding one entry whatever the key, with a small entry limit.
final class OneEntryStore: ResponseStore {
    let stored: CacheEntry
    let maxEntrySize: Int
    init(_ entry: CacheEntry, maxEntrySize: Int) {
        stored = entry
        self.maxEntrySize = maxEntrySize
    }
    func entry(for key: CacheKey) throws -> CacheEntry? { key.variant == nil ? stored : nil }
    func write(_ entry: CacheEntry) throws -> StoreWriteResult { StoreWriteResult(stored: false) }
    func removeEntry(for key: CacheKey) throws {}
    func removeAll(progress: (RemovalProgress) -> Void) throws {}
    func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {}
    func entryInfos() throws -> [StoredEntryInfo] { [StoredEntryInfo(stored)] }
    var totalBytes: Int { stored.byteCount }
    var entryCount: Int { 1 }
}

@Suite("explain: what the cache would do, and why, without the network")
struct ExplainTests {
    struct Scenario: Sendable, CustomTestStringConvertible {
        let name: String
        let policy: CachingPolicy
        let advance: TimeInterval
        let requestHeaders: [String: String]
        let action: String
        let cacheStatus: String
        var testDescription: String { name }
    }

    /// Each scenario: explain first, then send the same request; the prediction must be what happens.
    static let scenarios: [Scenario] = [
        Scenario(name: "two-tier fresh", policy: .twoTier, advance: 10, requestHeaders: [:], action: "serve", cacheStatus: "fresh"),
        Scenario(name: "two-tier stale", policy: .twoTier, advance: 100, requestHeaders: [:], action: "serve", cacheStatus: "stale"),
        Scenario(name: "two-tier past the usable window, with a validator", policy: .twoTier, advance: 3 * 86_400, requestHeaders: [:],
                 action: "forward", cacheStatus: "revalidated"),
        Scenario(name: "request no-cache", policy: .twoTier, advance: 10, requestHeaders: ["Cache-Control": "no-cache"],
                 action: "forward", cacheStatus: "revalidated"),
        Scenario(name: "http fresh (max-age=300)", policy: .httpSemantics, advance: 200, requestHeaders: [:], action: "serve", cacheStatus: "fresh"),
        Scenario(name: "http stale", policy: .httpSemantics, advance: 400, requestHeaders: [:], action: "forward", cacheStatus: "revalidated"),
        Scenario(name: "a range of a fresh entry", policy: .httpSemantics, advance: 10, requestHeaders: ["Range": "bytes=0-1"],
                 action: "serve", cacheStatus: "fresh"),
        Scenario(name: "another variant", policy: .twoTier, advance: 10, requestHeaders: ["Accept-Language": "fr"],
                 action: "forward", cacheStatus: "miss"),
        Scenario(name: "only-if-cached on another variant", policy: .twoTier, advance: 10,
                 requestHeaders: ["Accept-Language": "fr", "Cache-Control": "only-if-cached"], action: "gateway-timeout", cacheStatus: "miss"),
    ]

    @Test("explain predicts what a request then gets, Cache-Status included, and never touches the network", arguments: scenarios)
    func predicts(scenario: Scenario) async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: scenario.policy))
        routeValidating(h.origin, "/p", etag: "\"p\"", extraHeaders: [("Cache-Control", "max-age=300"), ("Vary", "Accept-Language")])
        _ = try await h.get("/p", headers: ["Accept-Language": "en"])
        h.clock.advance(by: scenario.advance)
        var request = URLRequest(url: h.origin.url("/p"))
        request.setValue("en", forHTTPHeaderField: "Accept-Language")
        for (name, value) in scenario.requestHeaders { request.setValue(value, forHTTPHeaderField: name) }
        let before = h.origin.requestCount()
        let explanation = h.cache.manage.explain(request)
        #expect(h.origin.requestCount() == before, "explain never touches the network")
        #expect(explanation.outcome.action == scenario.action)
        #expect(!explanation.description.isEmpty && explanation.description.contains("\n"))

        do {
            let answer = try await fetch(h.session, request)
            if answer.response.statusCode == 504 { // only-if-cached with nothing that may answer (RFC 9111 5.2.1.7)
                #expect(scenario.action == "gateway-timeout" && answer.cacheStatusField == explanation.outcome.cacheStatusField)
                #expect(explanation.outcome.summary.contains("504"))
                return
            }
            #expect(scenario.action != "fail")
            #expect(answer.status?.rawValue == scenario.cacheStatus)
            switch scenario.cacheStatus {
            case "revalidated": #expect(explanation.outcome.cacheStatus == .expired && explanation.outcome.network.contains("conditional"))
            default: #expect(explanation.outcome.cacheStatus.rawValue == scenario.cacheStatus)
            }
            let field = try #require(answer.cacheStatusField)
            if scenario.action == "serve" {
                #expect(field == explanation.outcome.cacheStatusField, "a hit's field is known ahead, ttl and all")
            } else {
                #expect(field.hasPrefix(explanation.outcome.cacheStatusField + ";"), "the forward reason is known ahead: \(field)")
            }
        } catch {
            #expect(scenario.action == "fail" && (error as? HTTPCachingError)?.code == .notCached)
        }
    }

    @Test("the explanation of a fresh entry: key, policy, windows, age and lifetime with their sources, storage, outcome")
    func freshEntry() throws {
        let clock = TestClock()
        let cache = HTTPCache(configuration: CacheConfiguration(policy: .httpSemantics), now: clock.closure)
        let url = URL(string: "http://example.test/items?page=2")!
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=300, private", "Age": "100", "ETag": "\"x\"",
                                                      "Vary": "Accept-Language"])!
        var request = URLRequest(url: url)
        request.setValue("en", forHTTPHeaderField: "Accept-Language")
        try cache.manage.storeResponse(response, data: Data("hello".utf8), for: request)
        clock.advance(by: 50)
        let explanation = cache.manage.explain(request)
        #expect(explanation.method == "GET" && explanation.url == url.absoluteString)
        #expect(explanation.key == .init(method: "GET", url: "http://example.test/items?page=2", credentialPartition: false, namespace: nil))
        #expect(explanation.policy == .httpSemantics && explanation.policySource == "the configuration")
        #expect(explanation.windows == .init(fresh: 60, usable: 172_800, source: "the configuration"))
        let entry = try #require(explanation.entry)
        #expect(entry.statusCode == 200 && entry.bodyBytes == 5)
        #expect(entry.age == 150 && entry.ageSource.contains("50 s since stored") && entry.ageSource.contains("100 s"))
        #expect(entry.lifetime == 300 && entry.lifetimeSource == "max-age" && entry.ttl == 150)
        #expect(entry.validators == ["ETag \"x\""] && entry.vary == ["accept-language"] && entry.variantsStored == 1)
        #expect(entry.storable && entry.storage.contains("explicit freshness") && entry.storage.contains("private is allowed"))
        #expect(explanation.outcome == .init(action: "serve", cacheStatus: .fresh, network: "none", forwardReason: nil,
                                             cacheStatusField: "HTTPCaching; hit; ttl=150", stores: false, fallback: false,
                                             summary: "fresh: served from the store"))
        #expect(explanation.reasons == ["age 150 s is below the lifetime 300 s"])
        let text = explanation.description
        for fragment in ["GET http://example.test/items?page=2", "policy   http (the configuration)", "age 150 s",
                         "lifetime 300 s (max-age): 150 s of freshness left", "Cache-Status: HTTPCaching; hit; ttl=150"] {
            #expect(text.contains(fragment), "\(fragment)")
        }
    }

    @Test("a credential partition is shown as present, never its value, in the text or the JSON")
    func credentials() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/me")
        _ = try await h.get("/me", headers: ["Authorization": "Bearer very-secret-token"])
        var request = URLRequest(url: h.origin.url("/me"))
        request.setValue("Bearer very-secret-token", forHTTPHeaderField: "Authorization")
        let explanation = h.cache.manage.explain(request)
        #expect(explanation.key.credentialPartition && explanation.entry != nil)
        let partition = try #require(try h.cache.manage.key(for: request).partition?.rawValue)
        let json = String(decoding: try JSONEncoder().encode(explanation), as: UTF8.self)
        for text in [explanation.description, json] {
            #expect(!text.contains("very-secret-token") && !text.contains(partition))
        }
        #expect(explanation.description.contains("[credentials: a partition of their own]"))
        #expect(h.cache.manage.explain(URLRequest(url: h.origin.url("/me"))).entry == nil, "without the credential: another key")
    }

    @Test("the JSON form has every part, with stable field names")
    func json() throws {
        let cache = HTTPCache()
        let explanation = cache.manage.explain(URLRequest(url: URL(string: "http://example.test/a")!))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let object = try #require(try JSONSerialization.jsonObject(with: encoder.encode(explanation)) as? [String: Any])
        #expect(Set(object.keys) == ["method", "url", "key", "policy", "policySource", "windows", "otherVariantsStored", "outcome", "reasons"],
                "no entry and no lastNotStored: they are left out")
        let outcome = try #require(object["outcome"] as? [String: Any])
        #expect(outcome["action"] as? String == "forward" && outcome["forwardReason"] as? String == "uri-miss")
        #expect(outcome["cacheStatusField"] as? String == "HTTPCaching; fwd=uri-miss")
        let key = try #require(object["key"] as? [String: Any])
        #expect(key["credentialPartition"] as? Bool == false)
    }

    @Test("why a stored response would not be stored now: a changed configuration, a smaller entry limit")
    func storability() throws {
        let url = URL(string: "http://example.test/c")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: ["Set-Cookie": "a=b"],
                               body: Data(repeating: 1, count: 500), storedAt: Date())
        let cookies = HTTPCache(store: OneEntryStore(entry, maxEntrySize: 1 << 20))
        let explained = try #require(cookies.manage.explain(URLRequest(url: url)).entry)
        #expect(!explained.storable && explained.storage == NotStoredReason.setsCookie.description)
        let allowed = HTTPCache(configuration: CacheConfiguration(storesResponsesSettingCookies: true),
                                store: OneEntryStore(entry, maxEntrySize: 100))
        let tooLarge = try #require(allowed.manage.explain(URLRequest(url: url)).entry)
        #expect(!tooLarge.storable && tooLarge.storage.contains("larger than the store's entry limit (100 bytes)"))
        let roomy = HTTPCache(configuration: CacheConfiguration(storesResponsesSettingCookies: true),
                              store: OneEntryStore(entry, maxEntrySize: 1 << 20))
        let stored = try #require(roomy.manage.explain(URLRequest(url: url)).entry)
        #expect(stored.storable && stored.storage.contains("storesResponsesSettingCookies is true"))
        #expect(stored.storage.contains("status 200 is in storableStatusCodes"))
    }

    @Test("with nothing stored: why the last response was not stored, until one is", arguments: [
        ("no-store", NotStoredReason.responseNoStore), ("status", NotStoredReason.status(500)), ("vary", NotStoredReason.varyStar),
    ])
    func lastNotStored(kind: String, reason: NotStoredReason) async throws {
        let h = try Harness()
        h.origin.route("/n") { _, hit in
            guard hit == 1 else { return .init(text: "fine") }
            switch kind {
            case "no-store": return .init(headers: [("Cache-Control", "no-store")], text: "no")
            case "status": return .init(status: 500, text: "no")
            default: return .init(headers: [("Vary", "*")], text: "no")
            }
        }
        let request = URLRequest(url: h.origin.url("/n"))
        #expect(h.cache.manage.explain(request).lastNotStored == nil)
        _ = try await h.get("/n")
        let explanation = h.cache.manage.explain(request)
        #expect(explanation.entry == nil)
        #expect(explanation.lastNotStored?.reason == reason.description)
        #expect(explanation.description.contains("last response not stored"))
        _ = try await h.get("/n")
        #expect(h.cache.manage.explain(request).lastNotStored == nil && h.cache.manage.explain(request).entry != nil)
    }

    @Test("CacheInstallation.explain keys with the session's own headers")
    func installation() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/me")
        let cache = HTTPCache()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer alice"]
        let installation = configuration.enableHTTPCaching(cache)
        _ = try await fetch(URLSession(configuration: configuration), origin.url("/me"))
        let request = URLRequest(url: origin.url("/me"))
        let explained = installation.explain(request)
        #expect(explained.key.credentialPartition && explained.entry != nil && explained.outcome.cacheStatus == .fresh)
        #expect(cache.manage.explain(request).entry == nil, "the cache alone does not see the session's header")
    }

    @Test("CacheInstallation.explain weighs a request as the sessions' tasks send it: with their requestCachePolicy")
    func installationPolicy() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/offline")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .returnCacheDataDontLoad
        let installation = configuration.enableHTTPCaching(HTTPCache())
        let explained = installation.explain(URLRequest(url: origin.url("/offline")))
        #expect(explained.outcome.action == "fail" && explained.outcome.network == "none", "\(explained.outcome.summary)")
        do {
            _ = try await fetch(URLSession(configuration: configuration), origin.url("/offline"))
            Issue.record("expected notCached")
        } catch {
            #expect((error as? HTTPCachingError)?.code == .notCached, "what explain said")
        }
        #expect(origin.requestCount("/offline") == 0)
    }

    @Test("an unsafe method explains what it would invalidate; a vary-miss says so; only-if-cached is a 504")
    func otherOutcomes() async throws {
        let h = try Harness()
        h.origin.route("/v") { request, _ in .init(headers: [("Vary", "Accept-Language")], text: request.header("Accept-Language") ?? "-") }
        _ = try await h.get("/v", headers: ["Accept-Language": "en"])
        var delete = URLRequest(url: h.origin.url("/v"))
        delete.httpMethod = "DELETE"
        delete.setValue("en", forHTTPHeaderField: "Accept-Language")
        let unsafe = h.cache.manage.explain(delete)
        #expect(unsafe.outcome.forwardReason == "method" && unsafe.key.method == "GET")
        #expect(unsafe.reasons.contains { $0.contains("a non-error answer removes it, every variant included") })
        var other = URLRequest(url: h.origin.url("/v"))
        other.setValue("fr", forHTTPHeaderField: "Accept-Language")
        let vary = h.cache.manage.explain(other)
        #expect(vary.entry == nil && vary.otherVariantsStored && vary.outcome.forwardReason == "vary-miss")
        other.setValue("only-if-cached", forHTTPHeaderField: "Cache-Control")
        let offline = h.cache.manage.explain(other)
        #expect(offline.outcome.action == "gateway-timeout" && offline.outcome.network == "none")
        #expect(h.origin.requestCount("/v") == 1)
    }
}
