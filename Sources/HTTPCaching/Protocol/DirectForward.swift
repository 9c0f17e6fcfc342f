import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the cache learns from a request Foundation's own HTTP class sends on the caller's task.
protocol DirectObserver: AnyObject, Sendable {
    /// Runs `report` as on the task's work queue inside `startLoading`: the client calls it
    /// leads to go out at once (Foundation's class reports on that queue).
    func reportDirectly(_ report: () -> Void)
    /// The response head, whole body, end or failure of the direct request `id`, in that order.
    func directReceived(_ response: HTTPURLResponse, id: Int)
    func forwardReceived(_ data: Data, from task: Int)
    func forwardCompleted(_ task: Int, error: (any Error)?)
}

/// A miss sent by Foundation's own HTTP class on the caller's own task, as the task would be
/// sent without the cache: no second session, no second task, no hop to another queue and
/// back. The class is made through public API (`init(task:cachedResponse:client:)`, as for
/// download tasks, `FoundationHandOff`), with a client of the cache's own that reports what it
/// is told to the exchange and nothing to the task's real client: the exchange answers the
/// caller as it answers any miss (its response, `Cache-Status`, the store write).
///
/// Only for what that class hands its client whole (`applies`): a data task with a completion
/// handler (or `async data(for:)`) and no delegate Foundation would ask, sending its first
/// request unchanged (a GET or HEAD with no body, no fields private to the cache, no
/// validators of the cache's own). Such a task's redirects are followed inside the class, so
/// the cache sees only the last answer: one from another URL is delivered, not stored, and
/// the key's next miss goes through the forwarding session (`CacheEngine.noteRedirects`).
final class DirectForward: @unchecked Sendable {
    private let inner: URLProtocol
    private let tee: Tee

    private static let ids = Atomic<Int>(0)

    /// Foundation's HTTP class on `task`, reporting to `observer` under a new id (negative: never
    /// a forwarding session task's); nil if the class cannot be found.
    /// (Nil too when the redirects it follows cannot be counted: `followedRedirects`.)
    init?(task: URLSessionDataTask, observer: any DirectObserver) {
        guard let type = FoundationHandOff.httpClass else { return nil }
        let id = -Self.ids.wrappingAdd(1, ordering: .relaxed).newValue
        tee = Tee(task: task, id: id, observer: observer)
        inner = type.init(task: task, cachedResponse: nil, client: tee)
        guard TaskIntrospection.redirectCount(of: inner) != nil else { return nil }
    }

    var id: Int { tee.id }

    /// Whether the transfer is still reporting (neither ended nor stopped).
    var isLive: Bool { tee.isLive }

    /// Whether Foundation's class followed a redirect, the cache unaware: the answer is then not
    /// the request's, even when its URL is (a redirect to the same URL, with new cookies).
    var followedRedirects: Bool { (TaskIntrospection.redirectCount(of: inner) ?? 1) > 0 }

    /// Whether the hop's request may go this way: the exchange's first, unconditional, a GET or
    /// HEAD as the task made it, with no body and no field private to the cache.
    static func applies(to hop: Hop, task: URLSessionTask?, conditional: [String: String]) -> Bool {
        guard conditional.isEmpty, case .none = hop.body, let task, type(of: task) == URLSessionDataTask.self,
              let original = task.originalRequest, original.url == hop.request.url else { return false }
        let method = hop.request.sentMethod
        guard method == "GET" || method == "HEAD", hop.request.httpBody == nil, hop.request.httpBodyStream == nil else { return false }
        let fields = hop.request.allHTTPHeaderFields ?? [:]
        return !fields.keys.contains(where: HTTPCachingHeaders.isPrivate)
    }

    /// Sends the request. Call it on the task's work queue.
    func start() { inner.startLoading() }

