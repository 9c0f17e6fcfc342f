import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Carries out one request's transaction: derives its key once, looks the entry up, builds the
/// transaction once per hop, feeds it what the network reports, and performs the actions it
/// returns with one small executor (`run`), never doing store I/O on Foundation's shared
/// URLSession queue.
///
/// Its role is a type: a caller's task (`Caller`: the delivery path, redirects and challenges
/// through the caller's delegate), or a background refresh with no caller.
///
/// Threading, all of it:
/// - `begin()` runs in `startLoading`, on the task's work queue. A hit from a store that
///   answers from memory is performed right there; anything needing I/O (a store read, the
///   partition secret) moves to the cache's I/O queue for the key.
/// - Inputs (the forwarded request's head, chunks and end; another request's collapsed answer;
///   `stop`) arrive on whatever thread reports them and only feed the transaction under the lock.
/// - `run` queues the actions; one thread at a time drains them, in order; an action that
///   writes to a store that is not in memory moves the rest of the drain to the I/O queue.
/// - Client calls go through `Delivery`, which makes each on the task's work queue.
final class Exchange: ForwardObserver, @unchecked Sendable {
    /// Whom the exchange answers.
    enum Role {
        /// A caller's task.
        case caller(Caller)
        /// A background refresh of this stale entry, holding its key's refresh claim.
        case refresh(previous: CacheEntry)
    }

    let binding: ProtocolBinding
    let cache: CacheEngine
    let role: Role
    let state: Mutex<State>
    /// Entered while the work queue reads how the caller takes an answer, after it handed the
    /// request on (`prepare(_:after:)`); the thread it was handed to waits on it before it
    /// needs that answer.
    let preparing = DispatchGroup()

    struct State {
        var hop: Hop
        /// Built once per hop, when its key and entry are known (`start`).
        var transaction: CacheTransaction?
        /// The forwarded request in flight: the forwarding session's task (nil: `direct`'s).
        var forwarded: (id: Int, task: UncheckedBox<URLSessionDataTask>?)?
        /// The first request, when Foundation's own class sent it on the caller's task.
        var direct: DirectForward?
        /// Whether a request was sent (or waited for another's): only the first may go `direct`.
        var sentBefore = false
        /// Whether its own request went out after waiting for another's answer, under the
        /// timeout it waited with (`timeOutWaiting`).
        var resentAfterWaiting = false
        /// Which hop of the exchange this is (`startHop` counts them): a wait's timeout is the
        /// hop's own, as each transfer of Foundation's class has its own.
        var hopNumber = 0

        /// `direct`, while it is the request forwarded (not after a later hop's).
        var forwardedDirectly: DirectForward? { forwarded != nil && forwarded?.task == nil ? direct : nil }
        /// Whether the caller still awaits what this hop brings: not stopped, its transaction not over.
        var answering: Bool { !stopped && !(transaction?.isDone ?? true) }
        /// The caller stopped: nothing more is started for it.
        var stopped = false
        /// The executor's queue of actions, and whether a thread is draining it.
        var pending: [CacheTransaction.Action] = []
        var draining = false
        var flight: Flight?
        /// What this exchange stored (under the URL, or its variant), for those waiting on it.
        var stored: Stored?
        /// The refresh claim this exchange gives back when it ends.
        var claim: CacheKey?
        /// How the caller takes an answer from the network, once read (`prepareForNetwork`).
        var callerTakes: (streaming: Bool, asks: Bool)?
        /// The store writer the answer's body goes to as it arrives, while one is open.
        var writer: UncheckedBox<any ResponseStoreWriter>?
        /// Whether this miss has claimed, or waited for, its key's fill across processes.
        var sharedFillChecked = false
        /// The fill claim this exchange holds in the store, given back when it ends.
        var sharedFillClaim: CacheKey?
    }

    /// This exchange's part in its key's flight.
    enum Flight: Equatable {
        /// It leads: others wait for what it stores.
        case leading(CacheKey)
        /// It waits for another's answer.
        case waiting(CacheKey)
    }

    init(role: Role, hop: Hop, binding: ProtocolBinding) {
        self.binding = binding
        cache = binding.engine
        self.role = role
        state = Mutex(State(hop: hop))
    }

