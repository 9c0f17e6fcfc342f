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
/// Calls made on that queue inside `inline` (a hit from memory in `startLoading`, the report of
/// a miss Foundation's own class sent) go out at once, unless the task is suspended; any other
/// call waits for the queue, after those waiting before it, so the client sees them in order;
/// one block runs every call waiting when it gets the queue, unless a hold is open (`hold()`).
///
/// Body chunks for a delegate-based task (`streamToDelegate`) do not wait for the queue: that
/// queue is shared by every session in the process, the forwarded transfer's own reads run
/// there too, and a fast one keeps it so busy that chunks waiting for it pile up (a 100 MB
/// loopback transfer held 110 MB). They are handed to the delegate's queue directly, as the
/// client would hand them (`didReceive(data)`, nothing else), after the response and before
/// the end, which still go through the client.
///
/// When the work queue cannot be read (`TaskIntrospection.workQueue`), every call goes out on
/// the caller's thread (the one that releases a hold, during one), in order.
final class Delivery: Sendable {
    private struct Target: @unchecked Sendable {
        let urlProtocol: URLProtocol
        let client: any URLProtocolClient
        let task: URLSessionTask?
    }

    /// Where a delegate-based task's chunks go.
    private struct Stream: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionDataTask
    }

    private struct State: @unchecked Sendable {
        var target: Target?
        /// The thread running `inline` (`startLoading`, a direct miss's report): its calls go out at once.
        var inlineThread: pthread_t?
        /// Calls waiting for the work queue, in order.
        var waiting: [Call] = []
        /// Whether a block to run them is on the work queue.
        var scheduled = false
        /// Open holds (`hold()`): calls wait until the last ends.
        var gathering = 0
        var stream: Stream?
        /// Whether the response has reached the client (chunks may follow it directly).
        var responded = false
        /// Chunks that arrived before that, handed over right after it.
        var early: [Data] = []
        /// Finds the task's `data(for:delegate:)` data delegate, until first asked.
        var findSide: (@Sendable () -> Side?)?
        var side: Side?
    }

    private typealias Call = (closing: Bool, call: @Sendable (Target) -> Void)

    private let state: Mutex<State>
    /// The task's work queue, read (by reflection) the first time a call cannot go out at once:
    /// a hit answered inside `startLoading` never needs it.
    private let resolvedQueue: Mutex<(resolved: Bool, queue: UncheckedBox<DispatchQueue?>)>
    private let task: UncheckedBox<URLSessionTask?>
    /// The work queue of the forwarded transfer whose answer is being delivered, if any.
    private let followed = Mutex<UncheckedBox<DispatchQueue?>>(UncheckedBox(nil))

    init(protocol urlProtocol: URLProtocol, client: (any URLProtocolClient)?) {
        let task = urlProtocol.task
        state = Mutex(State(target: client.map { Target(urlProtocol: urlProtocol, client: $0, task: task) }))
        resolvedQueue = Mutex((false, UncheckedBox(nil)))
        self.task = UncheckedBox(task)
    }

    /// The task's work queue; nil when it cannot be read.
    private var workQueue: DispatchQueue? {
        resolvedQueue.withLock { resolved in
            if !resolved.resolved {
                resolved = (true, UncheckedBox(task.value.flatMap(TaskIntrospection.workQueue(of:))))
            }
            return resolved.queue.value
        }
    }

    /// Whether the calling thread is `startLoading`'s, on the task's work queue.
    var isInline: Bool {
        state.withLock { state in state.inlineThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `body` (`startLoading`'s work, or a direct miss's report) with calls from this thread
    /// going out at once: the thread is on the task's work queue. Nests.
    func inline(_ body: () -> Void) {
        let outer = state.withLock { state in defer { state.inlineThread = pthread_self() }; return state.inlineThread }
        body()
        state.withLock { $0.inlineThread = outer }
    }

    /// Hands body chunks straight to the session's data delegate (`TaskIntrospection.delivery`
    /// said the task is delegate-based). Needs the work queue, for ordering with the response.
    func streamToDelegate(session: URLSession) {
        guard workQueue != nil else { return }
        state.withLock { state in
            guard let task = state.target?.task as? URLSessionDataTask else { return }
            state.stream = Stream(session: session, task: task)
        }
    }

    /// Runs later client calls on `queue`, the queue the forwarded transfer whose answer they
    /// carry reads its socket on (`TaskIntrospection.transferQueue`), instead of the caller's
    /// task's work queue.
    ///
    /// Every session's queues run on one process-wide serial queue, so a block on either
    /// excludes the caller's session's registry changes and its task's cancel and stop alike.
    /// But a fast transfer keeps that queue busy with its own reads, and libdispatch drains
    /// the transfer's queue for as long as reads keep arriving: a block waiting on any other
    /// queue meanwhile waits for all of it (with both cores busy, the response of a 100 MB
    /// loopback transfer arrived after its last byte, every chunk held until then, even on the
    /// forwarded task's own work queue). On the transfer's queue the blocks take turns with
    /// its reads. One block runs the waiting calls at a time, in order, whichever queue it is on.
    func follow(_ queue: DispatchQueue?) {
        guard workQueue != nil, let queue else { return }
        followed.withLock { $0 = UncheckedBox(queue) }
    }

    /// Gives every body call to the data delegate `find` names (`TaskFacts.chunkDelegate`),
    /// asked on the work queue at the first one.
    func alsoHandChunks(_ find: @escaping @Sendable () -> Side?) {
        state.withLock { $0.findSide = find }
    }

    /// Sends the response head.
    func respond(_ response: URLResponse) {
        let box = UncheckedBox(response)
        send(closing: false) { [self] target in
            target.client.urlProtocol(target.urlProtocol, didReceive: box.value, cacheStoragePolicy: .notAllowed)
            handOverEarlyChunks()
        }
    }

    /// Sends body bytes.
    func load(_ data: Data) {
        guard !data.isEmpty else { return }
        let direct = state.withLock { state -> Bool in
            guard let stream = state.stream else { return false }
            guard let target = state.target, let task = target.task else { return true }
            switch task.state {
            case .running where state.responded:
                // Chunks held while the task was suspended go first: `resume()` makes the task
                // run at once, but its own hand-over comes later, on the work queue.
                Self.handOverEarly(&state)
                Self.hand(data, to: stream)
            case .running, .suspended:
                state.early.append(data) // handed over after the response, or on resuming
            default:
                break
            }
            return true
        }
        if direct { return }
        send(closing: false) { [self] target in didLoad(data, target) }
    }

    /// Runs `work` on the work queue after every call sent before it has reached the client
    /// (a delegate question that must come after the response and its body); never once the
    /// path is closed or the task ended.
    func afterDelivered(_ work: @escaping @Sendable () -> Void) {
        send(closing: false) { _ in work() }
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
        send(closing: true) { [self] target in
            target.client.urlProtocol(target.urlProtocol, didReceive: box.value, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { didLoad(body, target) }
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
        state.withLock { state in
            state.target = nil
            state.early = []
        }
    }

    /// The task was resumed after `suspend()` (on its work queue, in `startLoading`): what
    /// waited meanwhile goes out now, in order; while a hold is open, when the last one ends.
    func resume() {
        let calls = state.withLock { state -> Bool in
            guard state.target != nil else { return false }
            Self.handOverEarly(&state)
            if state.scheduled || state.waiting.isEmpty || state.gathering > 0 { return false }
            state.scheduled = true
            return true
        }
        if calls { runWaiting() }
    }

    /// On the work queue, right after the response reached the client: the chunks that came
    /// before it, then every later one goes straight to the delegate.
    private func handOverEarlyChunks() {
        guard workQueue != nil else { return } // no stream without the work queue
        state.withLock { state in
            guard state.stream != nil else { return }
            state.responded = true
            Self.handOverEarly(&state)
        }
    }

    /// Under the lock: the chunks held back, in order, once the response has reached the
    /// client (after it, chunks go to the delegate directly).
    private static func handOverEarly(_ state: inout State) {
        guard let stream = state.stream, state.responded else { return }
        for chunk in state.early { hand(chunk, to: stream) }
        state.early = []
    }

    /// What the client does with a chunk for a delegate-based task: the delegate's
    /// `didReceive(data)` on the session's delegate queue. Called under the lock, with the
    /// task running: `stopLoading` (and so Foundation's own end of the task) waits for it.
    private static func hand(_ data: Data, to stream: Stream) {
        guard let delegate = stream.session.delegate as? URLSessionDataDelegate else { return }
        hand(data, to: delegate, of: stream.task, in: stream.session)
    }

    private static func hand(_ data: Data, to delegate: URLSessionDataDelegate, of task: URLSessionDataTask, in session: URLSession) {
        let box = UncheckedBox((session, task, delegate))
        session.delegateQueue.addOperation {
            box.value.2.urlSession(box.value.0, dataTask: box.value.1, didReceive: data)
        }
    }

    /// On the work queue: the client's `didLoad`, then the same bytes to a `data(for:delegate:)`
    /// data delegate, as Foundation's own HTTP class hands them (after the response, which the
    /// client has queued for it already).
    private func didLoad(_ data: Data, _ target: Target) {
        target.client.urlProtocol(target.urlProtocol, didLoad: data)
        let (find, known) = state.withLock { state in
            defer { state.findSide = nil }
            return (state.findSide, state.side)
        }
        var side = known
        if let find {
            side = find()
            state.withLock { [side] in $0.side = side }
        }
        guard let side, let task = target.task as? URLSessionDataTask else { return }
        Self.hand(data, to: side.delegate, of: task, in: side.session)
    }

    /// Holds every call not yet made, those waiting included, until `release()`: a forwarded
    /// head waits until the read that brought it has been handled, so that a `cancel()` in
    /// `didReceive(response)` ends the task as with Foundation alone, and an answer reported
    /// whole (head, body and end) costs one wake-up, not two. Holds nest.
    func hold() {
        state.withLock { $0.gathering += 1 }
    }

    /// Ends a `hold()`: when the last ends, one block takes every call waiting to the queue calls
    /// go out on (the followed transfer's, else the task's work queue), unless one is there
    /// already; when the caller runs on that queue (`runningOn`), they go out at once.
    func release(runningOn current: DispatchQueue? = nil) {
        let schedule = state.withLock { state -> Bool in
            state.gathering -= 1
            guard state.gathering == 0, !state.scheduled, !state.waiting.isEmpty else { return false }
            state.scheduled = true
            return true
        }
        if schedule { scheduleWaiting(runningOn: current) }
    }

    /// Makes a client call on the work queue (at once when already there and nothing waits),
    /// if the path is open and the task running; `closing` closes the path with it.
    private func send(closing: Bool, _ call: @escaping @Sendable (Target) -> Void) {
        enum Route { case now, waits, schedule }
        let route = state.withLock { state -> Route in
            guard state.target != nil else { return .waits }
            if !state.scheduled, state.waiting.isEmpty, let thread = state.inlineThread, pthread_equal(thread, pthread_self()) != 0 {
                return .now
            }
            state.waiting.append((closing, call))
            if state.scheduled || state.gathering > 0 { return .waits }
            state.scheduled = true
            return .schedule
        }
        switch route {
        case .now: run(closing: closing, call)
        case .waits: break
        case .schedule: scheduleWaiting()
        }
    }

    /// Puts the block that runs the waiting calls on the work queue (`scheduled` is set).
    private func scheduleWaiting(runningOn current: DispatchQueue? = nil) {
        guard let queue = followed.withLock({ $0.value }) ?? workQueue else {
            return runWaiting() // no work queue to be had: from this thread, in order
        }
        if let current, current === queue { return runWaiting() }
        queue.async { self.runWaiting() }
    }

    /// On the work queue: every waiting call, in order, and those that arrive meanwhile; they
    /// stay waiting while the task is suspended, until `resume()`, and while a hold is open,
    /// until the last one ends (`release`).
    private func runWaiting() {
        while true {
            let next = state.withLock { state -> (call: Call, target: Target)? in
                guard !state.waiting.isEmpty, state.gathering == 0 else {
                    state.scheduled = false
                    return nil
                }
                switch Self.live(&state, closing: state.waiting[0].closing) {
                case .run(let target):
                    return (state.waiting.removeFirst(), target)
                case .hold:
                    state.scheduled = false
                    return nil
                case .closed:
                    state.waiting.removeAll()
                    state.scheduled = false
                    return nil
                }
            }
            guard let next else { return }
            next.call.call(next.target)
        }
    }

    /// On the work queue: the call, if the path is still open and the task running; while the
    /// task is suspended it waits for `resume()`.
    private func run(closing: Bool, _ call: @escaping @Sendable (Target) -> Void) {
        let liveness = state.withLock { state in
            let liveness = Self.live(&state, closing: closing)
            if case .hold = liveness { state.waiting.append((closing, call)) }
            return liveness
        }
        if case .run(let target) = liveness { call(target) }
    }

    private enum Liveness {
        case run(Target)
        /// The task is suspended: the call waits for `resume()`.
        case hold
        case closed
    }

    /// The target, if its task is still running (closing the path if `closing`); `hold` while
    /// it is suspended; else closes the path.
    private static func live(_ state: inout State, closing: Bool) -> Liveness {
        guard let current = state.target else { return .closed }
        switch current.task?.state ?? .running {
        case .running:
            handOverEarly(&state) // every call, the end and a delegate question, comes after every chunk
            if closing {
                state.target = nil
                state.early = []
            }
            return .run(current)
        case .suspended:
            return .hold
        default:
            state.target = nil
            state.early = []
            return .closed
        }
    }
}
