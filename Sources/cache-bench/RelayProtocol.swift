import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The least any forwarding URLProtocol can do on Linux, the anchor a miss is measured
/// against beside the floor: the request sent on a second session, as a completion-handler
/// task (the answer comes once, whole), made off Foundation's shared queue (creating a task
/// there traps), and its answer handed to the client as soon as it arrives. No lookup, no
/// store, no loop guard beyond the second session's protocol classes, and no hop back to the
/// task's work queue, which a correct protocol needs: a lower bound, never a design.
final class RelayProtocol: URLProtocol {
    /// The session the relay sends on (Foundation's own classes only).
    static let forwarding: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: configuration)
    }()
    private static let control = DispatchQueue(label: "cache-bench.relay")
    /// The task sent, and whether the protocol was stopped (before it was made, it never is).
    private let inner = Mutex<(task: URLSessionDataTask?, stopped: Bool)>((nil, false))

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let request = self.request
        nonisolated(unsafe) let relay = self
        Self.control.async {
            let task = Self.forwarding.dataTask(with: request) { data, response, error in
                guard let client = relay.client, !relay.inner.withLock({ $0.stopped }) else { return }
                if let error { return client.urlProtocol(relay, didFailWithError: error) }
                client.urlProtocol(relay, didReceive: response!, cacheStoragePolicy: .notAllowed)
                if let data, !data.isEmpty { client.urlProtocol(relay, didLoad: data) }
                client.urlProtocolDidFinishLoading(relay)
            }
            guard relay.inner.withLock({ inner -> Bool in
                inner.task = task
                return !inner.stopped
            }) else { return }
            task.resume()
        }
    }

    override func stopLoading() {
        let task = inner.withLock { inner in
            inner.stopped = true
            return inner.task
        }
        Self.control.async { task?.cancel() }
    }
}