    /// A caller's exchange, made in `startLoading`; `begin()` starts it.
    convenience init(request: URLRequest, task: URLSessionTask?, session: URLSession?, binding: ProtocolBinding, delivery: Delivery) {
        let facts = task.map { TaskFacts(task: $0, session: session) }
        if let facts { delivery.alsoHandChunks { facts.chunkDelegate() } }
        let caller = Caller(delivery: delivery, facts: facts)
        self.init(role: .caller(caller), hop: Hop(binding.withSessionPolicy(request), binding: binding), binding: binding)
    }

    var caller: Caller? {
        if case .caller(let caller) = role { return caller }
        return nil
    }

    /// What an exchange stored, for those waiting on it.
    enum Stored {
        /// The entry, its body included.
        case entry(CacheEntry)
        /// An entry whose body went to a store writer, not to memory: those waiting read it
        /// from the store.
        case bodyInStore
    }

    // MARK: - Starting

    /// Reads the body a method other than GET sends, derives the key once and looks the entry up: from
    /// memory right here (a hit is answered in place), else on the I/O queue.
    func begin() {
        guard let caller else { return }
        let request = state.withLock { $0.hop.request }
        if let refusal = HopBody.refusal(of: request, task: caller.facts?.task) { return caller.delivery.fail(refusal) }
        let method = request.sentMethod
        if method != "GET" && method != "HEAD" {
            guard let body = HopBody(of: request, task: caller.facts?.task) else {
                return caller.delivery.fail(HTTPCachingError.uploadBodyUnavailable)
            }
            state.withLock { $0.hop.body = body }
            if cache.configuration.bodyKeying.applies(to: request) { return beginKeyed(caller, body: body) }
        }
        let hop = state.withLock { $0.hop }
        let key = !hop.credentialed || cache.hasPartitionSecret ? try? binding.key(for: hop.request) : nil
        if let key, case .answered(let entry, let other) = cache.lookupImmediately(key, headers: hop.headers) {
            return caller.delivery.inline { start(key: key, entry: entry, otherVariant: other) }
        }
        prepare(caller) {
            cache.ioQueue(for: hop.key.url).async {
                guard let key = key ?? (try? self.binding.key(for: hop.request)) else {
                    // The store cannot give the partition secret: this credentialed request can
                    // be neither looked up nor stored; it goes to the network untouched (under
                    // `only-if-cached`, a 504).
                    return self.start(key: hop.key, entry: nil, otherVariant: false, storeUnavailable: true)
                }
                let (entry, other) = self.cache.lookup(key, headers: hop.headers)
                self.start(key: key, entry: entry, otherVariant: other)
            }
        }
    }

    /// Builds the hop's transaction (once) and runs what it decides.
    func start(key: CacheKey, entry: CacheEntry?, otherVariant: Bool?, storeUnavailable: Bool = false) {
        let now = cache.now()
        let actions = state.withLock { state -> [CacheTransaction.Action] in
            guard !state.stopped else { return [] }
            state.hop.key = key
            var context = CacheTransaction.Context(state.hop, role: role, binding: binding)
            if storeUnavailable { context.configuration.storesCredentialedResponses = false }
            var transaction = CacheTransaction(context)
            if let takes = state.callerTakes { transaction.callerTakes(streaming: takes.streaming, asksBeforeStoring: takes.asks) }
            let actions = transaction.start(entry: entry, otherVariant: otherVariant, now: now)
            state.transaction = transaction
            return actions
        }
        guard let caller, !state.withLock({ $0.transaction?.isDone ?? true }) else { return run(actions) }
        if caller.delivery.isInline { return prepare(caller) { run(actions) } }
        preparing.wait()
        prepareForNetwork(caller)
        run(actions)
    }

    /// On the task's work queue: runs `handOff`, which hands the request on to another thread,
    /// then reads how the caller takes an answer (`prepareForNetwork`), so that the reflection
    /// overlaps that thread's start instead of delaying it. That thread waits on `preparing`
    /// before it needs the answer.
    func prepare(_ caller: Caller, after handOff: () -> Void) {
        guard state.withLock({ $0.callerTakes == nil }) else { return handOff() }
        preparing.enter()
        handOff()
        prepareForNetwork(caller)
        preparing.leave()
    }

    /// Before an answer comes from the network: how the caller takes it, read on the task's
    /// work queue, once, and told to the transaction.
    func prepareForNetwork(_ caller: Caller) {
        guard state.withLock({ $0.callerTakes == nil }) else { return }
        let (streaming, asks) = caller.prepareForNetwork()
        state.withLock { state in
            state.callerTakes = (streaming, asks)
            state.transaction?.callerTakes(streaming: streaming, asksBeforeStoring: asks)
        }
    }

