import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The one path from a loading protocol to its client, closed for good by the first finish,
/// failure or stop.
///
/// Every client call is made on the task's work queue, as Foundation's own HTTP class makes
/// them, and only while the task is still running:
/// - the client reads the session's task registry (`URLSession.behaviour(for:)`), which only
///   that queue may touch: read from another thread while the session adds or removes another
///   task, it misses the entry and traps ("Trying to access a behaviour for a task that in not
///   in the registry");
/// - a task can end without `stopLoading` having reached this object yet (`cancel()` and
///   `suspend()` change the task's state at once, on that queue, and run `stopLoading` later),
///   and a client call for an ended task traps too. On the work queue the state read is the
///   state: cancel, suspend and stop all run there.
///
/// Calls made while `startLoading` is running on that queue (a hit from memory) go out at once;
/// any other call is queued, after those queued before it, so the client sees them in order.
/// When the work queue cannot be read (`TaskIntrospection.workQueue`), calls go out on the
/// caller's thread under a lock, as before.
final class Delivery: Sendable {
    private struct Target: @unchecked Sendable {
        let urlProtocol: URLProtocol
        let client: any URLProtocolClient
        let task: URLSessionTask?
    }

    private struct State: @unchecked Sendable {
        var target: Target?
        /// The thread running `startLoading`, while it runs: calls from it go out at once.
        var inlineThread: pthread_t?
        /// Calls queued and not yet run: while any are, later ones queue behind them.
        var queued = 0
    }

    private let state: Mutex<State>
    private let queue: UncheckedBox<DispatchQueue?>

    init(protocol urlProtocol: URLProtocol, client: (any URLProtocolClient)?) {
        let task = urlProtocol.task
        state = Mutex(State(target: client.map { Target(urlProtocol: urlProtocol, client: $0, task: task) }))
        queue = UncheckedBox(task.flatMap(TaskIntrospection.workQueue(of:)))
    }

    /// Whether client calls wait for the task's work queue (false when it cannot be read).
    var usesWorkQueue: Bool { queue.value != nil }

    /// Whether the client can still be called.
    var isOpen: Bool { state.withLock { $0.target != nil } }

    /// Runs `body` (`startLoading`'s work) with calls from this thread going out at once: the
    /// thread is on the task's work queue.
    func inline(_ body: () -> Void) {
        state.withLock { $0.inlineThread = pthread_self() }
        body()
        state.withLock { $0.inlineThread = nil }
    }

    /// Sends the response head.
    func respond(_ response: URLResponse) {
        let box = UncheckedBox(response)
        send(closing: false) { target in
            target.client.urlProtocol(target.urlProtocol, didReceive: box.value, cacheStoragePolicy: .notAllowed)
        }
    }

    /// Sends body bytes.
    func load(_ data: Data) {
        guard !data.isEmpty else { return }
        send(closing: false) { target in
            target.client.urlProtocol(target.urlProtocol, didLoad: data)
        }
    }

    /// Ends the response, and the path.
    func finish() {
        send(closing: true) { target in
            target.client.urlProtocolDidFinishLoading(target.urlProtocol)
        }
    }

    /// A whole response in one go: head, the body in one call (several `didLoad` calls lose
    /// data for completion-handler callers on Linux), finish.
    func deliver(_ response: URLResponse, body: Data) {
        let box = UncheckedBox(response)
        send(closing: true) { target in
            target.client.urlProtocol(target.urlProtocol, didReceive: box.value, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { target.client.urlProtocol(target.urlProtocol, didLoad: body) }
            target.client.urlProtocolDidFinishLoading(target.urlProtocol)
        }
    }

    /// Fails the task, and closes the path.
    func fail(_ error: any Error) {
        let box = UncheckedBox(error)
        send(closing: true) { target in
            target.client.urlProtocol(target.urlProtocol, didFailWithError: box.value)
        }
    }

    /// Closes the path: nothing reaches the client any more. Called by `stopLoading`, on the
    /// task's work queue.
    func stop() {
        state.withLock { $0.target = nil }
    }

    /// Makes a client call on the work queue (at once when already there and nothing is
    /// queued), if the path is open and the task running; `closing` closes the path with it.
    private func send(closing: Bool, _ call: @escaping @Sendable (Target) -> Void) {
        guard let queue = queue.value else {
            // No work queue: under the lock, from this thread.
            return state.withLock { state in
                guard let target = Self.live(&state, closing: closing) else { return }
                call(target)
            }
        }
        let now = state.withLock { state -> Bool in
            guard state.target != nil else { return false }
            if state.queued == 0, let thread = state.inlineThread, pthread_equal(thread, pthread_self()) != 0 { return true }
            state.queued += 1
            return false
        }
        if now { return run(closing: closing, call) }
        queue.async {
            self.state.withLock { $0.queued -= 1 }
            self.run(closing: closing, call)
        }
    }

    /// On the work queue: the call, if the path is still open and the task running.
    private func run(closing: Bool, _ call: (Target) -> Void) {
        guard let target = state.withLock({ Self.live(&$0, closing: closing) }) else { return }
        call(target)
    }

    /// The target, if its task is still running (closing the path if `closing`); else closes
    /// the path and answers nil.
    private static func live(_ state: inout State, closing: Bool) -> Target? {
        guard let current = state.target else { return nil }
        if closing || current.task.map({ $0.state != .running }) == true { state.target = nil }
        if let task = current.task, task.state != .running { return nil }
        return current
    }
}
