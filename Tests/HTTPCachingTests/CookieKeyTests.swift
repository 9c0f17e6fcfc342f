import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// A request is keyed, and stored, under the `Cookie` it goes with: the one Foundation gave it
/// when its task was made, or, for a redirect followed without a delegate, the storage's
/// cookies read again as Foundation reads them. Each scenario runs on a plain session and on a
/// caching one, each with its own cookie storage, and compares what the caller saw.
@Suite("Cookies and keys", .serialized)
struct CookieKeyTests {
    static func cookie(_ value: String) -> HTTPCookie {
        HTTPCookie(properties: [.name: "user", .value: value, .domain: "127.0.0.1", .path: "/"])!
    }

    /// `/home` echoes the cookie it got, storable; `/switch` signs bob in and redirects home.
    static func origin(_ h: Harness) {
        h.origin.route("/home") { request, _ in
            .init(headers: [("Cache-Control", "max-age=60")], text: "Cookie=\(request.header("Cookie") ?? "-")")
        }
        h.origin.route("/switch") { _, _ in .init(status: 302, headers: [("Location", "/home"), ("Set-Cookie", "user=bob; Path=/")], text: "moved") }
    }

    /// The bodies `steps` get, plain then caching; each run has its own storage holding `signedIn`.
    static func bodies(delegate: Bool, signedIn: String?,
                       _ steps: @escaping (URLSession, HTTPCookieStorage, Harness) async throws -> [String]) async throws -> [Bool: [String]] {
        var seen: [Bool: [String]] = [:]
        let h = try Harness()
        origin(h)
        for caching in [false, true] {
            let storage = URLSessionConfiguration.ephemeral.httpCookieStorage!
            if let signedIn { storage.setCookie(cookie(signedIn)) }
            let session = h.session(caching: caching, delegate ? ProbeDelegate() : nil) { $0.httpCookieStorage = storage }
            defer { session.finishTasksAndInvalidate() }
            seen[caching] = try await steps(session, storage, h)
        }
        return seen
    }

    static func body(_ session: URLSession, _ h: Harness, _ path: String) async throws -> String {
        String(decoding: try await fetch(session, URLRequest(url: h.origin.url(path))).data, as: UTF8.self)
    }

    @Test("a redirect that signs another user in: its follow-up goes, and is keyed, with the new cookie (no delegate) or the old one (a delegate), as without the cache",
          arguments: [false, true], [nil, "alice"])
    func redirectSettingACookie(delegate: Bool, signedIn: String?) async throws {
        let seen = try await Self.bodies(delegate: delegate, signedIn: signedIn) { session, _, h in
            [try await Self.body(session, h, "/home"), try await Self.body(session, h, "/switch"), try await Self.body(session, h, "/home")]
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        if !delegate { #expect(seen[false]?[1] == "Cookie=user=bob") }
    }

    @Test("an answer fetched under one cookie is never stored under another: after bob's redirect, alice signed in again gets her own page",
          arguments: [false, true])
    func neverStoredUnderAnotherCookie(delegate: Bool) async throws {
        let seen = try await Self.bodies(delegate: delegate, signedIn: "alice") { session, storage, h in
            let first = try await Self.body(session, h, "/switch")
            storage.setCookie(Self.cookie("alice"))
            return [first, try await Self.body(session, h, "/home")]
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[true]?.last == "Cookie=user=alice")
    }

    @Test("the storage changing between a task's making and its resume: the request goes with the cookie it was made with, and is stored under it")
    func cookieChangedBeforeResume() async throws {
        let seen = try await Self.bodies(delegate: false, signedIn: "alice") { session, storage, h in
            let answer = Watched<String?>(nil)
            let task = session.dataTask(with: h.origin.url("/home")) { data, _, _ in
                answer.update { $0 = String(decoding: data ?? Data(), as: UTF8.self) }
            }
            storage.setCookie(Self.cookie("bob"))
            task.resume()
            #expect(await answer.wait { $0 != nil })
            storage.setCookie(Self.cookie("alice"))
            return [answer.value ?? "timeout", try await Self.body(session, h, "/home")]
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false] == ["Cookie=user=alice", "Cookie=user=alice"])
    }

    @Test("a class installed by hand on a session with its own cookie storage: a cookie an answer sets reaches that storage and goes with the next request, as without the cache")
    func handInstalledClassOwnStorage() async throws {
        let h = try Harness()
        h.origin.route("/login") { _, _ in .init(headers: [("Set-Cookie", "sid=hand1; Path=/")], text: "in") }
        h.origin.route("/me") { request, _ in .init(headers: [("Cache-Control", "no-store")], text: "Cookie=\(request.header("Cookie") ?? "-")") }
        let installation = CachingURLProtocol.installation(for: h.cache)
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            if caching { configuration.protocolClasses = [installation.protocolClass] + (configuration.protocolClasses ?? []) }
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            for path in ["/login", "/me"] {
                seen[caching, default: []].append(try await Self.body(session, h, path))
            }
            seen[caching, default: []].append("stored \((configuration.httpCookieStorage?.cookies ?? []).map(\.name))")
        }
        // The installation's own storage (the shared one) got it too, from the forwarding session.
        for cookie in HTTPCookieStorage.shared.cookies(for: h.origin.url("/")) ?? [] where cookie.name == "sid" {
            HTTPCookieStorage.shared.deleteCookie(cookie)
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false] == ["in", "Cookie=sid=hand1", "stored [\"sid\"]"])
    }
}

