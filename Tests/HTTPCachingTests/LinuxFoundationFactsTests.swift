import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// The facts about corelibs Foundation the package's design rests on. Each fails, and says
/// which design choice to revisit, if Foundation changes.
@Suite("Facts about URLProtocol on Linux that the design relies on")
struct LinuxFoundationFactsTests {
    #if canImport(FoundationNetworking)
    @Test("several didLoad calls: completion handlers get only the last chunk, delegates get all (so the cache delivers a body in one call)")
    func chunkedDidLoad() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [ThreeChunkProtocol.self]
        let session = URLSession(configuration: configuration)
        let (data, _) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse?), any Error>) in
            session.dataTask(with: URL(string: "http://facts.test/chunks")!) { data, response, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: (data ?? Data(), response)) }
            }.resume()
        }
        #expect(data == Data("three".utf8))

        let collector = DelegateCollector()
        let delegateSession = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        delegateSession.dataTask(with: URL(string: "http://facts.test/chunks")!).resume()
        let (all, _) = try await collector.result()
        #expect(all == Data("onetwothree".utf8))
        delegateSession.finishTasksAndInvalidate()
    }

    @Test("session additional headers do not reach a custom protocol's request (so the cache copies the caller's configuration)")
    func additionalHeadersNotMerged() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-From-Session": "yes"]
        configuration.protocolClasses = [HeaderCapturingProtocol.self]
        let session = URLSession(configuration: configuration)
        var request = URLRequest(url: URL(string: "http://facts.test/headers")!)
        request.setValue("yes", forHTTPHeaderField: "X-From-Request")
        _ = try await session.data(for: request)
        let seen = HeaderCapturingProtocol.seen.withLock { $0["/headers"] ?? [:] }
        #expect(seen["X-From-Request"] == "yes")
        #expect(seen["X-From-Session"] == nil)
    }

    @Test("whether a request's timeout was set is a stored flag of URLRequest that a copy through NSURLRequest loses (so the forwarding request sets it again, RequestTimeout)")
    func timeoutFlagLostInBridging() {
        #expect(RequestTimeout.isReadable, "URLRequest.isTimeoutIntervalSet is gone: see how Foundation now picks the request's timeout")
        var request = URLRequest(url: URL(string: "http://facts.test/timeout")!, timeoutInterval: 5)
        #expect(!RequestTimeout.isSet(request), "given to init, the timeout is not set: the session's applies")
        request.timeoutInterval = 5
        #expect(RequestTimeout.isSet(request))
        let copied = (request as NSURLRequest).mutableCopy() as! NSMutableURLRequest
        #expect(!RequestTimeout.isSet(copied as URLRequest), "the copy keeps 5 s but not that it was set")
        #expect(RequestTimeout.isSet(Hop.forwardingRequest(from: request, conditional: [:])))
    }

    @Test("HTTPURLResponse keeps its sanitized fields in `_allHeaderFields` (so a miss reads them there, not through `allHeaderFields`'s bridging)")
    func headerFieldsKept() {
        let fields = ["content-type": "text/plain", "X-lower": "a", "www-authenticate": "Basic", "ETag": "\"1\"", "cache-control": "max-age=5"]
        let response = HTTPURLResponse(url: URL(string: "http://facts.test/fields")!, statusCode: 200, httpVersion: nil, headerFields: fields)!
        let kept = StoredField.value(named: "_allHeaderFields", in: response) as? [String: String]
        #expect(kept != nil, "HTTPURLResponse no longer keeps `_allHeaderFields`: headerFields falls back to bridging, 4 µs a miss")
        var bridged: [String: String] = [:]
        for (name, value) in response.allHeaderFields { bridged[name as! String] = value as? String }
        #expect(response.headerFields == bridged)
        #expect(bridged["Etag"] == "\"1\"" && bridged["X-lower"] == "a", "the names as Foundation sanitizes them")
    }

    @Test("on its transfer queue, Foundation's HTTP class shows whether a task's transfer has ended: in a read still going, after a whole answer's one read, at a 401's challenge (so a forwarded head that came with its whole answer goes out with the end, Router.releaseAfterTheRead)")
    func transferEndedReadable() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        origin.route("/gated") { _, _ in
            var response = LoopbackOrigin.Response(headers: [], text: "body")
            response.bodyGate = gate
            return response
        }
        var whole = LoopbackOrigin.Response()
        whole.raw = Data("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwhole".utf8)
        origin.route("/whole", response: whole)
        origin.route("/401", response: .init(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"facts\"")], text: "no"))
        func run(_ path: String, _ midway: (HeadAndEnd) async -> Void = { _ in }) async -> HeadAndEnd {
            let delegate = HeadAndEnd()
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            session.dataTask(with: origin.url(path)).resume()
            await midway(delegate)
            #expect(await delegate.state.wait { $0.ended && ($0.atHead != nil || $0.atChallenge != nil) })
            return delegate
        }
        let gated = await run("/gated") { delegate in
            #expect(await delegate.state.wait { $0.atHead != nil })
            gate.open()
        }
        #expect(gated.state.value.atHead == .some(false), "the head came, the body waits at the gate")
        #expect(await run("/whole").state.value.atHead == .some(true), "a whole answer in one read: the task let its protocol go")
        #expect(await run("/401").state.value.atChallenge == .some(true), "a 401: its protocol's state says the task completed")
    }

    @Test("the task is set before startLoading runs (so the cache can hand download tasks to Foundation's HTTP class there)")
    func taskIsSet() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [HeaderCapturingProtocol.self]
        let session = URLSession(configuration: configuration)
        _ = try await session.data(for: URLRequest(url: URL(string: "http://facts.test/task")!))
        #expect(HeaderCapturingProtocol.sawTask.withLock { $0 })
    }

    @Test("a completion-handler task whose delegate refuses a redirect gets the 3xx with an empty body (so the forwarding session reads the body Foundation loaded, TaskIntrospection.loadedBody)")
    func refusedRedirectBodyLost() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeRedirect("/from", to: "/to", body: "the 3xx body")
        let session = URLSession(configuration: .ephemeral, delegate: RedirectRefuser(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse?), any Error>) in
            session.dataTask(with: origin.url("/from")) { data, response, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: (data ?? Data(), response)) }
            }.resume()
        }
        #expect((response as? HTTPURLResponse)?.statusCode == 302)
        #expect(data.isEmpty, "Foundation now keeps a refused redirect's body: TaskIntrospection.loadedBody(redirect:) may go")
    }
    #endif
}

