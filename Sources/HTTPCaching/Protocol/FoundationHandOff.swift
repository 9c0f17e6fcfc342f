import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Foundation's own HTTP class, run on the caller's own task: what a download task gets, so
/// its delegate, completion handler, `download(for:)`, progress, counters, redirects and
/// challenges behave exactly as without the cache.
///
/// The class is made through public API, as the session itself makes it
/// (`init(task:cachedResponse:client:)`), with a relay as its client: every call reaches the
/// task's real client unchanged, with Foundation's object as the protocol, so the client finds
/// the downloaded file where Foundation's own classes leave it. The relay holds back only the
/// end of a storable download until its file is in the store (on the cache's I/O queue), then
/// ends it on the task's work queue, so the caller's next request finds the entry.
final class FoundationHandOff: @unchecked Sendable {
    private let inner: URLProtocol
    private let relay: Relay

    /// Foundation's HTTP class: the first built-in class that takes an http request (never a
    /// caching class; `.default` holds only Foundation's own).
    static let httpClass: URLProtocol.Type? = {
        let probe = URLRequest(url: URL(string: "http://localhost/")!)
        return (URLSessionConfiguration.default.protocolClasses ?? [])
            .compactMap { $0 as? URLProtocol.Type }
            .first { !($0 is CachingURLProtocol.Type) && $0.canInit(with: probe) }
    }()

    /// Foundation's HTTP class on `task`, reporting to `client`, storing what it downloads
    /// through `binding` when that is storable; nil if Foundation's class cannot be found.
    init?(task: URLSessionTask, client: any URLProtocolClient, binding: ProtocolBinding) {
        guard let type = Self.httpClass else { return nil }
        relay = Relay(client: client, task: task, binding: binding)
        inner = type.init(task: task, cachedResponse: nil, client: relay)
    }

    /// Starts the transfer, or resumes it after a suspension (Foundation's class tells which;
    /// the first start is the one that records when the request was sent).
    func start() {
        let now = relay.binding.engine.now()
        let first = relay.sentAt.withLock { sentAt in
            defer { sentAt = sentAt ?? now }
            return sentAt == nil
        }
        if first { relay.binding.count(originRequests: 1) }
        inner.startLoading()
    }

    /// Suspends the transfer (`suspend()`); `start()` resumes it.
    func suspend() { inner.stopLoading() }

    /// Cancels the transfer: nothing more reaches the client from the relay.
    func stop() {
        relay.stop()
        inner.stopLoading()
    }

    /// Passes every call through to the task's client; holds back the end of a download whose
    /// file goes into the store first.
    private final class Relay: NSObject, URLProtocolClient, @unchecked Sendable {
        private let client: any URLProtocolClient
        private let task: URLSessionTask
        let binding: ProtocolBinding
        private let stopped = Mutex(false)
        /// When the transfer first started (nil before): what it downloads is stored as of then.
        let sentAt = Mutex<Date?>(nil)

        init(client: any URLProtocolClient, task: URLSessionTask, binding: ProtocolBinding) {
            self.client = client
            self.task = task
            self.binding = binding
        }

        func stop() { stopped.withLock { $0 = true } }

        func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
            client.urlProtocol(`protocol`, wasRedirectedTo: request, redirectResponse: redirectResponse)
        }

        func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
            client.urlProtocol(`protocol`, cachedResponseIsValid: cachedResponse)
        }

        func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
            client.urlProtocol(`protocol`, didReceive: response, cacheStoragePolicy: policy)
        }

        func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
            client.urlProtocol(`protocol`, didLoad: data)
        }

        func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
            client.urlProtocol(`protocol`, didFailWithError: error)
        }

        func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
            client.urlProtocol(`protocol`, didReceive: challenge)
        }

        func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
            client.urlProtocol(`protocol`, didCancel: challenge)
        }

        /// Called on the task's work queue. A storable download's file is stored first, off
        /// that queue; the end then comes back to it, unless the task ended meanwhile.
        func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
            binding.count(fetchedFromOrigin: Int(task.countOfBytesReceived))
            guard let storing = DownloadStoring(task: task, inner: `protocol`, binding: binding,
                                                sentAt: sentAt.withLock { $0 }),
                  let queue = TaskIntrospection.workQueue(of: task) else {
                return client.urlProtocolDidFinishLoading(`protocol`)
            }
            let finish = UncheckedBox((self, `protocol`))
            binding.engine.ioQueue(for: storing.url).async {
                storing.store()
                queue.async {
                    let (relay, inner) = finish.value
                    let state = relay.task.state
                    let live = relay.stopped.withLock { !$0 } && (state == .running || state == .suspended)
                    if live { relay.client.urlProtocolDidFinishLoading(inner) }
                }
            }
        }
    }
}
