import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Testing
import LoopbackOrigin

@Suite("Loopback origin")
struct LoopbackOriginTests {
    /// Sends raw bytes on a new connection and returns everything the server answers.
    func raw(_ bytes: String, port: Int) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return "connect failed" }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = Array(bytes.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))
        var answer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test("answers routed paths, 404 for others, and counts per path")
    func routesAndCounts() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/v", headers: [("X-Test", "1")])
        let session = URLSession(configuration: .ephemeral)
        let first = try await fetchPlain(session, origin.url("/v?x=1"))
        let second = try await fetchPlain(session, origin.url("/v?x=2"))
        let missing = try await fetchPlain(session, origin.url("/nope"))
        #expect(first.0 == "v1" && second.0 == "v2")
        #expect(first.1.value(forHTTPHeaderField: "X-Test") == "1")
        #expect(missing.1.statusCode == 404)
        #expect(origin.requestCount("/v") == 2)
        #expect(origin.requestCount() == 3)
    }

    @Test("malformed requests get a 400, and the origin keeps serving", arguments: [
        "GARBAGE\r\n\r\n",
        "GET /x HTTP/9.9\r\n\r\n",
        "GET relative HTTP/1.1\r\n\r\n",
        "GET /x HTTP/1.1\r\nno-colon-here\r\n\r\n",
        "get /x HTTP/1.1\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "\u{FF}\u{FE}\r\n\r\n",
    ])
    func malformed(request: String) throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/x", response: .init(text: "ok"))
        #expect(raw(request, port: origin.port).hasPrefix("HTTP/1.1 400 "))
        #expect(raw("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", port: origin.port).hasSuffix("\r\n\r\nok"))
    }

    @Test("a request head that never ends is cut off with a 400, not buffered forever")
    func oversizedHead() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let huge = "GET /x HTTP/1.1\r\nX: " + String(repeating: "a", count: 100_000)
        #expect(raw(huge, port: origin.port).hasPrefix("HTTP/1.1 400 "))
    }

    @Test("reads chunked request bodies (extensions and trailers ignored), then the next request on the connection")
    func chunkedRequestBody() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/echo") { request, _ in .init(text: request.method + ":" + String(decoding: request.body, as: UTF8.self)) }
        let chunked = "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n"
        let answer = raw(chunked + "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer.contains("POST:hello, chunked!"))
        #expect(answer.contains("GET:"))
        #expect(origin.requestCount("/echo") == 2)
    }

    @Test("keeps a connection alive across requests and reads request bodies")
    func keepAliveAndBody() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/echo") { request, _ in .init(text: request.method + ":" + String(decoding: request.body, as: UTF8.self)) }
        let answer = raw("POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /echo HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer.contains("POST:hello"))
        #expect(answer.contains("GET:"))
        #expect(origin.requestCount("/echo") == 2)
    }
}

func fetchPlain(_ session: URLSession, _ url: URL) async throws -> (String, HTTPURLResponse) {
    try await withCheckedThrowingContinuation { continuation in
        session.dataTask(with: url) { data, response, error in
            if let error { continuation.resume(throwing: error); return }
            continuation.resume(returning: (String(decoding: data ?? Data(), as: UTF8.self), response as! HTTPURLResponse))
        }.resume()
    }
}

