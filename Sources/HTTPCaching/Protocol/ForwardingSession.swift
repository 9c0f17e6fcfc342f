import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a forwarded request reports, as it happens: the head at once, then body chunks, then
/// the end or an error. Called on the forwarding session's delegate queue, in order, but for
/// `forwardNeedsNewBodyStream`, called on the thread Foundation asks on (its transfer thread).
protocol ForwardObserver: AnyObject, Sendable {
    func forwardReceived(_ response: HTTPURLResponse, from task: Int)
    func forwardReceived(_ data: Data, from task: Int)
    /// The body is complete (`error` nil), or the request failed.
    func forwardCompleted(_ task: Int, error: (any Error)?)
    /// Upload progress, for requests with a body.
    func forwardSentBody(_ task: Int, sent: Int64, total: Int64, expected: Int64)
    /// Holds what goes out to the caller until the returned closure is called (an answer
    /// reported whole then goes out together); nil when nothing is held. The closure is given
    /// the queue it is called on when that is the transfer queue: what waited then goes out
    /// there at once, not in another block on it.
    func forwardHold() -> (@Sendable (_ runningOn: DispatchQueue?) -> Void)?
    /// The body is to be sent again (libcurl retries on a new connection when a reused one
    /// died): `answer` what the caller's delegate gives (used for a stream body only), or nil.
    func forwardNeedsNewBodyStream(_ task: Int, answer: @escaping @Sendable (InputStream?) -> Void)
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
    }

    /// The cookie settings of the installation's configuration: the storage this session
    /// puts the cookies of the answers it gets in.
    let cookieJar: CookieJar

    init(configuration: URLSessionConfiguration) {
        let forwarding = configuration.copy() as! URLSessionConfiguration
        forwarding.protocolClasses = (forwarding.protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        forwarding.urlCache = nil
        forwarding.requestCachePolicy = .reloadIgnoringLocalCacheData
        // A request goes with the `Cookie` Foundation gave it when its task was made, the one
        // it is keyed by: the forwarding session must not read the storage again later (the
        // answer, stored under one user's cookie, would be another's). Cookies an answer sets
        // are still stored (that is the accept policy's, not this setting's).
        cookieJar = CookieJar(configuration)
        forwarding.httpShouldSetCookies = false
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
            router.transferQueue.withLock { $0 = UncheckedBox(TaskIntrospection.transferQueue(of: session)) }
            return session
        }
    }

    /// The queue every forwarded transfer reads its socket on (`TaskIntrospection.transferQueue`);
    /// nil before the first request, or when it cannot be read.
    var transferQueue: DispatchQueue? {
        router.transferQueue.withLock { $0.value }
    }

    /// The body an outgoing request carries.
    enum Body {
        case none
        /// The request's own `httpBody` (Foundation gives a POST without a `Content-Type` a
        /// form type then).
        case data(Data)
        /// An upload task's data: sent by an upload task, with no type added, as Foundation sends it.
        case upload(Data)
        case file(URL)
        case stream(InputStream)
        /// The stream a caller's delegate gave for its `uploadTask(withStreamedRequest:)`: sent
        /// the same way, by a streamed upload task that gets it when it asks (chunked, after
        /// `Expect: 100-continue`), where a stream given up front goes without the `Expect`.
        case fromDelegate(InputStream)
    }

    /// Creates a task for `request`, reporting to `observer`; not resumed.
    /// - Parameter whole: the answer is wanted whole, not as it arrives (a caller that takes it
    ///   whole, and a request with no body): a completion-handler task, which Foundation fills
    ///   on its transfer thread, reports once, with no hop to the delegate queue per chunk.
    func makeTask(_ request: URLRequest, body: Body = .none, whole: Bool = false, observer: any ForwardObserver) -> URLSessionDataTask {
        let session = self.session
        let task: URLSessionDataTask
        if whole, case .none = body {
            let identifier = Mutex<Int?>(nil)
            task = session.dataTask(with: request) { [router] data, response, error in
                guard let id = identifier.withLock({ $0 }), let observer = router.take(id)?.observer else { return }
                let release = observer.forwardHold() // the answer goes out in one block
                if error == nil, let http = response as? HTTPURLResponse {
                    observer.forwardReceived(http, from: id)
                    if let data, !data.isEmpty { observer.forwardReceived(data, from: id) }
                }
                observer.forwardCompleted(id, error: error)
                release?(nil)
            }
            identifier.withLock { $0 = task.taskIdentifier }
            router.observe(task.taskIdentifier, observer, whole: true)
            return task
        }
        var stream: InputStream? // a streamed upload's, given when the task asks
        var rewinds = false // a stream body: sent again, it takes the stream the delegate gives
        switch body {
        case .none:
            task = session.dataTask(with: request)
        case .data(let data):
            var request = request
            request.httpBody = data
            task = session.dataTask(with: request)
        case .upload(let data):
            task = session.uploadTask(with: request, from: data)
        case .file(let url):
            task = session.uploadTask(with: request, fromFile: url)
        case .stream(let stream):
            var request = request
            request.httpBodyStream = stream
            task = session.dataTask(with: request)
            rewinds = true
        case .fromDelegate(let given):
            task = session.uploadTask(withStreamedRequest: request)
            stream = given
            rewinds = true
        }
        router.observe(task.taskIdentifier, observer, stream: stream, rewinds: rewinds)
        return task
    }

    /// Routes the session's delegate calls to each task's observer.
    private final class Router: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        /// What is known of a task until it completes.
        struct Entry {
            /// Held strongly: a background refresh has no other owner.
            let observer: any ForwardObserver
            /// Its answer is reported whole, by its completion handler.
            let whole: Bool
            /// A `Body.fromDelegate` task's stream, until the task asks for it.
            var stream: UncheckedBox<InputStream>?
            /// Its body is a stream: asked again, the new stream the observer answers is used.
            var rewinds = false
            /// Whether its final response head was reported.
            var headReported = false
            /// Ends the hold its head took, once its end has been reported
            /// (`releaseAfterTheRead`).
            var releaseAtEnd: (@Sendable () -> Void)?
        }

        private let entries = Mutex<[Int: Entry]>([:])
        /// The session's transfer queue (`ForwardingSession.transferQueue`), read once with it.
        let transferQueue = Mutex(UncheckedBox<DispatchQueue?>(nil))

        /// Reports `task` to `observer`; a streamed upload gets `stream` when it asks for its body.
        func observe(_ task: Int, _ observer: any ForwardObserver, whole: Bool = false, stream: InputStream? = nil, rewinds: Bool = false) {
            entries.withLock { $0[task] = Entry(observer: observer, whole: whole, stream: stream.map(UncheckedBox.init), rewinds: rewinds) }
        }

        private func observer(_ task: Int) -> (any ForwardObserver)? {
            entries.withLock { $0[task]?.observer }
        }

        private func isWhole(_ task: Int) -> Bool {
            entries.withLock { $0[task]?.whole ?? false }
        }

        /// What was known of the task, no longer held: the task reports nothing more.
        func take(_ task: Int) -> Entry? {
            entries.withLock { $0.removeValue(forKey: task) }
        }

        /// The response head, unless it is an interim 1xx (`100 Continue` to an `Expect`, `103
        /// Early Hints`), which Foundation 6.3.1 reports as if it were the response: the final
        /// one follows. A `101` is final (libcurl ends the exchange there, its bytes the body).
        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            if let http = response as? HTTPURLResponse, http.statusCode == 101 || !(100..<200).contains(http.statusCode) {
                let observer = entries.withLock { entries -> (any ForwardObserver)? in
                    entries[dataTask.taskIdentifier]?.headReported = true
                    return entries[dataTask.taskIdentifier]?.observer
                }
                let release = observer?.forwardHold()
                observer?.forwardReceived(http, from: dataTask.taskIdentifier)
                if let release { releaseAfterTheRead(release, task: dataTask) }
            }
            completionHandler(.allow)
        }

        /// Lets what the head leads to go to the caller once the socket read that brought the
        /// head has been handled (a block on the transfer queue, where reads are handled, runs
        /// after it). When the transfer ended in that read (an answer that came whole), its end
        /// is already queued here: the hold ends once that end has been reported, so the head,
        /// body and end go out together and the caller's task has ended by the time its
        /// delegate hears of the response, as with Foundation's own class (a `cancel()` there
        /// changes nothing). Otherwise at once, on the transfer queue: the hold never waits for
        /// this queue's backlog, nor for later reads.
        private func releaseAfterTheRead(_ release: @escaping @Sendable (DispatchQueue?) -> Void, task: URLSessionDataTask) {
            guard let transfer = transferQueue.withLock({ $0.value }) else { return release(nil) }
            let box = UncheckedBox(task)
            transfer.async { [self] in
                let id = box.value.taskIdentifier
                let atEnd = TaskIntrospection.transferEnded(box.value) == true && entries.withLock { entries -> Bool in
                    guard entries[id] != nil else { return false } // its end is reported already
                    let earlier = entries[id]?.releaseAtEnd // never a hold lost, were a second head to come
                    entries[id]?.releaseAtEnd = { earlier?(); release(nil) }
                    return true
                }
                if !atEnd { release(transfer) }
            }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            observer(dataTask.taskIdentifier)?.forwardReceived(data, from: dataTask.taskIdentifier)
        }

        /// The end. A redirect status without a usable `Location` ends with no head reported
        /// (Foundation 6.3.1 holds a 3xx head back while it decides to follow it, then never
        /// reports it): the task's response is reported first, its body empty, as Foundation
        /// hands it to a completion handler.
        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let entry = entries.withLock({ $0[task.taskIdentifier] }) else { return }
            if error == nil, !entry.headReported, let http = task.response as? HTTPURLResponse {
                entry.observer.forwardReceived(http, from: task.taskIdentifier)
            }
            entry.observer.forwardCompleted(task.taskIdentifier, error: error)
            // Taken once the end is reported: a hold left for the end (releaseAfterTheRead) ends now.
            take(task.taskIdentifier)?.releaseAtEnd?()
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                        totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
            observer(task.taskIdentifier)?.forwardSentBody(task.taskIdentifier, sent: bytesSent, total: totalBytesSent,
                                                           expected: totalBytesExpectedToSend)
        }

        /// A `Body.fromDelegate` task's stream, the first time it asks, at once (Foundation
        /// asks on its own queue and goes on in the answer). Asked again (to rewind: libcurl
        /// sends the body again on a new connection), the observer asks the caller's delegate,
        /// as Foundation would; its stream is used for a stream body only (given for a data or
        /// file body, Foundation 6.3.1 traps: without the cache such a retry goes on without one).
        func urlSession(_ session: URLSession, task: URLSessionTask,
                        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
            let id = task.taskIdentifier
            let (stream, asking) = entries.withLock { entries -> (InputStream?, Entry?) in
                guard let entry = entries[id] else { return (nil, nil) }
                guard let stream = entry.stream else { return (nil, entry) }
                entries[id]?.stream = nil
                return (stream.value, nil)
            }
            guard let asking else { return completionHandler(stream) }
            let usesStream = asking.rewinds
            asking.observer.forwardNeedsNewBodyStream(id) { completionHandler(usesStream ? $0 : nil) }
        }

        /// Never follow: the 3xx comes back, and the cache asks the caller's delegate.
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
            if isWhole(task.taskIdentifier) { endWhole(task, response: response, redirect: true) }
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
            endWhole(task, response: challenge.failureResponse as? HTTPURLResponse, redirect: false)
            completionHandler(.cancelAuthenticationChallenge, nil)
        }

        /// Ends a task's report where Foundation stops short of completing it (a 3xx not
        /// followed, a 401 challenge): a completion-handler task has reported nothing yet, so
        /// its response and the body Foundation loaded go first (a completion handler would get
        /// neither: Foundation loses a refused redirect's body, and a cancelled challenge's 401).
        private func endWhole(_ task: URLSessionTask, response: HTTPURLResponse?, redirect: Bool) {
            guard let entry = entries.withLock({ $0[task.taskIdentifier] }) else { return }
            let observer = entry.observer
            if entry.whole, let response {
                observer.forwardReceived(response, from: task.taskIdentifier)
                if let body = TaskIntrospection.loadedBody(of: task, redirect: redirect), !body.isEmpty {
                    observer.forwardReceived(body, from: task.taskIdentifier)
                }
            }
            observer.forwardCompleted(task.taskIdentifier, error: nil)
            take(task.taskIdentifier)?.releaseAtEnd?()
        }
    }
}
