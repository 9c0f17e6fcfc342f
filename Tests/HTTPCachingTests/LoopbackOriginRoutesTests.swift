import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Testing
import LoopbackOrigin

@Suite("Loopback origin: auth, redirects, hostile answers, recording")
struct LoopbackOriginRoutesTests {
    /// Sends raw bytes on a new connection and returns everything the server answers.
    func raw(_ bytes: String, port: Int) -> String { LoopbackOriginTests().raw(bytes, port: port) }

    @Test("Basic auth: 401 with a challenge and a body without credentials, the protected answer with them")
    func basicAuth() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let route = origin.routeBasicAuth("/private", user: "ann", password: "s3cret", realm: "test",
                                          response: .init(headers: [("Cache-Control", "private, max-age=60")], text: "secret"))
        #expect(route.expectedAuthorization == "Basic " + Data("ann:s3cret".utf8).base64EncodedString())

        let denied = raw("GET /private HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(denied.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"))
        #expect(denied.contains("\r\nWWW-Authenticate: Basic realm=\"test\"\r\n"))
        #expect(denied.hasSuffix("\r\n\r\nunauthorized\n"))
        let wrong = raw("GET /private HTTP/1.1\r\nAuthorization: Basic \(Data("ann:nope".utf8).base64EncodedString())\r\nConnection: close\r\n\r\n",
                        port: origin.port)
        #expect(wrong.hasPrefix("HTTP/1.1 401 "))

        var request = URLRequest(url: origin.url("/private"))
        request.setValue(route.expectedAuthorization, forHTTPHeaderField: "Authorization")
        let result = try await fetch(URLSession(configuration: .ephemeral), request)
        #expect(result.response.statusCode == 200 && result.text == "secret")
        #expect(origin.requests(for: "/private").last?.header("Authorization") == route.expectedAuthorization)
        #expect((route.attempts, route.accepted, route.rejected) == (3, 1, 2))
    }

    @Test("Basic auth: a delegate answering the challenge gets through, and the origin sees both attempts")
    func basicAuthChallenge() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let route = origin.routeBasicAuth("/private", user: "ann", password: "s3cret", response: .init(text: "secret"))
        let recorder = TaskRecorder(credential: URLCredential(user: "ann", password: "s3cret", persistence: .forSession))
        let session = startTask(origin.url("/private"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForCompletion())
        // Foundation 6.3.1 on Linux shows the delegate the 401 and its body, then the challenge,
        // then the authorized response and its body.
        var order: [String] = []
        for event in recorder.events {
            switch event {
            case .response(let response): order.append("response \(response.statusCode)")
            case .data(let data):
                let text = String(decoding: data, as: UTF8.self)
                if let last = order.last, last.hasPrefix("data ") { order[order.count - 1] = last + text } else { order.append("data " + text) }
            case .challenge(let method): order.append(method == NSURLAuthenticationMethodHTTPBasic ? "challenge Basic" : "challenge")
            case .redirect: order.append("redirect")
            case .completed(let code): order.append("completed \(code.map(String.init) ?? "ok")")
            }
        }
        #expect(order == ["response 401", "data unauthorized\n", "challenge Basic", "response 200", "data secret", "completed ok"])
        #expect((route.rejected, route.accepted) == (1, 1))
        let sent = origin.requests(for: "/private").map { $0.header("Authorization") }
        #expect(sent == [nil, route.expectedAuthorization])
    }

    @Test("redirects are followed, with absolute or relative Location", arguments: [301, 302, 303, 307, 308])
    func redirectFollowed(status: Int) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeRedirect("/relative", status: status, to: "/target")
        origin.routeRedirect("/absolute", status: status, to: origin.url("/target").absoluteString)
        origin.route("/target", response: .init(text: "arrived"))
        for path in ["/relative", "/absolute"] {
            let (text, response) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url(path))
            #expect(text == "arrived" && response.statusCode == 200 && response.url?.path == "/target")
        }
        #expect(origin.requestCount("/relative") == 1 && origin.requestCount("/absolute") == 1)
        #expect(origin.requestCount("/target") == 2)
    }

    @Test("a redirect not followed is itself the answer: status, Location, its Cache-Control and its body", arguments: [301, 302, 303, 307, 308])
    func redirectItself(status: Int) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeRedirect("/from", status: status, to: "/to", cacheControl: "max-age=300", body: "moved")
        let recorder = TaskRecorder(followRedirects: false)
        let session = startTask(origin.url("/from"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForCompletion())
        #expect(recorder.events.contains { if case .redirect(let response) = $0 { response.statusCode == status } else { false } })
        let response = try #require(recorder.response)
        #expect(response.statusCode == status)
        #expect(response.value(forHTTPHeaderField: "Location") == "/to")
        #expect(response.value(forHTTPHeaderField: "Cache-Control") == "max-age=300")
        #expect(recorder.text == "moved")
        #expect(origin.requestCount("/to") == 0)
    }

    @Test("any status and repeated header lines go out as given, in order")
    func hostileHeadersOnTheWire() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/odd", response: .init(status: 299, headers: [
            ("Expires", "0"), ("Expires", "Thu, 01 Jan 1970 00:00:00 GMT"), ("Age", "nan"), ("Age", "5"),
            ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("Set-Cookie", "c=3"),
        ], text: "odd"))
        let answer = raw("GET /odd HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer.hasPrefix("HTTP/1.1 299 "))
        #expect(answer.contains("\r\nExpires: 0\r\nExpires: Thu, 01 Jan 1970 00:00:00 GMT\r\nAge: nan\r\nAge: 5\r\n"
            + "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nSet-Cookie: c=3\r\nContent-Length: 3\r\n\r\nodd"))
    }

    @Test("hostile statuses and values reach a plain URLSession", arguments: [206, 299, 410, 599])
    func hostileThroughURLSession(status: Int) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/odd", response: .init(status: status, headers: [("Age", "nan"), ("Age", "7200.0"), ("X-Test", "1")],
                                             text: "body"))
        let (text, response) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url("/odd"))
        #expect(response.statusCode == status && text == "body")
        // Two lines of one field reach the caller folded into one list value, in order.
        #expect(response.value(forHTTPHeaderField: "Age") == "nan, 7200.0")
        #expect(response.value(forHTTPHeaderField: "X-Test") == "1")
    }

    @Test("a 304 and a 204 carry headers but no body and no Content-Length, and the connection goes on")
    func noBodyStatuses() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/304", response: .init(status: 304, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=60")],
                                             text: "ignored"))
        origin.route("/204", response: .init(status: 204, headers: [("X-Test", "1")]))
        origin.route("/next", response: .init(text: "next"))
        let answer = raw("GET /304 HTTP/1.1\r\nIf-None-Match: \"v1\"\r\n\r\nGET /204 HTTP/1.1\r\n\r\n"
            + "GET /next HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer == "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=60\r\n\r\n"
            + "HTTP/1.1 204 No Content\r\nX-Test: 1\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
    }

    @Test("a 304 with headers reaches a plain URLSession with an empty body")
    func notModifiedThroughURLSession() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/304", response: .init(status: 304, headers: [("ETag", "\"v1\"")]))
        var request = URLRequest(url: origin.url("/304"))
        request.setValue("\"v1\"", forHTTPHeaderField: "If-None-Match")
        let result = try await fetch(URLSession(configuration: .ephemeral), request)
        #expect(result.response.statusCode == 304 && result.data.isEmpty)
        #expect(result.response.value(forHTTPHeaderField: "ETag") == "\"v1\"")
        #expect(origin.requests(for: "/304").first?.header("If-None-Match") == "\"v1\"")
    }

    @Test("Response.raw writes exactly its bytes, then closes the connection")
    func rawResponse() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let bytes = "HTTP/1.1 200 OK\r\nAge: 1e3\r\nage: -1\r\nContent-Length: 2\r\n\r\nhi, and bytes past the length"
        origin.route("/raw", response: .raw(bytes))
        origin.route("/x", response: .init(text: "x"))
        // The second request on the connection is never answered: the origin closed it.
        #expect(raw("GET /raw HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n", port: origin.port) == bytes)
        #expect(origin.requestCount("/x") == 0)
    }

    @Test("requests(for:) records each request's target, headers (repeated ones too) and body, per path")
    func recording() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/r", response: .init(text: "ok"))
        var request = URLRequest(url: origin.url("/r?page=1"))
        request.setValue("\"etag-1\"", forHTTPHeaderField: "If-None-Match")
        _ = try await fetch(URLSession(configuration: .ephemeral), request)
        _ = raw("POST /r?page=2 HTTP/1.1\r\nX-Dup: a\r\nx-dup: b\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody", port: origin.port)

        let recorded = origin.requests(for: "/r")
        try #require(recorded.count == 2)
        #expect(recorded[0].method == "GET" && recorded[0].target == "/r?page=1")
        #expect(recorded[0].header("if-none-match") == "\"etag-1\"")
        #expect(recorded[1].method == "POST" && recorded[1].target == "/r?page=2")
        #expect(recorded[1].values("X-Dup") == ["a", "b"])
        #expect(recorded[1].body == Data("body".utf8))
        #expect(origin.requests(for: "/other").isEmpty)
    }
}
