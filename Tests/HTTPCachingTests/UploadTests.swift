import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Upload tasks pass through the cache with their body, however it is given, report their
/// progress to the caller's delegate, and invalidate what they change.
@Suite("Uploads through the cache")
struct UploadTests {
    enum Source: String, CaseIterable, CustomTestStringConvertible {
        case data, file, stream
        var testDescription: String { rawValue }
    }

    /// Made at each use: kept in a static, its storage was reported by LeakSanitizer as a
    /// direct leak (the reference inside Data's representation is not seen as a pointer).
    /// 20 KB under a sanitizer: under ThreadSanitizer Foundation uploads 200 KB to the loopback
    /// origin in 5 to 20 seconds, with or without the cache.
    static var payload: Data { LoopbackOrigin.filler(count: underSanitizer ? 20_000 : 200_000) }

    /// Routes `/up` to echo what it got, and stores a GET of it first.
    private func prepare(_ h: Harness) async throws {
        h.origin.route("/up") { request, hit in
            request.method == "GET" ? .init(headers: [("Cache-Control", "max-age=600")], text: "stored \(hit)")
                : .init(text: "\(request.method) \(request.body.count) \(request.body == Self.payload)")
        }
        _ = try await h.get("/up")
        #expect(h.cache.entryCount == 1)
    }

    /// A new upload task on `session` with its body given as `source` says (to `/up` unless
    /// `url` is given; `timeout`: the request's own, if any).
    private func task(_ source: Source, method: String = "PUT", url: URL? = nil, timeout: TimeInterval? = nil,
                      on session: URLSession, h: Harness, directory: URL) throws -> URLSessionUploadTask {
        var request = URLRequest(url: url ?? h.origin.url("/up"))
        request.httpMethod = method
        if let timeout { request.timeoutInterval = timeout }
        switch source {
        case .data:
            return session.uploadTask(with: request, from: Self.payload)
        case .file:
            let file = directory.appendingPathComponent("body")
            try Self.payload.write(to: file)
            return session.uploadTask(with: request, fromFile: file)
        case .stream:
            return session.uploadTask(withStreamedRequest: request)
        }
    }

