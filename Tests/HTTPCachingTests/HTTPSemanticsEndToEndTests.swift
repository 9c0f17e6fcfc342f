import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// An origin path that honours validators: 304 when the request's validator matches.
func routeValidating(_ origin: LoopbackOrigin, _ path: String, etag: String? = nil, lastModified: String? = nil,
                     extraHeaders: [(name: String, value: String)] = [], seen: SeenHeaders? = nil) {
    origin.route(path) { request, hit in
        seen?.record(request)
        var headers = extraHeaders
        if let etag { headers.append(("ETag", etag)) }
        if let lastModified { headers.append(("Last-Modified", lastModified)) }
        if let etag, let ifNoneMatch = request.header("If-None-Match"),
           ifNoneMatch == etag || ifNoneMatch.replacingOccurrences(of: "W/", with: "") == etag.replacingOccurrences(of: "W/", with: "") {
            return .init(status: 304, headers: headers + [("X-Revalidated-At", "\(hit)")])
        }
        if let lastModified, request.header("If-Modified-Since") == lastModified {
            return .init(status: 304, headers: headers)
        }
        return .init(headers: headers, text: "body \(hit)")
    }
}

@Suite("Revalidation, fallback, policies, Vary and credentials against the loopback origin")
struct HTTPSemanticsEndToEndTests {
    @Test("an expired entry with a validator is revalidated: 304 keeps the body, merges headers and resets the age",
          arguments: [("etag", "\"abc\""), ("weak", "W/\"abc\""), ("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT")])
    func revalidation(kind: String, validator: String) async throws {
        let h = try Harness()
        let seen = SeenHeaders()
        if kind == "last-modified" {
            routeValidating(h.origin, "/r", lastModified: validator, seen: seen)
        } else {
            routeValidating(h.origin, "/r", etag: validator, seen: seen)
        }
        #expect(try await h.get("/r").text == "body 1")
        h.clock.advance(by: 3 * 86_400)
        let revalidated = try await h.get("/r")
        #expect(revalidated.status == .revalidated)
        #expect(revalidated.text == "body 1", "the stored body")
        #expect(revalidated.response.statusCode == 200)
        #expect(revalidated.response.value(forHTTPHeaderField: "Age") == "0")
        #expect(revalidated.response.isFromCache)
        let conditional = try #require(seen.all.last)
        if kind == "last-modified" {
            #expect(conditional.header("If-Modified-Since") == validator)
        } else {
            #expect(conditional.header("If-None-Match") == validator)
            #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/r")))?.header("X-Revalidated-At") == "2", "headers merged")
        }
        #expect(try await h.get("/r").status == .fresh, "the age started again")
        #expect(h.recorder.count(.served(.revalidated)) == 1)
        #expect(h.origin.requestCount("/r") == 2)
    }

