import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

extension FetchResult {
    /// The response's `Cache-Status` field.
    var cacheStatusField: String? { response.value(forHTTPHeaderField: "Cache-Status") }
    func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
}

@Suite("HTTP fidelity end to end: ranges, variants, invalidation, Cache-Status, cookies")
struct FidelityEndToEndTests {
    static let http = CacheConfiguration(policy: .httpSemantics)

    // MARK: - Ranges

    @Test("RFC 9110 §14 end to end: ranges of a fresh complete entry come from the store; other ranges reach the origin untouched")
    func ranges() async throws {
        let h = try Harness(configuration: Self.http)
        let seen = SeenHeaders()
        h.origin.route("/r") { request, _ in
            seen.record(request)
            if let range = request.header("Range") {
                return .init(status: 206, headers: [("Content-Range", "bytes 0-1/11")], text: "origin \(range)")
            }
            return .init(headers: [("Cache-Control", "max-age=3600"), ("ETag", "\"r\""), ("Content-Type", "text/plain")], text: "0123456789A")
        }
        _ = try await h.get("/r")
        for (field, body, contentRange) in [("bytes=0-1", "01", "bytes 0-1/11"), ("bytes=1-", "123456789A", "bytes 1-10/11"),
                                            ("bytes=-1", "A", "bytes 10-10/11"), ("bytes=4-400", "456789A", "bytes 4-10/11")] {
            let partial = try await h.get("/r", headers: ["Range": field])
            #expect(partial.response.statusCode == 206, "\(field)")
            #expect(partial.text == body)
            #expect(partial.header("Content-Range") == contentRange)
            #expect(partial.header("Content-Length") == String(body.utf8.count))
            #expect(partial.header("ETag") == "\"r\"" && partial.header("Content-Type") == "text/plain", "the stored fields")
            #expect(partial.status == .fresh && partial.cacheStatusField == "HTTPCaching; hit; ttl=3600")
        }
        let outside = try await h.get("/r", headers: ["Range": "bytes=20-"])
        #expect(outside.response.statusCode == 416 && outside.data.isEmpty)
        #expect(outside.header("Content-Range") == "bytes */11")
        #expect(h.origin.requestCount("/r") == 1, "every range above came from the store")

        let several = try await h.get("/r", headers: ["Range": "bytes=0-1,3-4"])
        #expect(several.response.statusCode == 206 && several.text == "origin bytes=0-1,3-4")
        #expect(seen.all.last?.header("Range") == "bytes=0-1,3-4", "the request reached the origin as it was")
        #expect(several.cacheStatusField == "HTTPCaching; fwd=request; fwd-status=206", "a fresh entry the request cannot use")
        let otherUnit = try await h.get("/r", headers: ["Range": "items=0-1"])
        #expect(otherUnit.text == "origin items=0-1")

        h.clock.advance(by: 4000)
        let stale = try await h.get("/r", headers: ["Range": "bytes=0-1"])
        #expect(stale.text == "origin bytes=0-1", "a stale entry does not answer a range")
        #expect(stale.cacheStatusField == "HTTPCaching; fwd=stale; fwd-status=206")
        #expect(h.origin.requestCount("/r") == 4)
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/r")))?.body == Data("0123456789A".utf8),
                "the complete entry is kept: a range answer never replaces it")
    }

    @Test("RFC 9110 §14.1.2 end to end: a suffix range of a stored empty body is satisfiable: the whole (empty) 200 from the store, not a 416")
    func suffixRangeOfEmptyBody() async throws {
        let h = try Harness()
        h.origin.route("/empty") { _, _ in .init(headers: [("Cache-Control", "max-age=600")], body: Data()) }
        _ = try await h.get("/empty")
        let ranged = try await h.get("/empty", headers: ["Range": "bytes=-5"])
        #expect(ranged.response.statusCode != 416)
        #expect(ranged.response.statusCode == 200 && ranged.data.isEmpty && ranged.status == .fresh)
        #expect(h.origin.requestCount("/empty") == 1, "answered from the store")
        let zero = try await h.get("/empty", headers: ["Range": "bytes=0-0"])
        #expect(zero.response.statusCode == 416 && zero.header("Content-Range") == "bytes */0", "no other range of it is satisfiable")
    }

    // MARK: - Variants

    @Test("RFC 9111 §4.1 end to end: several variants of one URL live side by side, matched after normalising Accept-Language's case and whitespace, not its order")
    func variants() async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        let languages = ["en", "fr", "de, en-US"]
        for language in languages {
            let miss = try await h.get("/v", headers: ["Accept-Language": language])
            #expect(miss.status == .miss)
        }
        #expect(try await h.get("/v", headers: ["Accept-Language": "fr"]).cacheStatusField == "HTTPCaching; hit; ttl=60")
        for (index, language) in languages.enumerated() {
            let hit = try await h.get("/v", headers: ["Accept-Language": language])
            #expect(hit.status == .fresh && hit.text == "\(language) \(index + 1)", "each variant is kept, none replaced")
        }
        let recased = try await h.get("/v", headers: ["Accept-Language": "DE ,en-us"])
        #expect(recased.status == .fresh && recased.text == "de, en-US 3", "case and whitespace do not matter")
        let reordered = try await h.get("/v", headers: ["Accept-Language": "en-US, de"])
        #expect(reordered.status == .miss && reordered.text == "en-US, de 4", "order does: servers break ties by it")
        let other = try await h.get("/v", headers: ["Accept-Language": "it"])
        #expect(other.cacheStatusField == "HTTPCaching; fwd=vary-miss; fwd-status=200; ttl=60; stored")
        #expect(h.origin.requestCount("/v") == 5)
    }

    @Test("RFC 9111 §4.1 end to end: at most 8 variants per URL; storing a ninth removes the one stored longest ago")
    func boundedVariants() async throws {
        let h = try Harness()
        h.origin.route("/b") { request, hit in
            .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        for n in 0..<10 {
            #expect(try await h.get("/b", headers: ["Accept-Language": "l\(n)"]).status == .miss)
            h.clock.advance(by: 1)
        }
        #expect(h.cache.entryCount == 10, "8 variants, the entry under the URL and the variant index")
        #expect(h.recorder.count(.evicted) == 2)
        for n in 2..<10 { #expect(try await h.get("/b", headers: ["Accept-Language": "l\(n)"]).status == .fresh) }
        let dropped = try await h.get("/b", headers: ["Accept-Language": "l0"])
        #expect(dropped.status == .miss && dropped.text == "l0 11")
        #expect(dropped.cacheStatusField?.contains("fwd=vary-miss") == true)
    }

    // MARK: - Invalidation

    @Test("RFC 9111 §4.4 end to end: a POST's success invalidates its URL and the same-origin URLs in Location and Content-Location")
    func invalidationByLocation() async throws {
        let h = try Harness()
        let other = try LoopbackOrigin()
        defer { other.stop() }
        h.origin.routeVersioned("/target")
        h.origin.routeVersioned("/described")
        h.origin.routeVersioned("/action")
        other.routeVersioned("/elsewhere")
        let elsewhere = other.url("/elsewhere")
        h.origin.route("/create") { request, _ in
            #expect(request.method == "POST" && request.body == Data("abc".utf8))
            return .init(status: 201, headers: [("Location", "/target"), ("Content-Location", "described"),
                                                ("Link", "unused")], text: "created")
        }
        h.origin.route("/move") { _, _ in .init(status: 200, headers: [("Location", elsewhere.absoluteString)], text: "moved") }
        h.origin.route("/fail") { _, _ in .init(status: 500, headers: [("Location", "/target")], text: "failed") }

        for path in ["/target", "/described", "/action"] { _ = try await h.get(path) }
        _ = try await fetch(h.session, elsewhere)
        for path in ["/target", "/described", "/action"] { #expect(try await h.get(path).status == .fresh) }

        func post(_ path: String) async throws -> FetchResult {
            var request = URLRequest(url: h.origin.url(path))
            request.httpMethod = "POST"
            request.httpBody = Data("abc".utf8)
            return try await fetch(h.session, request)
        }
        let failed = try await post("/fail")
        #expect(failed.response.statusCode == 500 && failed.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=500")
        #expect(try await h.get("/target").status == .fresh, "an error answer invalidates nothing")

        let created = try await post("/create")
        #expect(created.response.statusCode == 201 && created.text == "created")
        #expect(created.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=201")
        #expect(h.recorder.count(.invalidated) == 3, "its own URL, Location and Content-Location")
        let target = try await h.get("/target")
        #expect(target.status == .miss && target.text == "v2")
        #expect(try await h.get("/described").text == "v2")
        #expect(try await h.get("/action").status == .fresh, "another URL is untouched")

        _ = try await post("/move")
        #expect(try await fetch(h.session, elsewhere).status == .fresh, "a Location on another origin is never invalidated")
    }

    @Test("RFC 9111 §4.4 end to end: unknown methods invalidate too, and every stored variant of the URL goes",
          arguments: ["M-SEARCH", "PUT", "DELETE"])
    func invalidationOfVariants(method: String) async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            if request.method != "GET" { return .init(text: "done") }
            return .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        for language in ["en", "fr", "de"] { _ = try await h.get("/v", headers: ["Accept-Language": language]) }
        #expect(try await h.get("/v", headers: ["Accept-Language": "fr"]).status == .fresh)
        var request = URLRequest(url: h.origin.url("/v"))
        request.httpMethod = method
        request.setValue("en", forHTTPHeaderField: "Accept-Language")
        let answer = try await fetch(h.session, request)
        #expect(answer.text == "done" && answer.cacheStatusField == "HTTPCaching; fwd=method; fwd-status=200")
        #expect(h.origin.requests(for: "/v").last?.method == method)
        #expect(h.cache.entryCount == 0, "the entry under the URL and all three variants")
        for language in ["en", "fr", "de"] {
            #expect(try await h.get("/v", headers: ["Accept-Language": language]).status == .miss)
        }
    }
}
