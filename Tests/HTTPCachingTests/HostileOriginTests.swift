import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// An origin path whose answers a test switches between up and down (503) while it runs.
final class OriginSwitch: Sendable {
    private let isDown = Mutex(false)

    var down: Bool {
        get { isDown.withLock { $0 } }
        set { isDown.withLock { $0 = newValue } }
    }
}

/// Which store a test runs against: memory, or disk in a temporary directory.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, disk

    var testDescription: String { rawValue }
}

/// Issue 10: what an origin sends can never crash the process, put one user's data in front
/// of another, or destroy an entry that could still answer.
@Suite("Hostile origins, end to end")
struct HostileOriginTests {
    /// A response's `Age` and `Cache-Control` that made `Int(age)` trap before the parsers were
    /// strict, and the age every answer built from them says: the seconds since it was
    /// stored when the field is invalid (ignored), 2^31 when it saturates.
    struct HostileAge: Sendable, CustomTestStringConvertible {
        var label: String
        var fields: [(name: String, value: String)]
        var saturates: Bool
        var testDescription: String { label }
    }

    static let hostileAges: [HostileAge] = [
        HostileAge(label: "Age: nan", fields: [("Age", "nan"), ("Cache-Control", "max-age=60")], saturates: false),
        HostileAge(label: "Age: inf", fields: [("Age", "inf"), ("Cache-Control", "max-age=60")], saturates: false),
        HostileAge(label: "Age: 1e20", fields: [("Age", "1e20"), ("Cache-Control", "max-age=60")], saturates: false),
        HostileAge(label: "a 20-digit Age", fields: [("Age", "99999999999999999999"), ("Cache-Control", "max-age=60")], saturates: true),
        HostileAge(label: "max-age near UInt64.max with a large Age",
                   fields: [("Age", "18446744073709500000"), ("Cache-Control", "max-age=18446744073709551615")], saturates: true),
    ]

    /// Routes `/age`: 200 with the hostile fields and an ETag; 304 with the same fields to a
    /// request naming that ETag; 503 while `switch` is down.
    static func routeHostileAge(_ origin: LoopbackOrigin, _ hostile: HostileAge, _ state: OriginSwitch) {
        origin.route("/age") { request, _ in
            if state.down { return .init(status: 503, text: "down") }
            let fields = hostile.fields + [("ETag", "\"v1\"")]
            if request.header("If-None-Match") == "\"v1\"" { return .init(status: 304, headers: fields) }
            return .init(headers: fields, text: "body")
        }
    }

    static func request(_ origin: LoopbackOrigin, cacheControl: String? = nil) -> URLRequest {
        var request = URLRequest(url: origin.url("/age"))
        request.setValue(cacheControl, forHTTPHeaderField: "Cache-Control")
        return request
    }

    /// One answer from the store: the body, the status, and an `Age` that is a whole number.
    static func expectAnswer(_ result: FetchResult, _ status: CacheStatus, age: String, _ step: String) {
        #expect(result.text == "body", "\(step): the stored body")
        #expect(result.status == status, "\(step)")
        #expect(result.response.value(forHTTPHeaderField: "Age") == age, "\(step)")
    }

