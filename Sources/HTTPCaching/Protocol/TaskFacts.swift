import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The caller's task, and what only reflection on Foundation's internals tells about it: its
/// session, how it takes its body, the delegate Foundation would ask about it (redirects,
/// challenges, body streams, caching) and the one it reports upload progress to.
///
/// Read once, on the task's work queue, where the session's registry is consistent, and only
/// when the answer is to come from the network or a stored answer asks the delegate: a hit
/// needs none of it, and reflection is most of what a request would cost.
final class TaskFacts: @unchecked Sendable {
    let task: URLSessionTask
    private let lock = NSLock()
    private var loaded = false
    private var knownSession: URLSession?
    private var registration: TaskIntrospection.Registration?

    init(task: URLSessionTask, session: URLSession?) {
        self.task = task
        knownSession = session
    }

    /// Reads the task's session and its registration. Call it on the task's work queue.
    func load() {
        lock.withLock {
            guard !loaded else { return }
            loaded = true
            if knownSession == nil { knownSession = TaskIntrospection.session(of: task) }
            if let session = knownSession { registration = TaskIntrospection.registration(of: task, session: session) }
        }
    }

    /// The registration, read once; on the task's work queue when the caller is not on it
    /// already (`onWorkQueue`), where the registry is consistent.
    private func registered(onWorkQueue: Bool) -> TaskIntrospection.Registration {
        if let known = lock.withLock({ registration }) { return known }
        let session = self.session
        let read = { TaskIntrospection.registration(of: self.task, session: session) }
        let found: TaskIntrospection.Registration
        if !onWorkQueue, let queue = TaskIntrospection.workQueue(of: task) {
            found = queue.sync { UncheckedBox(read()) }.value
        } else {
            found = read()
        }
        lock.withLock { registration = found }
        return found
    }

    var session: URLSession? { lock.withLock { knownSession } }

    /// Whether the task takes its body in chunks (a data delegate's `didReceive(data)`). Read
    /// after `load()`.
    var streaming: Bool { lock.withLock { registration?.delivery == .delegate } }

    /// The delegate Foundation would ask before storing a data task's answer
    /// (`willCacheResponse`): the one given to `data(for:delegate:)`, else the task's own,
    /// else the session's, when it is a data delegate. Read after `load()`.
    var cacheDelegate: URLSessionDataDelegate? {
        guard task is URLSessionDataTask, !(task is URLSessionUploadTask) else { return nil }
        return lock.withLock { registration?.storingDelegate } as? URLSessionDataDelegate
    }

    /// The data delegate given to `data(for:delegate:)` (or an upload method's), which
    /// Foundation's own HTTP class hands every chunk; nil for any other task. Reads the
    /// registration only for a task an async method made. Call it on the task's work queue.
    func chunkDelegate() -> Delivery.Side? {
        guard TaskIntrospection.isMadeByAsyncMethod(task) else { return nil }
        let (known, session) = lock.withLock { (registration.map { $0.chunkDelegate }, knownSession) }
        // A hit answered at once has read nothing yet: the one delegate alone, not all of `load()`.
        guard let session = session ?? TaskIntrospection.session(of: task),
              let delegate = known ?? TaskIntrospection.chunkDelegate(of: task, session: session) else { return nil }
        return Delivery.Side(session: session, delegate: delegate)
    }

    /// Whether Foundation's own HTTP class, run on the task, hands its client all the cache
    /// needs (`DirectForward`): a completion handler takes the answer and no delegate would be
    /// asked anything. Read after `load()`.
    var sendsAlone: Bool {
        lock.withLock { registration.map { $0.completionHandler && $0.delegate == nil } ?? false }
    }

    /// The delegate Foundation would ask about the task's redirects, challenges and body stream.
    func delegate(onWorkQueue: Bool) -> URLSessionTaskDelegate? { registered(onWorkQueue: onWorkQueue).delegate }

    /// The same delegate if it was read already, else nil: for a thread that must not wait for
    /// the task's work queue (Foundation's own, which that queue targets).
    var delegateIfRead: URLSessionTaskDelegate? { lock.withLock { registration?.delegate } }

    /// The delegate the task's upload progress goes to.
    func progressDelegate(onWorkQueue: Bool) -> URLSessionTaskDelegate? {
        registered(onWorkQueue: onWorkQueue).progressDelegate
    }
}
