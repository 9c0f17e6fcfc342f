import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a forwarded request reports, as it happens: the head at once, then body chunks, then
/// the end or an error. Called on the forwarding session's delegate queue, in order.
protocol ForwardObserver: AnyObject, Sendable {
    func forwardReceived(_ response: HTTPURLResponse, from task: Int)
    func forwardReceived(_ data: Data, from task: Int)
    /// The body is complete (`error` nil), or the request failed.
    func forwardCompleted(_ task: Int, error: (any Error)?)
    /// Upload progress, for requests with a body.
    func forwardSentBody(_ task: Int, sent: Int64, total: Int64, expected: Int64)
}

/// The session that sends the cache's requests to the network with the caller's own settings,
/// and reports each one's progress to its observer.
///
/// Its protocol classes never include a caching class, so nothing it sends comes back to the
/// cache (the loop guard that works on Linux). It never follows redirects and never answers
/// authentication challenges itself: the 3xx or 401 comes back to the cache, which asks the
/// caller's own delegate, as Foundation would.
final class ForwardingSession: Sendable {
    private let router = Router()
    /// Made lazily: creating any URLSession registers Foundation's built-in protocol classes,
    /// which must not happen before the user's own `URLProtocol.registerClass` call.
    private let state: Mutex<State>

    private struct State: @unchecked Sendable {
        let configuration: URLSessionConfiguration
        var session: URLSession?
        /// The queue the session's transfers read their sockets on, read once with the session.
        var transferQueue: DispatchQueue?
    }

    init(configuration: URLSessionConfiguration) {
        let forwarding = configuration.copy() as! URLSessionConfiguration
        forwarding.protocolClasses = (forwarding.protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        forwarding.urlCache = nil
        forwarding.requestCachePolicy = .reloadIgnoringLocalCacheData
        state = Mutex(State(configuration: forwarding))
    }

    deinit {
        state.withLock { $0.session }?.finishTasksAndInvalidate()
    }

    /// The settings forwarded requests go out with.
    var configuration: URLSessionConfiguration {
        state.withLock { $0.configuration }
    }

    private var session: URLSession {
        state.withLock { state in
            if let session = state.session { return session }
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.name = "HTTPCaching.forwarding"
            let session = URLSession(configuration: state.configuration, delegate: router, delegateQueue: queue)
            state.session = session
            state.transferQueue = TaskIntrospection.transferQueue(of: session)
            return session
        }
    }

    /// The queue every forwarded transfer reads its socket on (`TaskIntrospection.transferQueue`);
    /// nil before the first request, or when it cannot be read.
    var transferQueue: DispatchQueue? {
        state.withLock { $0.transferQueue }
    }

    /// The body an outgoing request carries.
    enum Body {
        case none
        case data(Data)
        case file(URL)
        case stream(InputStream)
    }

    /// Creates a task for `request`, reporting to `observer`; not resumed.
    func makeTask(_ request: URLRequest, body: Body = .none, observer: any ForwardObserver) -> URLSessionDataTask {
        let session = self.session
        let task: URLSessionDataTask
        switch body {
        case .none:
            task = session.dataTask(with: request)
        case .data(let data):
            var request = request
            request.httpBody = data
            task = session.dataTask(with: request)
        case .file(let url):
            task = session.uploadTask(with: request, fromFile: url)
        case .stream(let stream):
            var request = request
            request.httpBodyStream = stream
            task = session.dataTask(with: request)
        }
        router.observe(task.taskIdentifier, observer)
        return task
    }

    /// Routes the session's delegate calls to each task's observer.
    private final class Router: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        /// Held strongly until the task completes: a background refresh has no other owner.
        private let observers = Mutex<[Int: any ForwardObserver]>([:])

        func observe(_ task: Int, _ observer: any ForwardObserver) {
            observers.withLock { $0[task] = observer }
        }

        private func observer(_ task: Int) -> (any ForwardObserver)? {
            observers.withLock { $0[task] }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            if let http = response as? HTTPURLResponse { observer(dataTask.taskIdentifier)?.forwardReceived(http, from: dataTask.taskIdentifier) }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            observer(dataTask.taskIdentifier)?.forwardReceived(data, from: dataTask.taskIdentifier)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let observer = observers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
            observer?.forwardCompleted(task.taskIdentifier, error: error)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                        totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
            observer(task.taskIdentifier)?.forwardSentBody(task.taskIdentifier, sent: bytesSent, total: totalBytesSent,
                                                           expected: totalBytesExpectedToSend)
        }

        /// Never follow: the 3xx comes back, and the cache asks the caller's delegate.
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
            completionHandler(nil)
        }

        /// An HTTP authentication challenge arrives once the 401 and its whole body have been
        /// reported: the answer is complete, so end it there and let the cache ask the caller.
        /// Other challenges (server trust) get the default handling.
        func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
            let method = challenge.protectionSpace.authenticationMethod
            guard [NSURLAuthenticationMethodHTTPBasic, NSURLAuthenticationMethodHTTPDigest, NSURLAuthenticationMethodDefault].contains(method) else {
                return completionHandler(.performDefaultHandling, nil)
            }
            let observer = observers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
            observer?.forwardCompleted(task.taskIdentifier, error: nil)
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }
}
