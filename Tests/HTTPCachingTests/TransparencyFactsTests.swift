import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching

@Suite("Facts about Foundation 6.3.1 that make the cache transparent, or limit it", .serialized)
struct TransparencyFactsTests {
    #if canImport(FoundationNetworking)
    private func session(_ delegate: (any URLSessionDelegate)? = nil) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [IntrospectingProtocol.self]
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    private func seen(_ path: String) -> Introspected? {
        IntrospectingProtocol.seen.withLock { $0[path] }
    }

    @Test("startLoading runs on the task's work queue, which TaskIntrospection.workQueue reads (the cache makes every client call there)")
    func workQueue() async throws {
        let plain = session()
        defer { plain.finishTasksAndInvalidate() }
        _ = try await plain.data(for: URLRequest(url: URL(string: "http://facts.test/queue")!))
        #expect(seen("/queue")?.onWorkQueue == true)
        #expect(seen("/queue")?.sessionFound == true)
    }

    @Test("TaskIntrospection.delivery tells delegate tasks (chunks) from completion handlers and data(for:) (the whole body once)")
    func delivery() async throws {
        let collector = DelegateCollector()
        let withDelegate = session(collector)
        let bare = session()
        defer { withDelegate.finishTasksAndInvalidate(); bare.finishTasksAndInvalidate() }
        withDelegate.dataTask(with: URL(string: "http://facts.test/delegate")!).resume()
        _ = try await collector.result()
        _ = try await fetch(withDelegate, URL(string: "http://facts.test/handler")!)
        _ = try await withDelegate.data(for: URLRequest(url: URL(string: "http://facts.test/async")!))
        _ = try await bare.data(for: URLRequest(url: URL(string: "http://facts.test/bare-async")!))
        _ = try await fetch(bare, URL(string: "http://facts.test/bare-handler")!)
        #expect(seen("/delegate")?.delivery == .delegate)
        for path in ["/handler", "/async", "/bare-async", "/bare-handler"] {
            #expect(seen(path)?.delivery == .whole, "\(path)")
        }
    }

    @Test("the delegate given to data(for:delegate:) is not task.delegate: only the session's registry holds it (TaskIntrospection.delegate finds it there)")
    func givenDelegate() async throws {
        let probe = ProbeDelegate()
        IntrospectingProtocol.given = probe
        defer { IntrospectingProtocol.given = nil }
        let bare = session()
        defer { bare.finishTasksAndInvalidate() }
        _ = try await bare.data(for: URLRequest(url: URL(string: "http://facts.test/given")!), delegate: probe)
        let found = try #require(seen("/given"))
        #expect(found.taskDelegateIsGiven == false, "task.delegate does not know it: Foundation never asks it about redirects or challenges")
        #expect(found.delegateIsGiven && found.progressDelegateIsGiven)
    }

    @Test("Foundation alone never asks a data(for:delegate:) delegate about a redirect: it follows it", arguments: [false, true])
    func givenDelegateNotAskedAboutRedirects(caching: Bool) async throws {
        let h = try Harness()
        h.origin.routeRedirect("/from", to: "/to")
        h.origin.route("/to", response: .init(text: "to"))
        let probe = ProbeDelegate(onRedirect: { _, _ in nil })
        let plain = h.session(caching: caching)
        defer { plain.finishTasksAndInvalidate() }
        let (data, response) = try await plain.data(for: URLRequest(url: h.origin.url("/from")), delegate: probe)
        if caching {
            #expect(probe.value.redirects.count == 1 && (response as? HTTPURLResponse)?.statusCode == 302, "the cache asks it, as Darwin does")
        } else {
            #expect(probe.value.redirects.isEmpty && String(decoding: data, as: UTF8.self) == "to")
        }
    }