/// Notes when a data task's head and its end reach the delegate, and what
/// `TaskIntrospection.transferEnded` reads on the transfer queue right after its head or its
/// authentication challenge was handled there (a block queued then runs after that read).
final class HeadAndEnd: NSObject, URLSessionDataDelegate, Sendable {
    let state = Watched((head: false, ended: false, atHead: Bool??.none, atChallenge: Bool??.none))

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let task = UncheckedBox(dataTask)
        TaskIntrospection.transferQueue(of: session)?.async { [state] in
            let ended = TaskIntrospection.transferEnded(task.value)
            state.update { $0.atHead = ended }
        }
        state.update { $0.head = true }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let box = UncheckedBox(task)
        TaskIntrospection.transferQueue(of: session)?.async { [state] in
            let ended = TaskIntrospection.transferEnded(box.value)
            state.update { $0.atChallenge = ended }
        }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        state.update { $0.ended = true }
    }
}

/// Refuses every redirect.
final class RedirectRefuser: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}

/// Answers with one response and three body chunks.
final class ThreeChunkProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        for chunk in ["one", "two", "three"] { client?.urlProtocol(self, didLoad: Data(chunk.utf8)) }
        client?.urlProtocolDidFinishLoading(self)
    }
    override func stopLoading() {}
}

/// Records the headers of the request it is given and whether its task was set.
final class HeaderCapturingProtocol: URLProtocol {
    static let seen = Mutex<[String: [String: String]]>([:]) // by URL path
    static let sawTask = Mutex(false)
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
        let headers = request.allHTTPHeaderFields ?? [:]
        let path = request.url?.path ?? ""
        Self.seen.withLock { $0[path] = headers }
        let hasTask = task != nil
        Self.sawTask.withLock { $0 = hasTask }
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocolDidFinishLoading(self)
    }
    override func stopLoading() {}
}

// MARK: - Facts the transparent plumbing relies on, or works around

/// What a protocol read about its task inside `startLoading`, on the task's work queue.
struct Introspected: @unchecked Sendable {
    var onWorkQueue = false
    var delivery: TaskIntrospection.Delivery?
    var delegateIsGiven = false
    var taskDelegateIsGiven = false
    var progressDelegateIsGiven = false
    var sessionFound = false
    var uploadBody: TaskIntrospection.UploadBody?
}

/// Records what `TaskIntrospection` reads in `startLoading`, then answers 200 in three chunks,
/// or 401 with `WWW-Authenticate: Basic` for paths starting with /401.
final class IntrospectingProtocol: URLProtocol {
    nonisolated(unsafe) static var given: AnyObject?
    static let seen = Mutex<[String: Introspected]>([:])
    private static let key = DispatchSpecificKey<Int>()

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let task else { return }
        var found = Introspected()
        if let queue = TaskIntrospection.workQueue(of: task) {
            queue.setSpecific(key: Self.key, value: 1)
            found.onWorkQueue = DispatchQueue.getSpecific(key: Self.key) == 1
        }
        let session = TaskIntrospection.session(of: task)
        found.sessionFound = session != nil
        if let session {
            found.delivery = TaskIntrospection.delivery(of: task, session: session)
            found.delegateIsGiven = TaskIntrospection.delegate(of: task, session: session).map { $0 === Self.given } ?? false
            found.progressDelegateIsGiven = TaskIntrospection.progressDelegate(of: task, session: session).map { $0 === Self.given } ?? false
        }
        found.taskDelegateIsGiven = task.delegate.map { $0 === Self.given } ?? false
        found.uploadBody = TaskIntrospection.uploadBody(of: task)
        let path = request.url?.path ?? ""
        Self.seen.withLock { $0[path] = found }
        if path.hasPrefix("/401") {
            let response = HTTPURLResponse(url: request.url!, statusCode: 401, httpVersion: "HTTP/1.1",
                                           headerFields: ["WWW-Authenticate": "Basic realm=\"facts\""])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocolDidFinishLoading(self)
            return
        }
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        for chunk in ["one", "two", "three"] { client?.urlProtocol(self, didLoad: Data(chunk.utf8)) }
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// Records whether the session ever asked `canInit(with: URLSessionTask)`.
final class TaskCanInitProtocol: URLProtocol {
    static let askedWithTask = Mutex(false)
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canInit(with task: URLSessionTask) -> Bool {
        askedWithTask.withLock { $0 = true }
        return true
    }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data("file".utf8))
        client?.urlProtocolDidFinishLoading(self)
    }
    override func stopLoading() {}
}
