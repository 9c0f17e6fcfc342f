import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
@testable import HTTPCaching

#if canImport(FoundationNetworking)
/// Why only a completion-handler miss is sent by Foundation's own HTTP class on the caller's
/// task (`DirectForward`): run that way, the class hands a delegate task's body to the
/// delegate itself and never to its client, so the cache could not keep it.
@Suite("Facts of swift-corelibs-foundation 6.3.1: Foundation's own HTTP class and a delegate's body")
struct DelegateBodyFactTests {
    @Test("Foundation's own HTTP class, run on a task by another protocol, gives its client a completion-handler task's body whole, and a delegate task's body to the delegate alone (so a delegate's miss goes through the forwarding session)")
    func delegateBodyBypassesTheClient() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/body", response: .init(headers: [("Content-Type", "application/octet-stream")], body: Data(count: 5000)))
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [InnerHTTPClassProtocol.self]

        let plain = URLSession(configuration: configuration)
        defer { plain.finishTasksAndInvalidate() }
        let wholeURL = origin.url("/body?run=\(UUID().uuidString)")
        let (data, _) = try await plain.data(from: wholeURL)
        #expect(data.count == 5000)
        let whole = InnerHTTPClassProtocol.told(about: wholeURL)
        #expect(whole.finished && whole.loaded == 5000, "a completion handler's body reaches the client, whole")
        #expect(!whole.response, "a completion handler's head never reaches the client: the class sets it on the task, where DirectForward reads it")

        let delegate = ProbeDelegate()
        let delegated = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { delegated.finishTasksAndInvalidate() }
        let chunksURL = origin.url("/body?run=\(UUID().uuidString)")
        delegated.dataTask(with: chunksURL).resume()
        let ended = try #require(await delegate.finished(), "the task ends")
        #expect(ended.error == nil, "without an error")
        #expect(ended.byteCount == 5000, "the delegate gets every byte")
        let chunks = InnerHTTPClassProtocol.told(about: chunksURL)
        #expect(chunks.response && chunks.finished, "a delegate task's head and end reach the client")
        #expect(chunks.loaded == 0, "Foundation's class now hands a delegate task's body to its client: DirectForward could send delegates' misses")
    }
}

/// Runs Foundation's own HTTP class on its task, as `DirectForward` does, with a client that
/// notes what the class tells it and, at the end, gives the task its response and its end.
final class InnerHTTPClassProtocol: URLProtocol {
    /// What the class told its client, by request URL.
    private static let seen = Mutex<[URL: (response: Bool, loaded: Int, finished: Bool)]>([:])
    private var inner: URLProtocol?

    static func told(about url: URL) -> (response: Bool, loaded: Int, finished: Bool) {
        seen.withLock { $0[url] ?? (false, 0, false) }
    }

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let task, let url = request.url, let type = FoundationHandOff.httpClass else {
            return client!.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
        }
        Self.seen.withLock { $0[url] = (false, 0, false) }
        inner = type.init(task: task, cachedResponse: nil, client: Recorder(outer: self, url: url))
        inner?.startLoading()
    }

    /// Lets Foundation's class go: it holds its client, which names this protocol.
    override func stopLoading() { inner = nil }

    private final class Recorder: NSObject, URLProtocolClient, @unchecked Sendable {
        /// Weak: Foundation's class, which this protocol holds, holds its client.
        weak var outer: InnerHTTPClassProtocol?
        let url: URL
        var response: URLResponse?
        var responded = false

        init(outer: InnerHTTPClassProtocol, url: URL) {
            self.outer = outer
            self.url = url
        }

        /// The task's response, once: the one the class told, else the one it set on the task.
        private func respond() -> Bool {
            guard !responded else { return true }
            guard let outer, let response = response ?? outer.task?.response else { return false }
            responded = true
            outer.client!.urlProtocol(outer, didReceive: response, cacheStoragePolicy: .notAllowed)
            return true
        }

        func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
            self.response = response
            InnerHTTPClassProtocol.seen.withLock { $0[url]?.response = true }
        }

        func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
            InnerHTTPClassProtocol.seen.withLock { $0[url]?.loaded += data.count }
            if respond(), let outer { outer.client!.urlProtocol(outer, didLoad: data) }
        }

        func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
            InnerHTTPClassProtocol.seen.withLock { $0[url]?.finished = true }
            guard let outer else { return }
            guard respond() else { return outer.client!.urlProtocol(outer, didFailWithError: URLError(.badServerResponse)) }
            outer.client!.urlProtocolDidFinishLoading(outer)
        }

        func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
            guard let outer else { return }
            outer.client!.urlProtocol(outer, didFailWithError: error)
        }

        func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {}
        func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {}
        func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {}
        func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {}
    }
}

#endif