    @Test("Age: nan, inf, 1e20, 20 digits, max-age near UInt64.max: the hit, the 304 and the fallback answer, in this process and the next",
          arguments: hostileAges, StoreKind.allCases)
    func hostileAge(hostile: HostileAge, storeKind: StoreKind) async throws {
        let directory = TemporaryDirectory()
        let store: any ResponseStore = storeKind == .disk ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore()
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics), store: store)
        let state = OriginSwitch()
        Self.routeHostileAge(h.origin, hostile, state)
        let saturated = "2147483648"

        let miss = try await fetch(h.session, Self.request(h.origin))
        #expect(miss.status == .miss && miss.text == "body")
        #expect(h.cache.manage.hasEntry(for: Self.request(h.origin)), "stored, hostile fields and all")

        // The hit: fresh when the Age is ignored; when it saturates, stale (max-stale accepts
        // any staleness), refreshed in the background by a 304 that carries the same fields.
        h.clock.advance(by: 10)
        let hit = try await fetch(h.session, Self.request(h.origin, cacheControl: "max-stale"))
        Self.expectAnswer(hit, hostile.saturates ? .stale : .fresh, age: hostile.saturates ? saturated : "10", "hit")
        if hostile.saturates { #expect(await h.recorder.wait(for: .refreshed(bodyChanged: false))) }

        // The 304: the entry updated with the hostile fields again, its age started again.
        h.clock.advance(by: 10)
        let revalidated = try await fetch(h.session, Self.request(h.origin, cacheControl: "no-cache"))
        Self.expectAnswer(revalidated, .revalidated, age: hostile.saturates ? saturated : "0", "304")

        // The fallback: the origin down, the entry served instead.
        state.down = true
        h.clock.advance(by: 10)
        let fallback = try await fetch(h.session, Self.request(h.origin, cacheControl: "no-cache"))
        Self.expectAnswer(fallback, .fallback, age: hostile.saturates ? saturated : "10", "fallback")

        guard storeKind == .disk else { return }
        (h.cache.store as? DiskResponseStore)?.close()
        try await Self.expectNextProcess(directory, h.origin, hostile, state)
    }

    /// A second process: a new cache on the same directory finds the hostile entry on its
    /// first request, and answers from it (the origin down, then up again).
    static func expectNextProcess(_ directory: TemporaryDirectory, _ origin: LoopbackOrigin, _ hostile: HostileAge,
                                  _ state: OriginSwitch) async throws {
        let saturated = "2147483648"
        let clock = TestClock()
        clock.advance(by: 30) // the entry was last stored at +20
        let next = HTTPCache(configuration: CacheConfiguration(policy: .httpSemantics),
                             store: try DiskResponseStore(directory: directory.url), now: clock.closure)
        defer { (next.store as? DiskResponseStore)?.close() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(next)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let first = try await fetch(session, Self.request(origin))
        Self.expectAnswer(first, hostile.saturates ? .fallback : .fresh, age: hostile.saturates ? saturated : "10", "next process, first request")
        let nextFallback = try await fetch(session, Self.request(origin, cacheControl: "no-cache"))
        Self.expectAnswer(nextFallback, .fallback, age: hostile.saturates ? saturated : "10", "next process, fallback")
        state.down = false
        let nextRevalidated = try await fetch(session, Self.request(origin, cacheControl: "no-cache"))
        Self.expectAnswer(nextRevalidated, .revalidated, age: hostile.saturates ? saturated : "0", "next process, 304")
    }

    @Test("a 304 that sets a cookie updates the shared entry without it: another session never receives the first one's cookie")
    func notModifiedSettingCookie() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/c") { request, hit in
            if request.header("If-None-Match") == "\"c1\"" {
                return .init(status: 304, headers: [("ETag", "\"c1\""), ("Set-Cookie", "sid=alice-secret"), ("X-Updated", "\(hit)")])
            }
            return .init(headers: [("ETag", "\"c1\"")], text: "shared")
        }
        let clock = TestClock()
        let cache = HTTPCache(now: clock.closure)
        func session() -> (URLSession, URLSessionConfiguration) {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            return (URLSession(configuration: configuration), configuration)
        }
        let (alice, aliceConfiguration) = session()
        let (bob, bobConfiguration) = session()
        defer { alice.finishTasksAndInvalidate(); bob.finishTasksAndInvalidate() }
        let url = origin.url("/c")

        #expect(try await fetch(alice, url).status == .miss)
        clock.advance(by: 3 * 86_400)
        let revalidated = try await fetch(alice, url)
        #expect(revalidated.status == .revalidated && revalidated.text == "shared")
        #expect(aliceConfiguration.httpCookieStorage?.cookies(for: url)?.contains { $0.name == "sid" } == true,
                "the cookie still reaches the session that asked, through its own cookie storage")

        let entry = try #require(cache.manage.cachedEntry(for: URLRequest(url: url)))
        #expect(entry.header("Set-Cookie") == nil, "storing refuses Set-Cookie, so merging does too")
        #expect(entry.header("X-Updated") == "2", "the other fields are merged")

        let other = try await fetch(bob, url)
        #expect(other.status == .fresh && other.text == "shared")
        #expect(other.response.value(forHTTPHeaderField: "Set-Cookie") == nil, "never another session's cookie")
        #expect(other.response.value(forHTTPHeaderField: "X-Updated") == "2")
        #expect(bobConfiguration.httpCookieStorage?.cookies(for: url)?.isEmpty ?? true)
    }

    @Test("a cache that stores responses setting cookies keeps the 304's cookie too (the configuration's choice)")
    func notModifiedSettingCookieKept() async throws {
        let h = try Harness(configuration: CacheConfiguration(storesResponsesSettingCookies: true))
        h.origin.route("/c") { request, _ in
            if request.header("If-None-Match") == "\"c1\"" { return .init(status: 304, headers: [("ETag", "\"c1\""), ("Set-Cookie", "sid=1")]) }
            return .init(headers: [("ETag", "\"c1\"")], text: "shared")
        }
        _ = try await h.get("/c")
        h.clock.advance(by: 3 * 86_400)
        #expect(try await h.get("/c").status == .revalidated)
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/c")))?.header("Set-Cookie") == "sid=1")
    }

    @Test("RFC 9111 section 4.3.4: a 304 with another strong ETag updates nothing; the cache asks once more, unconditionally, and stores that")
    func notModifiedOtherValidator() async throws {
        let h = try Harness()
        h.origin.route("/e") { request, hit in
            if hit == 1 { return .init(headers: [("ETag", "\"a\"")], text: "old") }
            if request.header("If-None-Match") != nil { return .init(status: 304, headers: [("ETag", "\"b\"")]) }
            return .init(headers: [("ETag", "\"b\"")], text: "new")
        }
        #expect(try await h.get("/e").text == "old")
        h.clock.advance(by: 3 * 86_400)
        let answer = try await h.get("/e")
        #expect(answer.text == "new" && answer.status == .expired, "never the old body under the new validator")
        #expect(answer.response.value(forHTTPHeaderField: "ETag") == "\"b\"")
        let requests = h.origin.requests(for: "/e")
        #expect(requests.count == 3)
        #expect(requests.map { $0.header("If-None-Match") } == [nil, "\"a\"", nil], "conditional, then unconditional")
        let entry = try #require(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/e"))))
        #expect(String(decoding: entry.body, as: UTF8.self) == "new" && entry.header("ETag") == "\"b\"")
    }

    @Test("a 304 with another ETag to the unconditional retry too: a bad answer; the entry is a fallback, or the caller gets that 304 as it came (as without the cache), and it stays",
          arguments: [true, false])
    func notModifiedOtherValidatorTwice(fallbackAllowed: Bool) async throws {
        let h = try Harness(configuration: CacheConfiguration(errorFallbackWindow: fallbackAllowed ? 7 * 86_400 : nil))
        h.origin.route("/e") { _, hit in
            hit == 1 ? .init(headers: [("ETag", "\"a\"")], text: "old") : .init(status: 304, headers: [("ETag", "\"b\"")])
        }
        _ = try await h.get("/e")
        h.clock.advance(by: 3 * 86_400)
        if fallbackAllowed {
            let answer = try await h.get("/e")
            #expect(answer.status == .fallback && answer.text == "old" && answer.response.value(forHTTPHeaderField: "ETag") == "\"a\"")
        } else {
            let answer = try await h.get("/e")
            #expect(answer.response.statusCode == 304 && answer.data.isEmpty && answer.status == .bypass)
        }
        #expect(h.origin.requestCount("/e") == 3)
        let entry = try #require(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/e"))), "never removed, never updated")
        #expect(entry.header("ETag") == "\"a\"" && String(decoding: entry.body, as: UTF8.self) == "old")
    }

    @Test("a 304 or 206 to a request that did not ask for one: a bad answer, served from the entry as a fallback; the entry stays",
          arguments: [304, 206])
    func unaskedFor(status: Int) async throws {
        let h = try Harness()
        h.origin.route("/u") { _, hit in
            hit == 1 ? .init(text: "kept") : .init(status: status, headers: [("Content-Range", "bytes 0-1/10")], text: status == 206 ? "ab" : "")
        }
        _ = try await h.get("/u")
        h.clock.advance(by: 3 * 86_400) // past the usable window, no validator: an unconditional request
        let answer = try await h.get("/u")
        #expect(answer.status == .fallback && answer.text == "kept" && answer.response.statusCode == 200)
        #expect(answer.response.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd-status=\(status)") == true)
        #expect(h.cache.manage.hasEntry(for: URLRequest(url: h.origin.url("/u"))), "a bad answer never removes an entry")
        #expect(h.recorder.count(.served(.fallback)) == 1)
    }

    @Test("a 304 or 206 to a request sent as the caller made it, with no fallback: the caller gets it as it came, unstored (as without the cache), and the entry stays",
          arguments: [304, 206])
    func unaskedForNoFallback(status: Int) async throws {
        let h = try Harness(configuration: CacheConfiguration(errorFallbackWindow: nil))
        h.origin.route("/u") { _, hit in
            hit == 1 ? .init(text: "kept") : .init(status: status, headers: [("Content-Range", "bytes 0-1/10")], text: status == 206 ? "ab" : "")
        }
        _ = try await h.get("/u")
        // no-cache: to the origin first, without a validator to make it conditional.
        let answer = try await h.get("/u", headers: ["Cache-Control": "no-cache"])
        #expect(answer.response.statusCode == status && answer.text == (status == 206 ? "ab" : "") && answer.status == .bypass)
        #expect(try #require(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/u")))).body == Data("kept".utf8),
                "a bad answer never removes nor replaces an entry")
        // With nothing stored at all: the same, and nothing stored.
        h.origin.route("/none", response: .init(status: status, headers: [("Content-Range", "bytes 0-1/10")], text: status == 206 ? "ab" : ""))
        #expect(try await h.get("/none").response.statusCode == status)
        #expect(!h.cache.manage.hasEntry(for: URLRequest(url: h.origin.url("/none"))))
    }

    @Test("a background refresh answered by a 304 or 206 it did not ask for keeps the stale entry", arguments: [304, 206])
    func unaskedForRefresh(status: Int) async throws {
        let h = try Harness()
        h.origin.route("/r") { _, hit in
            hit == 1 ? .init(text: "kept") : .init(status: status, headers: [("Content-Range", "bytes 0-1/10")], text: status == 206 ? "ab" : "")
        }
        _ = try await h.get("/r")
        h.clock.advance(by: 120)
        #expect(try await h.get("/r").status == .stale)
        #expect(await h.recorder.wait { events in events.contains { $0.kind.name == "refreshFailed" } })
        let again = try await h.get("/r")
        #expect(again.text == "kept" && again.status == .stale)
    }

    @Test("the caller's own range and conditional requests still get the origin's 206 and 304 untouched")
    func callersOwn() async throws {
        let h = try Harness()
        h.origin.route("/p") { request, _ in
            if request.header("Range") != nil { return .init(status: 206, headers: [("Content-Range", "bytes 0-1/4")], text: "ab") }
            if request.header("If-None-Match") != nil { return .init(status: 304, headers: [("ETag", "\"p\"")]) }
            return .init(headers: [("ETag", "\"p\"")], text: "abcd")
        }
        let range = try await h.get("/p", headers: ["Range": "bytes=0-1"])
        #expect(range.response.statusCode == 206 && range.text == "ab" && range.status == .bypass)
        let conditional = try await h.get("/p", headers: ["If-None-Match": "\"p\""])
        #expect(conditional.response.statusCode == 304 && conditional.status == .bypass)
        #expect(!h.cache.manage.hasEntry(for: URLRequest(url: h.origin.url("/p"))), "neither is stored")
    }

    @Test("two responses stored at the same clock reading: a hit serves the newer one's headers with its body", arguments: StoreKind.allCases)
    func sameClockReading(storeKind: StoreKind) async throws {
        let directory = TemporaryDirectory()
        let store: any ResponseStore = storeKind == .disk ? try DiskResponseStore(directory: directory.url) : MemoryResponseStore()
        let h = try Harness(store: store)
        defer { (store as? DiskResponseStore)?.close() }
        h.origin.route("/g") { _, hit in .init(headers: [("X-Version", "\(hit)")], text: "v\(hit)") }
        #expect(try await h.get("/g").text == "v1")
        let first = try await h.get("/g")
        #expect(first.status == .fresh && first.text == "v1" && first.response.value(forHTTPHeaderField: "X-Version") == "1")
        // The clock does not move: the reload is stored at the same instant as the first answer.
        var reload = URLRequest(url: h.origin.url("/g"))
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        #expect(try await fetch(h.session, reload).text == "v2")
        let second = try await h.get("/g")
        #expect(second.status == .fresh && second.text == "v2")
        #expect(second.response.value(forHTTPHeaderField: "X-Version") == "2", "the newer entry's headers, never the older one's")
    }

    @Test("Connection naming Vary or Cache-Control: never stored, so each request gets its own answer, as without the cache",
          arguments: ["vary", "Cache-Control"])
    func connectionNamesCachingField(named: String) async throws {
        let h = try Harness()
        h.origin.route("/v") { request, hit in
            .init(headers: [("Cache-Control", named == "vary" ? "max-age=60" : "no-cache"), ("Vary", "Accept"),
                            ("ETag", "\"\(hit)\""), ("Connection", named)],
                  text: "accept=\(request.header("Accept") ?? "-")")
        }
        let seen = try await h.sideBySide { session in
            var lines: [String] = []
            for accept in ["a", "b", "b"] {
                var request = URLRequest(url: h.origin.url("/v"))
                request.setValue(accept, forHTTPHeaderField: "Accept")
                let (data, _) = try await session.data(for: request)
                h.clock.advance(by: 1)
                lines.append(String(decoding: data, as: UTF8.self))
            }
            return lines
        }
        #expect(seen[true] == seen[false])
        #expect(seen[true] == ["accept=a", "accept=b", "accept=b"])
        #expect(h.origin.requestCount("/v") == 6, "every request reached the origin, with the cache too")
    }

    @Test("Content-Length beside Transfer-Encoding (RFC 9112 section 6.3: the length is the chunks'): a hit never claims the wrong length")
    func contentLengthWithTransferEncoding() async throws {
        let h = try Harness()
        let body = LoopbackOrigin.filler(count: 3_000)
        let stream = LoopbackOrigin.BodyStream()
        h.origin.route("/te", response: .init(headers: [("Cache-Control", "max-age=60"), ("Content-Length", "5")], stream: stream))
        Task {
            guard await stream.headersSent() else { return }
            stream.write(body)
            _ = await stream.flushed()
            stream.finish()
        }
        let miss = try await h.get("/te")
        #expect(miss.data == body, "libcurl reads the chunks, whatever Content-Length says")
        let hit = try await h.get("/te")
        #expect(hit.status == .fresh && hit.data == body)
        let length = hit.response.value(forHTTPHeaderField: "Content-Length")
        #expect(length == nil || length == String(body.count), "Content-Length on the hit: \(length ?? "none")")
        #expect(hit.response.expectedContentLength != 5)
    }
}
