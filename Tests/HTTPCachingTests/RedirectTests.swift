import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Redirects ask the caller's delegate exactly as without the cache; each hop is a transaction
/// of its own, stored under its own URL.
@Suite("Redirects through the cache")
struct RedirectTests {
    static let withAndWithoutCache = AuthenticationTests.withAndWithoutCache

    private func routes(_ h: Harness, status: Int = 302, cacheControl: String? = nil) {
        h.origin.routeRedirect("/a", status: status, to: "/b", cacheControl: cacheControl)
        h.origin.route("/b") { request, hit in
            .init(headers: [("Cache-Control", "max-age=600")], text: "b \(hit) \(request.header("X-Modified") ?? "-")")
        }
        h.origin.route("/c") { request, hit in .init(text: "c \(hit) \(request.header("X-Modified") ?? "-")") }
    }

    private func session(_ h: Harness, caching: Bool) -> (ProbeDelegate?) -> URLSession {
        { delegate in h.session(caching: caching, delegate) }
    }

    @Test("a delegate that follows is asked once per hop and the final answer arrives, as without the cache",
          arguments: withAndWithoutCache)
    func follows(kind: TaskKind, caching: Bool) async throws {
        let h = try Harness()
        routes(h)
        let probe = ProbeDelegate()
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: probe, makeSession: session(h, caching: caching)))
        #expect(outcome.error == nil)
        #expect(outcome.status == 200 && outcome.text == "b 1 -")
        #expect(outcome.response?.url?.path == "/b")
        let redirects = probe.value.redirects
        #expect(redirects.count == 1)
        #expect(redirects.first?.response.statusCode == 302 && redirects.first?.response.url?.path == "/a")
        #expect(redirects.first?.request.url == h.origin.url("/b"))
        #expect(probe.value.order.filter { $0 == "response" }.count == ([.delegate, .asyncTaskDelegate].contains(kind) ? 1 : 0),
                "the 3xx itself never reaches didReceive(response), only the final answer does (where Foundation gives it one)")
        #expect(h.origin.requestCount("/a") == 1 && h.origin.requestCount("/b") == 1)
    }

    @Test("a delegate may change the new request: the changed one is sent, as without the cache", arguments: withAndWithoutCache)
    func modifies(kind: TaskKind, caching: Bool) async throws {
        let h = try Harness()
        routes(h)
        let elsewhere = h.origin.url("/c")
        let probe = ProbeDelegate(onRedirect: { _, request in
            var changed = request
            changed.url = elsewhere
            changed.setValue("yes", forHTTPHeaderField: "X-Modified")
            return changed
        })
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: probe, makeSession: session(h, caching: caching)))
        #expect(outcome.status == 200 && outcome.text == "c 1 yes")
        #expect(outcome.response?.url?.path == "/c")
        #expect(h.origin.requestCount("/b") == 0)
    }

    @Test("a delegate that refuses gets the 3xx itself, its body included, as without the cache", arguments: withAndWithoutCache)
    func refuses(kind: TaskKind, caching: Bool) async throws {
        let h = try Harness()
        routes(h)
        let probe = ProbeDelegate(onRedirect: { _, _ in nil })
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: probe, makeSession: session(h, caching: caching)))
        #expect(outcome.error == nil)
        #expect(outcome.status == 302)
        if caching || kind == .delegate {
            #expect(outcome.text == "redirecting to /b\n")
        } else {
            // Foundation 6.3.1 alone drops the refused redirect's body for completion handlers.
            #expect(outcome.text == "")
        }
        #expect(outcome.response?.value(forHTTPHeaderField: "Location") == "/b")
        #expect(probe.value.redirects.count == 1)
        #expect(h.origin.requestCount("/b") == 0)
    }

    @Test("no delegate at all: the redirect is followed, as without the cache", arguments: [true, false])
    func followsWithoutDelegate(caching: Bool) async throws {
        let h = try Harness()
        routes(h)
        let plain = h.session(caching: caching)
        defer { plain.finishTasksAndInvalidate() }
        let answer = try #require(await fetchOutcome(plain, URLRequest(url: h.origin.url("/a")))).get()
        #expect(answer.response.statusCode == 200 && answer.text == "b 1 -" && answer.response.url?.path == "/b")
    }

    @Test("each hop is its own transaction: the 301 stored under its URL, the 200 under its own; a replayed 301 asks the delegate again",
          arguments: TaskKind.allCases)
    func hopsStoredApart(kind: TaskKind) async throws {
        let h = try Harness()
        routes(h, status: 301, cacheControl: "max-age=600")
        let probe = ProbeDelegate()
        let first = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: probe, makeSession: session(h, caching: true)))
        #expect(probe.value.redirects.count == 1)
        #expect(first.text == "b 1 -" && first.response?.cacheStatus == .miss)
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/a")))?.statusCode == 301)
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/b")))?.statusCode == 200)

        let replaying = ProbeDelegate()
        let second = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: replaying, makeSession: session(h, caching: true)))
        #expect(second.text == "b 1 -" && second.response?.cacheStatus == .fresh)
        #expect(replaying.value.redirects.count == 1, "the stored 301 asked the delegate too")
        #expect(replaying.value.redirects.first?.response.cacheStatus == .fresh, "…and it came from the store")
        #expect(h.origin.requestCount("/a") == 1 && h.origin.requestCount("/b") == 1)

        let refusing = ProbeDelegate(onRedirect: { _, _ in nil })
        let refused = try #require(await perform(kind, URLRequest(url: h.origin.url("/a")), probe: refusing, makeSession: session(h, caching: true)))
        #expect(refused.status == 301 && refused.response?.cacheStatus == .fresh && refused.text == "redirecting to /b\n",
                "refused, the stored 3xx is the answer")
    }

    @Test("a redirect loop ends after 20 hops with NSURLErrorHTTPTooManyRedirects, as without the cache", arguments: [true, false])
    func tooManyRedirects(caching: Bool) async throws {
        let h = try Harness()
        h.origin.routeRedirect("/loop", to: "/loop")
        let probe = ProbeDelegate()
        let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/loop")), probe: probe,
                                                 makeSession: session(h, caching: caching)))
        #expect(outcome.errorCode == NSURLErrorHTTPTooManyRedirects)
        #expect(h.origin.requestCount("/loop") == 21)
        #expect(probe.value.redirects.count == 20)
    }

    @Test("303 after a POST becomes a GET without the body; 302 after a POST too; 307 keeps the method, and through the cache its body",
          arguments: [(303, "GET"), (302, "GET"), (307, "POST")])
    func methodChanges(status: Int, method: String) async throws {
        let h = try Harness()
        h.origin.routeRedirect("/form", status: status, to: "/done")
        h.origin.route("/done") { request, _ in .init(text: "\(request.method) \(String(decoding: request.body, as: UTF8.self))") }
        var request = URLRequest(url: h.origin.url("/form"))
        request.httpMethod = "POST"
        request.httpBody = Data("x=1".utf8)
        for caching in [true, false] {
            let probe = ProbeDelegate()
            let outcome = try #require(await perform(.completionHandler, request, probe: probe, makeSession: session(h, caching: caching)))
            if method == "GET" {
                #expect(outcome.text == "GET ", "caching \(caching)")
            } else {
                // RFC 9110 15.4.8: a 307 repeats the request, body and all. Foundation 6.3.1
                // alone sends the POST again without its body.
                #expect(outcome.text == (caching ? "POST x=1" : "POST "), "caching \(caching)")
            }
            #expect(probe.value.redirects.first?.request.httpMethod == method)
        }
    }

    @Test("relative Location values resolve as Foundation resolves them", arguments: ["/b", "b", "/b?x=1"])
    func relativeLocations(location: String) async throws {
        let h = try Harness()
        routes(h)
        h.origin.routeRedirect("/dir/a", to: location)
        for caching in [true, false] {
            let probe = ProbeDelegate()
            let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/dir/a")), probe: probe,
                                                     makeSession: session(h, caching: caching)))
            #expect(outcome.status == 200, "caching \(caching)")
            #expect(outcome.response?.url?.path == "/b", "caching \(caching)")
            #expect(outcome.response?.url?.query == URL(string: location)?.query, "caching \(caching)")
        }
    }
}