    @Test("RFC 9111 §4.2.3: the time the answer took counts in its age (response_delay), with and without Age",
          arguments: [(3.0, false), (0.0, true)])
    func responseDelayCountsInAge(delay: TimeInterval, freshAfter: Bool) async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        h.origin.route("/slow") { _, hit in
            h.clock.advance(by: delay) // the origin takes this long to answer
            return .init(headers: [("Cache-Control", "max-age=4"), ("Age", "1")], text: "slow \(hit)")
        }
        #expect(try await h.get("/slow").text == "slow 1")
        let again = try await h.get("/slow")
        #expect((again.status == .fresh) == freshAfter, "age 1 + \(delay) s on the way, lifetime 4: \(again.status as Any)")
        #expect(h.origin.requestCount("/slow") == (freshAfter ? 1 : 2))
    }

    @Test("an origin that ignores validators answers 200: the entry is replaced")
    func ignoredValidators() async throws {
        let h = try Harness()
        h.origin.route("/i") { _, hit in .init(headers: [("ETag", "\"same\"")], text: "body \(hit)") }
        _ = try await h.get("/i")
        h.clock.advance(by: 3 * 86_400)
        let second = try await h.get("/i")
        #expect(second.status == .expired && second.text == "body 2")
        #expect(try await h.get("/i").text == "body 2")
    }

    @Test("a background refresh of a stale entry is conditional; a 304 keeps the body and resets the age")
    func backgroundRevalidation() async throws {
        let h = try Harness()
        let seen = SeenHeaders()
        routeValidating(h.origin, "/b", etag: "\"e1\"", seen: seen)
        _ = try await h.get("/b")
        h.clock.advance(by: 120)
        #expect(try await h.get("/b").status == .stale)
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: false)))
        #expect(seen.all.last?.header("If-None-Match") == "\"e1\"")
        let after = try await h.get("/b")
        #expect(after.status == .fresh && after.text == "body 1")
        #expect(after.response.value(forHTTPHeaderField: "Age") == "0")
    }

    @Test("the caller's own If-None-Match: a fresh entry answers it (304 when met, else the entry); a stale one lets it pass through untouched, 304 and all")
    func callersConditional() async throws {
        let h = try Harness()
        let seen = SeenHeaders()
        routeValidating(h.origin, "/c", etag: "\"mine\"", seen: seen)
        _ = try await h.get("/c")
        let met = try await h.get("/c", headers: ["If-None-Match": "\"mine\""])
        #expect(met.response.statusCode == 304 && met.status == .fresh && met.data.isEmpty)
        #expect(met.response.value(forHTTPHeaderField: "ETag") == "\"mine\"")
        let unmet = try await h.get("/c", headers: ["If-None-Match": "\"other\""])
        #expect(unmet.response.statusCode == 200 && unmet.status == .fresh && unmet.text == "body 1")
        #expect(h.origin.requestCount("/c") == 1, "both answered from the fresh entry")
        h.clock.advance(by: 3 * 86_400)
        let passed = try await h.get("/c", headers: ["If-None-Match": "\"mine\""])
        #expect(passed.response.statusCode == 304 && passed.status == .bypass)
        #expect(seen.all.last?.header("If-None-Match") == "\"mine\"")
    }

    @Test("when the origin is down, an expired entry is served as a fallback; POST gets the error")
    func fallbackWhenDown() async throws {
        let h = try Harness()
        h.origin.route("/f", response: .init(text: "kept"))
        _ = try await h.get("/f")
        h.clock.advance(by: 3 * 86_400)
        h.origin.stop()
        let fallback = try await h.get("/f")
        #expect(fallback.status == .fallback && fallback.text == "kept")
        #expect(fallback.response.isFromCache)
        #expect(h.recorder.count(.served(.fallback)) == 1)
        var post = URLRequest(url: h.origin.url("/f"))
        post.httpMethod = "POST"
        await #expect(throws: (any Error).self) { try await fetch(h.session, post) }
    }

    @Test("a 5xx from the origin serves the expired entry as a fallback; the entry survives")
    func fallbackOn5xx() async throws {
        let h = try Harness()
        h.origin.route("/f") { _, hit in hit == 1 ? .init(text: "good") : .init(status: 503, text: "down") }
        _ = try await h.get("/f")
        h.clock.advance(by: 3 * 86_400)
        let fallback = try await h.get("/f")
        #expect(fallback.status == .fallback && fallback.text == "good" && fallback.response.statusCode == 200)
        #expect(h.cache.entryCount == 1)
    }

    @Test("with fallback off, or past the error window, the caller gets the error", arguments: [true, false])
    func noFallback(turnedOff: Bool) async throws {
        let h = try Harness(configuration: CacheConfiguration(errorFallbackWindow: turnedOff ? nil : 3 * 86_400))
        h.origin.route("/n") { _, hit in hit == 1 ? .init(text: "good") : .init(status: 503, text: "down") }
        _ = try await h.get("/n")
        h.clock.advance(by: 4 * 86_400)
        let answer = try await h.get("/n")
        #expect(answer.response.statusCode == 503 && answer.status == .bypass)
        #expect(h.recorder.count(.served(.fallback)) == 0)
    }

    @Test("must-revalidate forbids the fallback under the HTTP policy")
    func mustRevalidateNoFallback() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        h.origin.route("/m") { _, hit in
            hit == 1 ? .init(headers: [("Cache-Control", "max-age=10, must-revalidate")], text: "good") : .init(status: 503, text: "down")
        }
        _ = try await h.get("/m")
        h.clock.advance(by: 60)
        #expect(try await h.get("/m").response.statusCode == 503)
    }

    @Test("network-only never reads or writes the store")
    func networkOnly() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .networkOnly))
        h.origin.routeVersioned("/p")
        #expect(try await h.get("/p").text == "v1")
        #expect(try await h.get("/p").text == "v2")
        #expect(h.cache.entryCount == 0)
    }

    @Test("cache-first serves any stored entry, whatever its age, without the network")
    func cacheFirst() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .cacheFirst))
        h.origin.routeVersioned("/p")
        #expect(try await h.get("/p").status == .miss)
        h.clock.advance(by: 365 * 86_400)
        let old = try await h.get("/p")
        #expect(old.text == "v1" && old.status == .stale)
        #expect(h.origin.requestCount("/p") == 1)
        #expect(h.cache.engine.refreshesInFlight == 0)
    }

    @Test("cache-only never touches the network: a miss is HTTPCachingError.notCached, a hit is served at any age")
    func cacheOnly() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/p")
        var request = URLRequest(url: h.origin.url("/p"))
        request.cachingPolicy = .cacheOnly
        do {
            _ = try await h.session.data(for: request)
            Issue.record("expected notCached")
        } catch {
            #expect((error as? HTTPCachingError)?.code == .notCached)
        }
        _ = try await h.get("/p")
        h.clock.advance(by: 365 * 86_400)
        #expect(try await fetch(h.session, request).text == "v1")
        #expect(h.origin.requestCount("/p") == 1)
    }

    @Test("the HTTP policy follows the response's max-age and the request's directives")
    func httpPolicy() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        let seen = SeenHeaders()
        routeValidating(h.origin, "/h", etag: "\"h\"", extraHeaders: [("Cache-Control", "max-age=300")], seen: seen)
        _ = try await h.get("/h")
        h.clock.advance(by: 200)
        #expect(try await h.get("/h").status == .fresh, "inside max-age=300, though past the 60 s window")
        #expect(try await h.get("/h", headers: ["Cache-Control": "max-age=100"]).status == .revalidated)
        #expect(seen.all.last?.header("Cache-Control") == "max-age=100", "the directive is forwarded as sent")
        h.clock.advance(by: 400)
        #expect(try await h.get("/h").status == .revalidated)
        #expect(try await h.get("/h", headers: ["Cache-Control": "no-cache"]).status == .revalidated)
        #expect(try await h.get("/h", headers: ["Pragma": "no-cache"]).status == .revalidated)
        #expect(h.origin.requestCount("/h") == 5)
    }

    @Test("request directives under the default policy: only-if-cached, no-store, max-age=0")
    func requestDirectives() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/d")
        // Nothing stored: HTTP's 504, made by the cache (RFC 9111 5.2.1.7), as OkHttp, undici and hishel answer.
        let unsatisfied = try await h.get("/d", headers: ["Cache-Control": "only-if-cached"])
        #expect(unsatisfied.response.statusCode == 504 && unsatisfied.data.isEmpty && unsatisfied.status == .miss)
        #expect(unsatisfied.response.value(forHTTPHeaderField: "Cache-Status") == "HTTPCaching; detail=only-if-cached")
        var post = URLRequest(url: h.origin.url("/d"))
        (post.httpMethod, post.httpBody) = ("POST", Data("x".utf8))
        post.setValue("only-if-cached", forHTTPHeaderField: "Cache-Control")
        #expect(try await fetch(h.session, post).response.statusCode == 504, "nor a POST: it is never sent")
        do { _ = try await fetch(h.session, URLRequest(url: h.origin.url("/d"), cachePolicy: .returnCacheDataDontLoad)); Issue.record("expected notCached") }
        catch { #expect((error as? HTTPCachingError)?.code == .notCached, "the cache-only policy fails the task, as Foundation's cache does") }
        #expect(h.origin.requestCount("/d") == 0)
        _ = try await h.get("/d", headers: ["Cache-Control": "no-store"])
        #expect(h.cache.entryCount == 0, "no-store: not stored")
        _ = try await h.get("/d")
        #expect(try await h.get("/d", headers: ["Cache-Control": "only-if-cached"]).status == .fresh)
        let forced = try await h.get("/d", headers: ["Cache-Control": "max-age=0"])
        #expect(forced.status == .expired && forced.text == "v3")
    }

    @Test("a custom policy is registered by name and chosen per request; the policy header never reaches the origin")
    func customPolicy() async throws {
        let alwaysNetwork = CachingPolicy.custom("always-network", FixedVerdict(verdict: .network))
        let h = try Harness(configuration: CacheConfiguration(customPolicies: [alwaysNetwork]))
        let seen = SeenHeaders()
        h.origin.route("/x") { request, hit in seen.record(request); return .init(text: "v\(hit)") }
        _ = try await h.get("/x")
        var request = URLRequest(url: h.origin.url("/x"))
        request.cachingPolicy = alwaysNetwork
        #expect(try await fetch(h.session, request).text == "v2")
        #expect(try await h.get("/x").text == "v2", "the default policy serves what the custom one stored")
        #expect(seen.all.allSatisfy { $0.header(HTTPCachingHeaders.policy) == nil })
    }

    @Test("Vary: a stored response is served only to requests whose named headers match; Vary: * is never served")
    func vary() async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            .init(headers: [("Vary", "Accept-Language")], text: "\(request.header("Accept-Language") ?? "none") \(hit)")
        }
        h.origin.routeVersioned("/star", headers: [("Vary", "*")])
        #expect(try await h.get("/v", headers: ["Accept-Language": "en"]).text == "en 1")
        #expect(try await h.get("/v", headers: ["Accept-Language": "en"]).status == .fresh)
        let french = try await h.get("/v", headers: ["Accept-Language": "fr"])
        #expect(french.text == "fr 2" && french.status == .miss)
        #expect(try await h.get("/v", headers: ["Accept-Language": "fr"]).text == "fr 2")
        // Foundation's HTTP class adds a default Accept-Language after the cache has seen the
        // request; a request without one is still a different variant from "fr": a miss.
        let noLanguage = try await h.get("/v")
        #expect(noLanguage.status == .miss && noLanguage.text.hasSuffix(" 3"))
        #expect(try await h.get("/v").status == .fresh, "and it matches itself next time")
        #expect(try await h.get("/star").status == .bypass)
        #expect(try await h.get("/star").text == "v2")
    }

    @Test("requests with other credentials never get another user's response", arguments: ["Authorization", "Cookie"])
    func credentialPartitioning(header: String) async throws {
        let h = try Harness()
        h.origin.route("/me") { request, _ in .init(text: "hello \(request.header(header) ?? "anonymous")") }
        #expect(try await h.get("/me", headers: [header: "alice"]).text == "hello alice")
        let bob = try await h.get("/me", headers: [header: "bob"])
        #expect(bob.text == "hello bob" && bob.status == .miss)
        let alice = try await h.get("/me", headers: [header: "alice"])
        #expect(alice.text == "hello alice" && alice.status == .fresh)
        #expect(try await h.get("/me").text == "hello anonymous")
        #expect(h.cache.entryCount == 3)
        for key in h.recorder.events.map(\.key) where key.url.contains("#credentials=") {
            #expect(!key.url.contains("alice") && !key.url.contains("bob"), "only a one-way hash is kept")
        }
    }

    @Test("credentials set in the session's additional headers partition too")
    func sessionCredentials() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/me") { request, _ in .init(text: "hello \(request.header("Authorization") ?? "anonymous")") }
        let cache = HTTPCache(now: TestClock().closure)
        func session(_ token: String) -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpAdditionalHeaders = ["Authorization": token]
            configuration.enableHTTPCaching(cache)
            return URLSession(configuration: configuration)
        }
        #expect(try await fetch(session("alice"), origin.url("/me")).text == "hello alice")
        #expect(try await fetch(session("bob"), origin.url("/me")).text == "hello bob")
        #expect(cache.entryCount == 2)
    }

    @Test("storing credentialed responses can be turned off; Set-Cookie responses are not stored by default")
    func credentialOptions() async throws {
        let h = try Harness(configuration: CacheConfiguration(storesCredentialedResponses: false))
        h.origin.routeVersioned("/a")
        h.origin.routeVersioned("/cookie", headers: [("Set-Cookie", "id=1")])
        _ = try await h.get("/a", headers: ["Authorization": "alice"])
        #expect(try await h.get("/a", headers: ["Authorization": "alice"]).text == "v2")
        _ = try await h.get("/cookie")
        #expect(try await h.get("/cookie").status == .bypass)
        #expect(h.cache.entryCount == 0)
    }

    @Test("the response hook can refuse a response or store it changed")
    func responseCacher() async throws {
        let refusing = try Harness(configuration: CacheConfiguration(responseCacher: .doNotCache))
        refusing.origin.routeVersioned("/r")
        _ = try await refusing.get("/r")
        #expect(refusing.cache.entryCount == 0)

        let modifying = try Harness(configuration: CacheConfiguration(responseCacher: .modify { _, entry in
            guard entry.header("X-Cache-Me") == "yes" else { return nil }
            var changed = entry
            changed.windows = .test(fresh: 1000, usable: 2000)
            return changed
        }))
        modifying.origin.routeVersioned("/yes", headers: [("X-Cache-Me", "yes")])
        modifying.origin.routeVersioned("/no")
        _ = try await modifying.get("/yes")
        _ = try await modifying.get("/no")
        #expect(modifying.cache.entryCount == 1)
        modifying.clock.advance(by: 500)
        #expect(try await modifying.get("/yes").status == .fresh)
    }

    @Test("a Range or a validator among the session's own headers makes every request a range or conditional one, as without the cache",
          arguments: [("Range", "bytes=0-3"), ("If-None-Match", "\"v1\""), ("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")])
    func sessionRangeOrValidator(name: String, value: String) async throws {
        // Session fields left out of the partition, so the entry below is the sessions' too.
        let h = try Harness(configuration: CacheConfiguration(partitioning: CredentialPartitioning(includesSessionHeaders: false)))
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        if name == "Range" {
            h.origin.routeRanged("/s", representation: Data("0123456789abcdefghij".utf8), fields: [("Cache-Control", "max-age=60")])
        } else {
            routeValidating(h.origin, "/s", etag: "\"v1\"", lastModified: date, extraHeaders: [("Cache-Control", "max-age=60")])
        }
        // A fresh entry, stored by a session without the field: taken for an ordinary GET, the
        // request would be answered from it.
        #expect(try await h.get("/s").status == .miss)
        let seen = try await h.sideBySide(configure: { $0.httpAdditionalHeaders = [name: value] }) { session in
            var seen: [String] = []
            for _ in 0..<2 {
                switch try #require(await fetchOutcome(session, URLRequest(url: h.origin.url("/s")))) {
                case .failure(let error): seen.append("error \((error as NSError).code)")
                case .success(let result):
                    let range = result.response.value(forHTTPHeaderField: "Content-Range") ?? "-"
                    seen.append("\(result.response.statusCode) \(range) \(String(decoding: result.data, as: UTF8.self))")
                }
            }
            return seen
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false]?.first == (name == "Range" ? "206 bytes 0-3/20 0123" : "304 - "))
        // Both ranges and both conditional requests are answered from the fresh whole entry.
        #expect(h.origin.requestCount("/s") == 1 + 2 && h.cache.entryCount == 1, "nothing more is stored")
    }

    @Test("the session's requestCachePolicy applies to requests that ask for the protocol's policy, as on Darwin; a request's own policy wins")
    func sessionCachePolicy() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/p", headers: [("Cache-Control", "max-age=60")])
        let reloading = h.session(caching: true) { $0.requestCachePolicy = .reloadIgnoringLocalCacheData }
        let cacheOnly = h.session(caching: true) { $0.requestCachePolicy = .returnCacheDataDontLoad }
        defer { reloading.finishTasksAndInvalidate(); cacheOnly.finishTasksAndInvalidate() }
        await #expect(throws: HTTPCachingError.self, "cache-only, nothing stored") { try await fetch(cacheOnly, h.origin.url("/p")) }
        #expect(try await fetch(reloading, h.origin.url("/p")).text == "v1")
        #expect(try await fetch(reloading, h.origin.url("/p")).text == "v2", "the session's policy: to the network again")
        var own = URLRequest(url: h.origin.url("/p"))
        own.cachePolicy = .returnCacheDataElseLoad
        #expect(try await fetch(reloading, own).text == "v2", "the request's own policy wins")
        #expect(try await fetch(cacheOnly, h.origin.url("/p")).text == "v2", "cache-only, now stored")
        #expect(h.origin.requestCount("/p") == 2)
    }
}

