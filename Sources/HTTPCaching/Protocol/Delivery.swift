import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one path from a loading protocol to its client, closed for good by the first finish,
/// failure or stop.
///
/// Every client call runs on the task's work queue, as Foundation's own HTTP protocol makes
/// them: `_ProtocolClient` looks the task up in its session's registry with no lock, and that
/// registry only changes on the session's work queue, which the task's queue targets. A call
/// from any other thread races with other tasks starting and ending, and can crash. Calls are
/// queued in the order they are made; the path closes at the first finish, failure or stop,
/// and a queued call whose task has completed by the time it runs is dropped.
final class Delivery: Sendable {
    private struct Target: @unchecked Sendable {
        let urlProtocol: URLProtocol
        let client: any URLProtocolClient
        let task: URLSessionTask?
        var responded = false
    }

    private let target: Mutex<Target?>
    /// The task's work queue; nil when it cannot be read (calls are then made in place).
    private let queue: UncheckedBox<DispatchQueue?>
    /// The thread running `startLoading`, which is on the work queue already, while it is.
    private let inlineThread = Mutex<pthread_t?>(nil)
    /// Body bytes waiting for the client, and whether a call to hand them over is queued.
    /// Chunks that arrive while that call waits for the queue join it: one `didLoad` per turn
    /// of the queue, however fast the network, so the queue keeps up and nothing piles up in it.
    private let waiting = Mutex<(data: Data, queued: Bool)>((Data(), false))
    /// For a task whose session's delegate takes the body chunk by chunk: where to hand chunks
    /// directly, once the response has gone out (see `load`).
    private let direct = Mutex<(target: DirectTarget?, ready: Bool)>((nil, false))

    private struct DirectTarget: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionDataTask
        let delegate: any URLSessionDataDelegate
    }

    init(protocol urlProtocol: URLProtocol, client: (any URLProtocolClient)?) {
        let task = urlProtocol.task
        target = Mutex(client.map { Target(urlProtocol: urlProtocol, client: $0, task: task) })
        queue = UncheckedBox(task.flatMap(TaskIntrospection.workQueue(of:)))
    }

    /// Runs `body` with calls made in place: for the part of `startLoading` that runs on the
    /// task's work queue already.
    func inline(_ body: () -> Void) {
        inlineThread.withLock { $0 = pthread_self() }
        body()
        inlineThread.withLock { $0 = nil }
    }

    /// Whether the client can still be called.
    var isOpen: Bool { target.withLock { $0 != nil } }

    /// Whether the response head has gone out.
    var hasResponded: Bool { target.withLock { $0?.responded ?? true } }

    /// Sends the response head.
    func respond(_ response: URLResponse) {
        send(closing: false, responding: true) { [self] target in
            target.client.urlProtocol(target.urlProtocol, didReceive: response, cacheStoragePolicy: .notAllowed)
            direct.withLock { $0.ready = true } // the response is queued for the delegate: chunks may follow it directly
        }
    }

    /// Lets body chunks go straight to the session's delegate queue, for a task registered to
    /// call its session's data delegate (`TaskIntrospection.Delivery.delegate`).
    ///
    /// For such a task, Foundation's `urlProtocol(_:didLoad:)` does nothing but queue the
    /// delegate's `didReceive(data)` on the session's delegate queue; doing that here spares
    /// every chunk a turn of the shared URLSession queue, which a fast transfer keeps busy (the
    /// chunks would pile up behind it). The response and the end still go through the client,
    /// and order is kept: chunks go direct only once the response's call has run and no chunk
    /// is waiting for the queue.
    func deliverChunksDirectly(session: URLSession, task: URLSessionDataTask) {
        guard let delegate = session.delegate as? URLSessionDataDelegate else { return }
        direct.withLock { $0.target = DirectTarget(session: session, task: task, delegate: delegate) }
    }

    /// Sends body bytes: at once on the caller's queue; straight to the delegate queue when
    /// that is allowed; else joined to the bytes already waiting for the task's queue.
    func load(_ data: Data) {
        guard !data.isEmpty else { return }
        if isInline || queue.value == nil {
            return send(closing: false) { $0.client.urlProtocol($0.urlProtocol, didLoad: data) }
        }
        guard isOpen else { return }
        let first = waiting.withLock { waiting -> Bool? in
            if !waiting.queued, let target = direct.withLock({ $0.ready ? $0.target : nil }) {
                // Queued on the delegate queue while holding the lock, so no chunk overtakes another.
                let box = UncheckedBox(target)
                target.session.delegateQueue.addOperation {
                    box.value.delegate.urlSession(box.value.session, dataTask: box.value.task, didReceive: data)
                }
                return nil
            }
            waiting.data.append(data)
            defer { waiting.queued = true }
            return !waiting.queued
        }
        guard first == true else { return }
        send(closing: false) { [self] target in
            // Hand over what waits, again and again until nothing does; only then may later
            // chunks go direct (resetting `queued` earlier would let one overtake these).
            while true {
                let chunk = waiting.withLock { waiting -> Data? in
                    if waiting.data.isEmpty {
                        waiting.queued = false
                        return nil
                    }
                    defer { waiting.data = Data() }
                    return waiting.data
                }
                guard let chunk else { return }
                target.client.urlProtocol(target.urlProtocol, didLoad: chunk)
            }
        }
    }

    /// Ends the response, and the path.
    func finish() {
        send(closing: true) { $0.client.urlProtocolDidFinishLoading($0.urlProtocol) }
    }

    /// A whole response in one go: head, the body in one call (several `didLoad` calls lose
    /// data for completion-handler callers on Linux), finish.
    func deliver(_ response: URLResponse, body: Data) {
        send(closing: true, responding: true) { target in
            target.client.urlProtocol(target.urlProtocol, didReceive: response, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { target.client.urlProtocol(target.urlProtocol, didLoad: body) }
            target.client.urlProtocolDidFinishLoading(target.urlProtocol)
        }
    }

    /// Fails the task, and closes the path.
    func fail(_ error: any Error) {
        send(closing: true) { $0.client.urlProtocol($0.urlProtocol, didFailWithError: error) }
    }

    /// Closes the path: nothing more reaches the client.
    func stop() {
        target.withLock { $0 = nil }
    }

    /// Whether this thread is the one running `startLoading`, on the task's queue already.
    private var isInline: Bool {
        inlineThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    private func send(closing: Bool, responding: Bool = false, _ call: @escaping @Sendable (Target) -> Void) {
        let inline = isInline
        target.withLock { target in
            guard let current = target else { return }
            if responding { target?.responded = true }
            if closing { target = nil }
            // Queued under the lock, so calls reach the queue in the order they were made.
            guard let queue = queue.value, !inline else { return Self.perform(call, current) }
            queue.async { Self.perform(call, current) }
        }
    }

    private static func perform(_ call: (Target) -> Void, _ target: Target) {
        if let task = target.task, task.state == .completed { return }
        call(target)
    }
}