/// Records what a plain URLSession task's delegate sees, in order, and lets a test wait until
/// a given moment, so tests prove ordering by ordering, never by timers.
final class TaskRecorder: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Event: Sendable {
        case response(HTTPURLResponse)
        case data(Data)
        case redirect(HTTPURLResponse)
        case challenge(String)
        /// The task ended; the error's code, nil on success.
        case completed(Int?)
    }

    private let log = Watched<[Event]>([])
    /// Whether redirects are followed (else the 3xx is the task's response).
    let followRedirects: Bool
    /// The credential given to an authentication challenge; nil cancels the challenge.
    let credential: URLCredential?

    init(followRedirects: Bool = true, credential: URLCredential? = nil) {
        self.followRedirects = followRedirects
        self.credential = credential
    }

    var events: [Event] { log.value }
    var response: HTTPURLResponse? {
        events.lazy.compactMap { if case .response(let response) = $0 { response } else { nil } }.first
    }
    var body: Data { events.reduce(into: Data()) { if case .data(let data) = $1 { $0.append(data) } } }
    var text: String { String(decoding: body, as: UTF8.self) }
    var completion: Int?? {
        events.lazy.compactMap { if case .completed(let code) = $0 { code } else { nil } }.first
    }
    var sawResponse: Bool { response != nil }
    var dataEvents: Int { events.filter { if case .data = $0 { true } else { false } }.count }

    private func record(_ event: Event) {
        log.update { $0.append(event) }
    }

    /// Waits until `predicate` holds for the events so far; false after `timeout` seconds.
    func wait(timeout: TimeInterval = 10, until predicate: @escaping @Sendable ([Event]) -> Bool) async -> Bool {
        await log.wait(timeout: timeout, until: predicate)
    }

    func waitForResponse() async -> Bool {
        await wait { $0.contains { if case .response = $0 { true } else { false } } }
    }

    func waitForBody(containing text: String) async -> Bool {
        await wait { events in
            let body = events.reduce(into: Data()) { if case .data(let data) = $1 { $0.append(data) } }
            return String(decoding: body, as: UTF8.self).contains(text)
        }
    }

    func waitForCompletion() async -> Bool {
        await wait { $0.contains { if case .completed = $0 { true } else { false } } }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let http = response as? HTTPURLResponse { record(.response(http)) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        record(.data(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        record(.redirect(response))
        completionHandler(followRedirects ? request : nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        record(.challenge(challenge.protectionSpace.authenticationMethod))
        if let credential { completionHandler(.useCredential, credential) } else { completionHandler(.cancelAuthenticationChallenge, nil) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        record(.completed(error.map { ($0 as NSError).code }))
    }
}

/// A plain session (no cache) whose single delegate is `recorder`, and a task on it, started.
func startTask(_ url: URL, recorder: TaskRecorder, headers: [String: String] = [:]) -> URLSession {
    let session = URLSession(configuration: .ephemeral, delegate: recorder, delegateQueue: nil)
    var request = URLRequest(url: url)
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    session.dataTask(with: request).resume()
    return session
}

@Suite("Loopback origin: streams, gates, pacing, auth, redirects, raw answers, recording")
struct LoopbackOriginCapabilityTests {
    @Test("a chunked stream: the client sees the headers before any body is written, then each chunk as written")
    func chunkedStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/stream", response: .init(headers: [("Content-Type", "text/plain"), ("X-Test", "1")], stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/stream"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await stream.headersSent())
        #expect(await recorder.waitForResponse())
        #expect(stream.bytesSent == 0 && recorder.dataEvents == 0, "the response arrived while the body was unwritten")
        #expect(recorder.response?.value(forHTTPHeaderField: "X-Test") == "1")

        stream.write("one,")
        #expect(await recorder.waitForBody(containing: "one,"))
        #expect(recorder.completion == nil, "the task is still open after the first chunk")
        stream.write("two")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil))
        #expect(recorder.text == "one,two")
        #expect(await stream.ended() == .finished)
        #expect(stream.bytesSent == 7)
    }

    @Test("a Content-Length stream: the announced length, written in parts the client sees one by one")
    func contentLengthStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: .contentLength(6))
        origin.route("/sized", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/sized"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await recorder.waitForResponse())
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Length") == "6")
        stream.write("abc")
        #expect(await recorder.waitForBody(containing: "abc"))
        #expect(recorder.completion == nil)
        stream.write("def")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil) && recorder.text == "abcdef")
        #expect(await stream.ended() == .finished)
    }

    @Test("a Content-Length stream finished short closes the connection: the client gets an error")
    func shortStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: .contentLength(10))
        origin.route("/short", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/short"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await stream.headersSent())
        stream.write("abc")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion != .some(nil), "a body shorter than its Content-Length is an error")
        #expect(await origin.openConnections(atMost: 0))
    }

    @Test("a body gate: the client has the response while the origin still holds the body")
    func bodyGate() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        var response = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "held body")
        response.bodyGate = gate
        origin.route("/gated", response: response)
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/gated"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await gate.reached())
        #expect(await recorder.waitForResponse())
        #expect(!gate.isOpen && recorder.dataEvents == 0, "didReceive(response) happened while the body was held")
        gate.open()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.text == "held body")
        #expect(gate.arrivals == 1)
    }

    @Test("a head gate: nothing reaches the client until it opens; it holds several responses at once")
    func headGate() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        origin.route("/held") { _, hit in
            var response = LoopbackOrigin.Response(text: "answer \(hit)")
            response.headGate = gate
            return response
        }
        let first = TaskRecorder(), second = TaskRecorder()
        let sessions = [startTask(origin.url("/held?a"), recorder: first), startTask(origin.url("/held?b"), recorder: second)]
        defer { sessions.forEach { $0.invalidateAndCancel() } }

        #expect(await gate.reached(count: 2))
        #expect(!first.sawResponse && !second.sawResponse, "the origin has written nothing yet")
        gate.open()
        #expect(await first.waitForCompletion())
        #expect(await second.waitForCompletion())
        #expect(Set([first.text, second.text]) == ["answer 1", "answer 2"])
    }

    @Test("server-sent events: pushed when the test wants; the origin sees the client leave", arguments: [
        LoopbackOrigin.BodyStream.Framing.chunked, .untilClose,
    ])
    func eventStreamClientLeaves(framing: LoopbackOrigin.BodyStream.Framing) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: framing)
        origin.route("/events", response: .eventStream(stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/events"), recorder: recorder)

        #expect(await recorder.waitForResponse())
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Type") == "text/event-stream")
        #expect(recorder.response?.value(forHTTPHeaderField: "Cache-Control") == "no-store")
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Length") == nil)
        stream.writeEvent(data: "first", id: "1")
        #expect(await recorder.waitForBody(containing: "id: 1\ndata: first\n\n"))
        stream.writeEvent(data: "two\nlines", event: "update")
        #expect(await recorder.waitForBody(containing: "event: update\ndata: two\ndata: lines\n\n"))
        #expect(stream.ending == nil)

        session.invalidateAndCancel() // the client goes away
        #expect(await stream.ended() == .clientClosed)
        #expect(await origin.openConnections(atMost: 0))
        stream.write("ignored after the end")
    }

    @Test("server-sent events: the stream ends when the test finishes it")
    func eventStreamFinished() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/events", response: .eventStream(stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/events"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForResponse())
        stream.writeEvent(data: "only")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil) && recorder.text == "data: only\n\n")
        #expect(await stream.ended() == .finished)
    }

    @Test("stop() ends held, streaming, paced and hanging responses, closes their connections and leaves no thread")
    func stopEndsEverything() async throws {
        let origin = try LoopbackOrigin()
        let gate = LoopbackOrigin.Gate(), stream = LoopbackOrigin.BodyStream()
        var gated = LoopbackOrigin.Response(text: "never")
        gated.bodyGate = gate
        origin.route("/gated", response: gated)
        origin.route("/stream", response: .eventStream(stream))
        origin.route("/paced", response: .paced(bytes: 1 << 20, bytesPerSecond: 1024))
        origin.route("/hang", response: .init(fault: .hang))
        let recorders = (0..<4).map { _ in TaskRecorder() }
        let sessions = zip(["/gated", "/stream", "/paced", "/hang"], recorders).map { startTask(origin.url($0), recorder: $1) }
        defer { sessions.forEach { $0.invalidateAndCancel() } }
        #expect(await gate.reached())
        #expect(await stream.headersSent())
        #expect(await recorders[2].waitForResponse())
        #expect(await origin.requests("/hang", count: 1))
        #expect(origin.openConnections == 4)

        origin.stop()
        #expect(origin.openConnections == 0)
        #expect(origin.runningThreads == 0)
        #expect(stream.ending == .originStopped)
        for recorder in recorders { #expect(await recorder.waitForCompletion()) }
        #expect(recorders[0].completion != .some(nil) && recorders[2].completion != .some(nil))
        origin.stop() // twice is fine
    }

    @Test("a handler may stop its own origin without waiting for itself")
    func stopFromHandler() async throws {
        let origin = try LoopbackOrigin()
        origin.route("/stop") { [weak origin] _, _ in
            origin?.stop()
            return .init(text: "stopping")
        }
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/stop"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForCompletion())
        #expect(await origin.openConnections(atMost: 0))
        origin.stop()
        #expect(origin.runningThreads == 0)
    }

    @Test("a paced body arrives whole, and no faster than its pace")
    func paced() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let size = 48 * 1024, rate = 256 * 1024, chunk = 4096
        origin.route("/paced", response: .paced(bytes: size, bytesPerSecond: rate, chunkSize: chunk))
        let start = Date()
        let (text, response) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url("/paced"))
        let elapsed = Date().timeIntervalSince(start)
        #expect(response.value(forHTTPHeaderField: "Content-Length") == String(size))
        #expect(Data(text.utf8) == LoopbackOrigin.filler(count: size))
        // A lower bound only: pacing can make a body slower than this, never faster.
        #expect(elapsed >= Double(size - chunk) / Double(rate) * 0.9)
    }

    @Test("a stream serves one response: a second request given the same stream gets a 500")
    func streamIsSingleUse() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/once", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/once"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await stream.headersSent())
        let (_, second) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url("/once"))
        #expect(second.statusCode == 500)
        stream.finish()
        #expect(await recorder.waitForCompletion())
    }
}

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