    @Test("a session with a delegate: data(for:delegate:) with a delegate that answers nothing leaves redirects and challenges to the session's delegate, as without the cache")
    func sessionDelegateAskedBesideAGivenOne() async throws {
        final class Silent: NSObject, URLSessionTaskDelegate {}
        let h = try Harness()
        h.origin.routeRedirect("/from", to: "/to")
        h.origin.route("/to", response: .init(text: "to"))
        h.origin.routeBasicAuth("/auth", user: "u", password: "p") { _, _ in .init(text: "secret") }
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let sessionDelegate = ProbeDelegate(onRedirect: { _, _ in nil }, onChallenge: { _ in
                (.useCredential, URLCredential(user: "u", password: "p", persistence: .none))
            })
            let session = h.session(caching: caching, sessionDelegate)
            defer { session.finishTasksAndInvalidate() }
            for path in ["/from", "/auth"] {
                let (data, response) = try await session.data(for: URLRequest(url: h.origin.url(path)), delegate: Silent())
                seen[caching, default: []].append("\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))")
            }
        }
        // The refused redirect's body differs as documented (Darwin's way: it reaches the caller).
        #expect(seen[true]?.map { $0.prefix(3) } == ["302", "200"] && seen[false]?.map { $0.prefix(3) } == ["302", "200"], "\(seen)")
        #expect(seen[true]?.last == "200 secret" && seen[false]?.last == "200 secret")
    }

    @Test("TaskIntrospection.uploadBody reads an upload task's body (knownBody): data, file, or the delegate's stream")
    func uploadBodies() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("facts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("body")
        try Data("from a file".utf8).write(to: file)
        let probe = ProbeDelegate(bodyStream: { InputStream(data: Data("streamed".utf8)) })
        let plain = session(probe)
        defer { plain.finishTasksAndInvalidate() }
        var request = URLRequest(url: URL(string: "http://facts.test/up-data")!)
        request.httpMethod = "POST"
        let fromData = plain.uploadTask(with: request, from: Data("payload".utf8))
        request.url = URL(string: "http://facts.test/up-file")!
        let fromFile = plain.uploadTask(with: request, fromFile: file)
        request.url = URL(string: "http://facts.test/up-stream")!
        let streamed = plain.uploadTask(withStreamedRequest: request)
        for task in [fromData, fromFile, streamed] { task.resume() }
        #expect(await probe.wait { $0.order.filter { $0 == "complete" }.count == 3 })
        guard case .data(let data)? = seen("/up-data")?.uploadBody else { Issue.record("data body"); return }
        #expect(data == Data("payload".utf8))
        guard case .file(let url)? = seen("/up-file")?.uploadBody else { Issue.record("file body"); return }
        #expect(url == file)
        guard case .fromDelegate? = seen("/up-stream")?.uploadBody else { Issue.record("streamed body"); return }
    }

    @Test("a 401 with WWW-Authenticate delivered by a protocol, nothing to answer it: the task never ends (corelibs 5456; the cache strips the field)")
    func unansweredChallengeHangs() async throws {
        let plain = session()
        defer { plain.invalidateAndCancel() }
        let outcome = await fetchOutcome(plain, URLRequest(url: URL(string: "http://facts.test/401")!), timeout: 1)
        #expect(outcome == nil, "still waiting after a second (the task is then cancelled)")
    }

    @Test("URLProtectionSpace compares by identity: a credential stored for a space the caller built is never found by an equal one")
    func protectionSpaceIdentity() {
        func space() -> URLProtectionSpace {
            URLProtectionSpace(host: "h.test", port: 80, protocol: "http", realm: "r", authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        }
        let storage = URLCredentialStorage()
        let stored = space()
        storage.set(URLCredential(user: "u", password: "p", persistence: .forSession), for: stored)
        #expect(storage.credentials(for: stored)?["u"] != nil)
        #expect(storage.credentials(for: space()) == nil && !space().isEqual(stored))
    }

    @Test("currentRequest follows a redirect only in Foundation's own HTTP class (a protocol cannot set it); response.url is the final URL either way",
          arguments: [false, true])
    func currentRequestAfterRedirect(caching: Bool) async throws {
        let h = try Harness()
        h.origin.routeRedirect("/old", to: "/new")
        h.origin.route("/new", response: .init(text: "new"))
        let probe = ProbeDelegate()
        let plain = h.session(caching: caching, probe)
        defer { plain.finishTasksAndInvalidate() }
        let task = plain.dataTask(with: h.origin.url("/old"))
        task.resume()
        let done = try #require(await probe.finished())
        #expect(done.redirects.count == 1)
        #expect(task.currentRequest?.url?.path == (caching ? "/old" : "/new"))
        #expect(task.response?.url?.path == "/new")
    }

    @Test("task.error is set only by Foundation's own HTTP class (a protocol cannot set it); the delegate gets the error either way",
          arguments: [false, true])
    func taskErrorProperty(caching: Bool) async throws {
        let h = try Harness()
        h.origin.route("/gone", response: .init(fault: .reset))
        let probe = ProbeDelegate()
        let session = h.session(caching: caching, probe)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: h.origin.url("/gone"))
        task.resume()
        let done = try #require(await probe.finished())
        #expect(done.error != nil)
        #expect((task.error != nil) == !caching)
    }

    @Test("a data task's countOfBytesExpectedToReceive is set only by Foundation's own HTTP class (a protocol cannot set it): on a completion-handler miss, which that class sends, not on a hit; response.expectedContentLength is the same either way",
          arguments: [false, true])
    func expectedBytesCounter(caching: Bool) async throws {
        let h = try Harness()
        h.origin.route("/sized", response: .init(headers: [("Cache-Control", "max-age=60")], body: Data(count: 5000)))
        let session = h.session(caching: caching)
        defer { session.finishTasksAndInvalidate() }
        for round in 0..<2 { // a miss, then a hit through the cache
            var made: URLSessionDataTask?
            let (data, response) = await withCheckedContinuation { continuation in
                let task = session.dataTask(with: h.origin.url("/sized")) { data, response, _ in
                    continuation.resume(returning: (data ?? Data(), response))
                }
                made = task
                task.resume()
            }
            #expect(data.count == 5000 && response?.expectedContentLength == 5000)
            #expect(made?.countOfBytesExpectedToReceive == (caching && round == 1 ? 0 : 5000))
        }
        #expect(h.origin.requestCount() == (caching ? 1 : 2))
    }

    @Test("task metrics are never delivered, with or without the cache", arguments: [false, true])
    func noMetrics(caching: Bool) async throws {
        let h = try Harness()
        h.origin.route("/m", response: .init(text: "m"))
        let delegate = MetricsDelegate()
        let configuration = URLSessionConfiguration.ephemeral
        if caching { configuration.enableHTTPCaching(h.cache) } else { configuration.urlCache = nil }
        let plain = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { plain.finishTasksAndInvalidate() }
        plain.dataTask(with: h.origin.url("/m")).resume()
        #expect(await delegate.state.wait { $0.completed })
        #expect(delegate.state.value.metrics == 0)
    }

    @Test("an upload task's countOfBytesSent moves only in Foundation's own HTTP class (a protocol cannot set it); progress still reaches the delegate",
          arguments: [false, true])
    func bytesSentCounter(caching: Bool) async throws {
        let h = try Harness()
        h.origin.route("/up") { request, _ in .init(text: "\(request.body.count)") }
        let probe = ProbeDelegate()
        let plain = h.session(caching: caching, probe)
        defer { plain.finishTasksAndInvalidate() }
        var request = URLRequest(url: h.origin.url("/up"))
        request.httpMethod = "POST"
        let task = plain.uploadTask(with: request, from: Data(count: 5000))
        task.resume()
        let done = try #require(await probe.finished())
        #expect(String(decoding: done.data, as: UTF8.self) == "5000")
        #expect(done.sent.last?.1 == 5000, "didSendBodyData reports the whole body")
        #expect(task.countOfBytesSent == (caching ? 0 : 5000))
        #expect(task.countOfBytesReceived == 0, "Foundation counts received bytes for download tasks only")
    }

    @Test("Foundation's own HTTP class is the first class of URLSessionConfiguration.default that takes http (the class download tasks are handed to)")
    func foundationHTTPClass() {
        let found: URLProtocol.Type? = FoundationHandOff.httpClass
        #expect(found.map { String(describing: $0) }?.contains("HTTPURLProtocol") == true)
        #expect(!(found is CachingURLProtocol.Type))
    }

    @Test("canInit(with: URLSessionTask) is never called: a protocol cannot leave download tasks to Foundation's HTTP class")
    func canInitWithTaskNeverCalled() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [TaskCanInitProtocol.self]
        let plain = URLSession(configuration: configuration)
        defer { plain.finishTasksAndInvalidate() }
        _ = try await plain.data(for: URLRequest(url: URL(string: "http://facts.test/task")!))
        let location: URL? = await withCheckedContinuation { continuation in
            plain.downloadTask(with: URL(string: "http://facts.test/download")!) { location, _, _ in
                continuation.resume(returning: location)
            }.resume()
        }
        #expect(TaskCanInitProtocol.askedWithTask.withLock { $0 } == false)
        #expect(location == nil, "a protocol cannot set the file a download task hands over (an internal property): the caller gets none")
    }

    @Test("cancelling the Swift tasks of waiting data(for:) calls deadlocks Foundation 6.3.1 itself, without any cache (corelibs 5412)",
          .timeLimit(.minutes(1)))
    func swiftCancellationDeadlock() throws {
        let lines = try runTransparencyProbe(["swift-cancel", "10"])
        #expect(lines.first?.hasPrefix("deadlock") == true, "\(lines)")
    }
    #endif
}

/// Counts metrics deliveries.
final class MetricsDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    struct State: Sendable {
        var metrics = 0
        var completed = false
    }

    let state = Watched(State())

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        state.update { $0.metrics += 1 }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        state.update { $0.completed = true }
    }
}