    private func withDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(directory)
    }

    @Test("a delegate upload sends its whole body, reports progress up to its size, and invalidates the stored GET",
          arguments: Source.allCases, [true, false])
    func delegateUpload(source: Source, caching: Bool) async throws {
        let h = try Harness()
        try await prepare(h)
        let done = try await upload(source, caching: caching, h: h)
        #expect(done.error == nil)
        #expect(String(decoding: done.data, as: UTF8.self) == "PUT \(Self.payload.count) true")
        #expect(done.bodyStreamRequests == (source == .stream ? 1 : 0), "needNewBodyStream asked once for a streamed upload")
        let sent = done.sent
        #expect(!sent.isEmpty, "progress reported")
        #expect(sent.last?.1 == Int64(Self.payload.count), "progress reaches the whole body")
        #expect(sent.map(\.0).reduce(0, +) == Int64(Self.payload.count))
        if source != .stream { #expect(sent.last?.2 == Int64(Self.payload.count), "the expected size is known") }
        if caching {
            #expect(h.cache.entryCount == 0, "the PUT invalidated the stored GET")
            #expect(h.recorder.count(.invalidated) == 1)
            #expect(done.response?.cacheStatus == .bypass)
        }
    }

    /// A delegate upload of `source`'s body on a caching or a plain session: what its delegate saw.
    private func upload(_ source: Source, method: String = "PUT", caching: Bool, h: Harness) async throws -> ProbeDelegate.State {
        let probe = ProbeDelegate(bodyStream: { InputStream(data: Self.payload) })
        let session = h.session(caching: caching, probe)
        defer { session.finishTasksAndInvalidate() }
        return try await withDirectory { directory in
            try task(source, method: method, on: session, h: h, directory: directory).resume()
            return try #require(await probe.finished())
        }
    }

    @Test("an upload reaches the origin framed as without the cache: the same Expect, length or chunking, Content-Type and body",
          arguments: Source.allCases, ["PUT", "POST"])
    func framing(source: Source, method: String) async throws {
        let h = try Harness()
        try await prepare(h)
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            #expect(try await upload(source, method: method, caching: caching, h: h).error == nil)
            let request = try #require(h.origin.requests(for: "/up").last)
            seen[caching] = [request.method, request.header("Expect") ?? "-", request.header("Transfer-Encoding") ?? "-",
                             request.header("Content-Length") ?? "-", request.header("Content-Type") ?? "-",
                             "\(request.body == Self.payload)"]
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false]?.last == "true", "the whole body arrived")
        if source == .stream { #expect(seen[false]?[1] == "100-continue", "a streamed upload asks to continue") }
    }

    @Test("a data task's own httpBody reaches the origin as without the cache: a POST without a type gets Foundation's form type, a PUT none")
    func requestBodyFraming() async throws {
        let h = try Harness()
        for method in ["POST", "PUT"] {
            let received = try await receivedBothWays(h) { session, url in
                var request = URLRequest(url: url)
                request.httpMethod = method
                request.httpBody = Self.payload
                return session.dataTask(with: request)
            }
            let seen = received.mapValues { [$0.method, $0.header("Content-Type") ?? "-", $0.header("Content-Length") ?? "-", "\($0.body == Self.payload)"] }
            #expect(seen[true] == seen[false], "\(method) with the cache, then without: \(seen)")
            #expect(seen[false]?[1] == (method == "POST" ? "application/x-www-form-urlencoded" : "-"))
        }
    }

    @Test("an upload task sends its own body, not one its request also carries, as without the cache", arguments: ["data", "stream"])
    func uploadBodyOverRequestBody(carried: String) async throws {
        let h = try Harness()
        let received = try await receivedBothWays(h) { session, url in
            var request = URLRequest(url: url)
            request.httpMethod = "PUT"
            if carried == "data" { request.httpBody = Data("request".utf8) } else { request.httpBodyStream = InputStream(data: Data("request".utf8)) }
            return session.uploadTask(with: request, from: Self.payload)
        }
        let seen = received.mapValues { [$0.method, $0.header("Content-Type") ?? "-", "\($0.body == Self.payload)"] }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false]?.last == "true", "the task's body went")
    }

    /// Runs the task `make` builds for `/up` on a plain session, then on a caching one (each
    /// with a probe delegate): what the origin received each time.
    private func receivedBothWays(_ h: Harness, _ make: (URLSession, URL) -> URLSessionTask) async throws -> [Bool: LoopbackOrigin.Request] {
        h.origin.route("/up") { request, _ in .init(text: "\(request.method) \(request.body.count)") }
        var received: [Bool: LoopbackOrigin.Request] = [:]
        for caching in [false, true] {
            let probe = ProbeDelegate()
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            make(session, h.origin.url("/up")).resume()
            #expect(try #require(await probe.finished()).error == nil)
            let last = try #require(h.origin.requests(for: "/up").last)
            received[caching] = last
        }
        return received
    }

    @Test("a streamed upload answered 401 goes again with a credential and a new body from the delegate, as without the cache")
    func streamedUploadChallenged() async throws {
        let h = try Harness()
        h.origin.route("/guarded") { request, _ in
            request.header("Authorization") == nil
                ? .init(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], text: "denied")
                : .init(text: "\(request.method) \(request.body.count) \(request.body == Self.payload)")
        }
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let probe = ProbeDelegate(onChallenge: { _ in (.useCredential, URLCredential(user: "u", password: "p", persistence: .none)) },
                                      bodyStream: { InputStream(data: Self.payload) })
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            var request = URLRequest(url: h.origin.url("/guarded"))
            request.httpMethod = "PUT"
            let before = h.origin.requestCount("/guarded")
            session.uploadTask(withStreamedRequest: request).resume()
            let done = try #require(await probe.finished())
            let sent = h.origin.requests(for: "/guarded").dropFirst(before).map { "\($0.header("Authorization") != nil) \($0.body.count)" }
            seen[caching] = ["asked \(done.bodyStreamRequests)"] + sent
            // Without the cache the delegate also gets the 401's body first (README: the cache
            // gives only the final answer's, as Darwin does).
            #expect(String(decoding: done.data, as: UTF8.self).hasSuffix("PUT \(Self.payload.count) true"), "the retry carried the whole body")
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false] == ["asked 2", "false \(Self.payload.count)", "true \(Self.payload.count)"])
    }

    /// How a body that libcurl may have to send again is given.
    enum Resent: String, CaseIterable, CustomTestStringConvertible {
        case streamedUpload, requestStream, data, file
        var testDescription: String { rawValue }
    }

    @Test("a body sent again on a new connection (the reused one died once the body had gone) goes as without the cache; a stream is asked of the delegate again",
          arguments: Resent.allCases)
    func resentBody(_ resent: Resent) async throws {
        let h = try Harness()
        h.origin.answersExpectContinue = false // the body goes before any answer: a retry must rewind it
        h.origin.route("/prime") { _, _ in .init(text: "primed") }
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let path = "/flaky-\(caching)" // the first request on each path dies once its body has gone
            h.origin.route(path) { request, hit in
                hit == 1 ? .init(fault: .reset) : .init(text: "\(request.method) \(request.body.count) \(request.body == Self.payload)")
            }
            // A stream given for a data or file body makes Foundation 6.3.1 trap on the rewind
            // (NativeProtocol.seekInputStream), without the cache.
            let streams = [.streamedUpload, .requestStream].contains(resent)
            let probe = ProbeDelegate(bodyStream: { streams ? InputStream(data: Self.payload) : nil })
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            let primed = Watched(false) // a connection in the pool for the upload to reuse
            session.dataTask(with: h.origin.url("/prime")) { _, _, _ in primed.update { $0 = true } }.resume()
            #expect(await primed.wait { $0 })
            probe.state.update { $0 = ProbeDelegate.State() }
            let done = try await withDirectory { directory in
                try resentTask(resent, to: h.origin.url(path), on: session, h: h, directory: directory).resume()
                return try #require(await probe.finished(timeout: 30))
            }
            let received = h.origin.requests(for: path).map { "\($0.body.count)" }
            seen[caching] = ["asked \(done.bodyStreamRequests)", String(decoding: done.data, as: UTF8.self), "\(done.errorCode ?? 0)"] + received
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        let size = Self.payload.count
        switch resent {
        case .streamedUpload, .requestStream:
            #expect(seen[false] == ["asked \(resent == .streamedUpload ? 2 : 1)", "PUT \(size) true", "0", "\(size)", "\(size)"],
                    "each attempt carried the whole body")
        case .data, .file:
            // Foundation 6.3.1 asks the delegate but rewinds only a stream: the retry's body
            // never goes, and the request times out (the origin waits for the body).
            #expect(seen[false] == ["asked 1", "", "\(NSURLErrorTimedOut)", "\(size)"])
        }
    }

    private func resentTask(_ resent: Resent, to url: URL, on session: URLSession, h: Harness, directory: URL) throws -> URLSessionTask {
        switch resent {
        case .streamedUpload:
            return try task(.stream, url: url, on: session, h: h, directory: directory)
        case .requestStream:
            var request = URLRequest(url: url)
            request.httpMethod = "PUT"
            request.httpBodyStream = InputStream(data: Self.payload)
            return session.dataTask(with: request)
        case .data, .file:
            // Its retry waits for the timeout: Foundation sends no body again.
            return try task(resent == .data ? .data : .file, url: url, timeout: 4, on: session, h: h, directory: directory)
        }
    }

    @Test("a completion-handler upload gets the answer once; progress goes where Foundation sends it", arguments: Source.allCases.filter { $0 != .stream })
    func completionHandlerUpload(source: Source) async throws {
        let h = try Harness()
        try await prepare(h)
        var results: [Bool: (String, Int)] = [:]
        for caching in [true, false] {
            let probe = ProbeDelegate()
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            let text: String = try await withDirectory { directory in
                var request = URLRequest(url: h.origin.url("/up"))
                request.httpMethod = "PUT"
                let outcome = Watched<String?>(nil)
                let handler: @Sendable (Data?, URLResponse?, (any Error)?) -> Void = { data, _, error in
                    outcome.update { $0 = error.map { "\($0)" } ?? String(decoding: data ?? Data(), as: UTF8.self) }
                }
                if source == .data {
                    session.uploadTask(with: request, from: Self.payload, completionHandler: handler).resume()
                } else {
                    let file = directory.appendingPathComponent("body")
                    try Self.payload.write(to: file)
                    session.uploadTask(with: request, fromFile: file, completionHandler: handler).resume()
                }
                #expect(await outcome.wait { $0 != nil })
                return outcome.value ?? ""
            }
            results[caching] = (text, probe.value.sent.count)
        }
        #expect(results[true]?.0 == "PUT \(Self.payload.count) true")
        #expect(results[true]?.0 == results[false]?.0)
        #expect((results[true]?.1 ?? -1 > 0) == (results[false]?.1 ?? -1 > 0), "progress reported with the cache exactly when without: \(results)")
    }

    @Test("upload(for:from:delegate:) and a task delegate: the body goes, progress reaches the task's delegate")
    func asyncUpload() async throws {
        let h = try Harness()
        try await prepare(h)
        let session = h.plainCachingSession()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: h.origin.url("/up"))
        request.httpMethod = "POST"
        let probe = ProbeDelegate()
        let (data, response) = try await session.upload(for: request, from: Self.payload, delegate: probe)
        #expect(String(decoding: data, as: UTF8.self) == "POST \(Self.payload.count) true")
        #expect((response as? HTTPURLResponse)?.cacheStatus == .bypass)
        #expect(probe.value.sent.last?.1 == Int64(Self.payload.count))
    }
}