extension RedirectTests {
    @Test("a relative Location with a trailing slash loses it, as in Foundation, so /dir → /dir/ loops until NSURLErrorHTTPTooManyRedirects",
          arguments: [true, false])
    func trailingSlashLoops(caching: Bool) async throws {
        let h = try Harness()
        h.origin.routeRedirect("/dir", status: 301, to: "/dir/")
        let probe = ProbeDelegate()
        let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/dir")), probe: probe, makeSession: { delegate in
            h.session(caching: caching, delegate)
        }))
        #expect(outcome.errorCode == NSURLErrorHTTPTooManyRedirects)
        #expect(probe.value.redirects.first?.request.url?.path == "/dir")
    }

    @Test("a redirect status without Location ends, as without the cache: a delegate task and a request with a body (which the cache forwards chunk by chunk) no longer wait forever",
          arguments: [301, 302, 303, 307, 308])
    func redirectWithoutLocation(status: Int) async throws {
        let h = try Harness()
        h.origin.route("/nowhere", response: .init(status: status, headers: [("Content-Type", "text/plain")], text: "no location"))
        var posted = URLRequest(url: h.origin.url("/nowhere"))
        posted.httpMethod = "POST"
        posted.httpBody = Data("payload".utf8)
        let seen = try await h.sideBySide { session in
            var lines: [String] = []
            let result = await fetchOutcome(session, posted, timeout: 10)
            switch result {
            case .success(let fetched)?: lines.append("POST \(fetched.response.statusCode) \(fetched.data.count) bytes")
            case .failure(let error)?: lines.append("POST failed \((error as NSError).code)")
            case nil: lines.append("POST never ended")
            }
            return lines
        }
        #expect(seen[true] == seen[false])
        #expect(seen[false] == ["POST \(status) 0 bytes"])
        for caching in [false, true] {
            let probe = ProbeDelegate()
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            session.dataTask(with: h.origin.url("/nowhere")).resume()
            let state = await probe.finished(timeout: 10)
            #expect(state != nil && state?.error == nil, "caching \(caching): the task ends, without an error")
        }
    }
}