    // MARK: - Inputs

    /// The caller's task was resumed after a suspension: what waited goes to it now.
    func resume() {
        state.withLock { $0.direct }?.resume()
        caller?.delivery.resume()
    }

    /// The caller stopped (`stopLoading`): nothing reaches it any more; the request in flight
    /// is cancelled unless others wait on its answer, for whom it goes on.
    func stop() {
        caller?.delivery.stop()
        // Sent on the caller's own task, the request ends with it: nothing can go on for others.
        let direct = state.withLock { $0.direct }.flatMap { $0.isLive ? $0 : nil }
        if let task = caller?.facts?.task { direct?.cancel(task: task) }
        let flights = cache.flights
        let (actions, flight, wasAsking) = state.withLock { state -> ([CacheTransaction.Action], Flight?, Bool) in
            state.stopped = true
            let wasAsking = state.transaction?.isAskingDelegate ?? false
            var othersWait = false
            if case .leading(let key) = state.flight, direct == nil { othersWait = flights.followers(of: key) > 0 }
            let actions = othersWait ? state.transaction?.detach() : state.transaction?.cancel()
            let flight = state.flight
            if case .waiting = flight { state.flight = nil }
            return (actions ?? [], flight, wasAsking)
        }
        if case .waiting(let key) = flight { flights.leave(key, self) }
        run(actions)
        // Cancelled while its delegate was asked whether to store, the transaction ends with no
        // action that would end its flight: those waiting on it go on without it.
        if wasAsking { endFlightAndClaim() }
    }

    /// Another request's answer, after this one waited for it.
    /// - Parameter readStore: the leader stored an entry whose body it wrote to the store: it
    ///   is read from there, under this exchange's own key and fields.
    func collapsedResult(_ entry: CacheEntry?, readStore: Bool = false) {
        if readStore {
            let hop = state.withLock { $0.hop }
            return cache.ioQueue(for: hop.key.url).async {
                self.collapsedResult(self.cache.lookup(hop.key, headers: hop.headers).entry)
            }
        }
        let actions = state.withLock { state -> [CacheTransaction.Action] in
            state.flight = nil
            guard !state.stopped, let actions = state.transaction?.collapsed(into: entry) else { return [] }
            state.resentAfterWaiting = actions.contains { if case .forward = $0 { true } else { false } }
            return actions
        }
        run(actions)
    }

    // MARK: - The executor

    /// Queues actions and performs them in order: one thread at a time drains an exchange's
    /// actions; one that needs store I/O moves the rest of the drain to the key's I/O queue.
    func run(_ actions: [CacheTransaction.Action]) {
        guard !actions.isEmpty else { return }
        let start = state.withLock { state -> Bool in
            state.pending += actions
            if state.draining { return false }
            state.draining = true
            return true
        }
        if start { drain() }
    }

    private func drain() {
        while true {
            let next = state.withLock { state -> CacheTransaction.Action? in
                if state.pending.isEmpty {
                    state.draining = false
                    return nil
                }
                return state.pending.removeFirst()
            }
            guard let next else { return }
            if next.writesToStore && !cache.storeIsInMemory && !cache.isOnIOQueue {
                cache.ioQueue(for: state.withLock { $0.hop.key.url }).async {
                    self.perform(next)
                    self.drain()
                }
                return
            }
            perform(next)
        }
    }
}

extension CacheTransaction.Action {
    /// Whether performing the action writes to (or removes from) the store.
    var writesToStore: Bool {
        switch self {
        case .store, .storeInMemory, .remove, .invalidate, .openWriter, .appendToWriter, .commitWriter, .discardWriter: true
        default: false
        }
    }
}

extension CacheTransaction.Context {
    /// The context of a hop's transaction under `binding`, for `role`.
    init(_ hop: Hop, role: Exchange.Role, binding: ProtocolBinding) {
        let cache = binding.engine
        let transactionRole: CacheTransaction.Role
        switch role {
        case .caller: transactionRole = .foreground(streaming: false)
        case .refresh(let previous): transactionRole = .refresh(previous: previous)
        }
        self.init(request: hop.request, headers: hop.headers, key: hop.key, configuration: cache.configuration,
                  role: transactionRole, maxEntrySize: cache.store.maxEntrySize, credentialed: hop.credentialed,
                  entryWindows: cache.windowsSetAhead(for: hop.key))
        keyedBody = hop.bodyDigest != nil
    }
}