    /// Cancels the transfer, on the task's work queue, in `stopLoading` after `cancel()`
    /// (Foundation's class ends the transfer with the task's error); nothing more is reported.
    func cancel(task: URLSessionTask) {
        guard tee.stop(), task.error != nil else { return }
        inner.stopLoading() // its handle leaves the session's; the client is not told
        tee.noteEnded()
    }

    /// Nothing more is reported; the transfer goes on to its end unless cancelled. Only ever
    /// reached for a transfer already over: a completion-handler task's answer is reported
    /// whole at its end, and the one input before it, the caller's `cancel()`, stops it first.
    /// A live transfer left behind would trap in Foundation once its task has ended (its next
    /// read asks the session's registry for a task no longer there), so debug builds check.
    func ignore() {
        _ = tee.stop()
        assert(tee.transferEnded, "a live direct transfer was abandoned: it would trap in Foundation when its answer comes")
    }

    /// After the task's `resume()` (in `startLoading`): a redirect that came while the task was
    /// suspended is followed now. The transfer itself is never paused: Foundation's class
    /// would send the request again on resuming, and the cache would keep what that gave
    /// (a suspended task's answer waits in `Delivery` instead, as a forwarded one does).
    func resume() {
        guard tee.isLive else { return }
        inner.startLoading()
    }

    /// Reports to the observer what Foundation's class tells its client, on the task's work
    /// queue. A completion-handler task's response never reaches the client on its own: the
    /// class sets it on the task right before handing over the body, so it is read from there.
    private final class Tee: NSObject, URLProtocolClient, @unchecked Sendable {
        let id: Int
        private let task: URLSessionDataTask
        private weak var observer: (any DirectObserver)?
        /// Whether the head was reported, whether reporting is over (stopped or ended), and
        /// whether Foundation's class ended the transfer (it calls this client only then: a
        /// completion-handler task's answer is handed over whole, or its failure).
        private let state = Mutex((headed: false, over: false, ended: false))

        init(task: URLSessionDataTask, id: Int, observer: any DirectObserver) {
            self.task = task
            self.id = id
            self.observer = observer
        }

        var isLive: Bool { state.withLock { !$0.over } }

        /// Whether Foundation's class has ended the transfer (its handle no longer in the session's).
        var transferEnded: Bool { state.withLock { $0.ended } }

        func noteEnded() { state.withLock { $0.ended = true } }

        /// Stops reporting; whether the transfer had not ended yet.
        func stop() -> Bool {
            state.withLock { state in
                defer { state.over = true }
                return !state.over
            }
        }

        /// The observer, with the head reported first if it was not yet; nil once over.
        private func observing(ending: Bool = false, response: URLResponse? = nil) -> (any DirectObserver)? {
            let (live, report) = state.withLock { state -> (Bool, Bool) in
                guard !state.over else { return (false, false) }
                defer { state.headed = true; state.over = ending }
                return (true, !state.headed)
            }
            guard live, let observer else { return nil }
            guard report else { return observer }
            guard let head = (response ?? task.response) as? HTTPURLResponse else {
                // Foundation's class sets it before handing the body over: never seen without.
                _ = stop()
                observer.reportDirectly { observer.forwardCompleted(id, error: URLError(.badServerResponse)) }
                return nil
            }
            observer.reportDirectly { observer.directReceived(head, id: id) }
            return observer
        }

        func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
            _ = observing(response: response)
        }

        func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
            noteEnded()
            guard !data.isEmpty, let observer = observing() else { return }
            observer.reportDirectly { observer.forwardReceived(data, from: id) }
        }

        func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
            noteEnded()
            guard let observer = observing(ending: true) else { return }
            observer.reportDirectly { observer.forwardCompleted(id, error: nil) }
        }

        func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
            noteEnded()
            guard stop(), let observer else { return }
            let box = UncheckedBox(error)
            observer.reportDirectly { observer.forwardCompleted(id, error: box.value) }
        }

        // Foundation's HTTP class follows redirects and leaves challenges to the task's real
        // client, which it never reaches here: these are never called.
        func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {}
        func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {}
        func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {}
        func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {}
    }
}
