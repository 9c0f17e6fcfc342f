import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Carries out one request's transaction: looks the entry up, feeds the transaction what the
/// network reports, and performs the actions it returns, in order, on whatever thread they
/// arrive, never doing store I/O on Foundation's shared URLSession queue.
///
/// A foreground exchange answers a caller through its `Delivery`; it also follows redirects
/// and answers authentication challenges the way Foundation's own HTTP class would, asking the
/// caller's delegate. A refresh exchange has no caller.
final class Exchange: ForwardObserver, @unchecked Sendable {
    /// One request in the exchange: the caller's, or one it led to (a redirect, a retry with
    /// credentials).
    struct Hop: Sendable {
        var request: URLRequest
        var headers: RequestHeaders
        var key: CacheKey
        var credentialed: Bool
        var body: ForwardingBody
    }

    /// The body a hop sends.
    enum ForwardingBody: @unchecked Sendable {
        case none
        case data(Data)
        case file(URL)
        case stream(InputStream)
        /// Not known yet: the caller's delegate supplies it (`needNewBodyStream`).
        case fromDelegate
    }

    /// The caller's task, and what only reflection on Foundation's internals tells about it:
    /// its session, how it takes its body, the delegate Foundation would ask about it
    /// (redirects, challenges, body streams) and the one it reports upload progress to.
    ///
    /// Read once, on the task's work queue (in `startLoading`), where the session's registry is
    /// consistent, and only when the answer is to come from the network: a hit needs none of it
    /// and reflection is most of what a request would cost.
    final class Outer: @unchecked Sendable {
        let task: URLSessionTask
        private let lock = NSLock()
        private var loaded = false
        private var _session: URLSession?
        private var _streaming = false
        private var registration: TaskIntrospection.Registration?

        init(task: URLSessionTask, session: URLSession?) {
            self.task = task
            _session = session
        }

        /// Reads the task's session, and whether it takes its body in chunks (the session's
        /// registry is read only for a session whose delegate takes data). Call it on the
        /// task's work queue.
        func load() {
            lock.withLock {
                guard !loaded else { return }
                loaded = true
                if _session == nil { _session = TaskIntrospection.session(of: task) }
                if let session = _session {
                    let found = TaskIntrospection.registration(of: task, session: session)
                    registration = found
                    _streaming = found.delivery == .delegate
                }
            }
        }

        /// The delegate Foundation would ask before storing a data task's answer
        /// (`willCacheResponse`): the one given to `data(for:delegate:)`, else the task's own,
        /// else the session's, when it is a data delegate. Read after `load()`.
        var cacheDelegate: URLSessionDataDelegate? {
            guard task is URLSessionDataTask, !(task is URLSessionUploadTask) else { return nil }
            return lock.withLock { registration?.delegate } as? URLSessionDataDelegate
        }

        /// The delegates the session registered for the task, read once; on the task's work
        /// queue when the caller is not on it already (`onWorkQueue`), where the registry is
        /// consistent.
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

        var session: URLSession? { lock.withLock { _session } }
        var streaming: Bool { lock.withLock { _streaming } }

        /// The delegate Foundation would ask about the task's redirects, challenges and body
        /// stream.
        func delegate(onWorkQueue: Bool) -> URLSessionTaskDelegate? { registered(onWorkQueue: onWorkQueue).delegate }
        /// The delegate the task's upload progress goes to.
        func progressDelegate(onWorkQueue: Bool) -> URLSessionTaskDelegate? {
            registered(onWorkQueue: onWorkQueue).progressDelegate
        }
    }

    let binding: ProtocolBinding
    let cache: HTTPCache
    private let delivery: Delivery?
    let outer: Outer?
    let state: Mutex<State>

    struct State {
        var transaction: CacheTransaction
        var hop: Hop
        var forwardID: Int?
        var forwardTask: UncheckedBox<URLSessionDataTask>?
        var stopped = false
        var pending: [CacheTransaction.Action] = []
        var draining = false
        var held: Held?
        var redirects = 0
        var challenges = 0
        var lastCredential: (space: URLProtectionSpace, credential: URLCredential)?
        var credentialToSave: (space: URLProtectionSpace, credential: URLCredential)?
        /// The key of the flight this exchange leads (others wait for its answer).
        var flight: CacheKey?
        /// The key of the flight this exchange waits for.
        var waitingOn: CacheKey?
        var stored: CacheEntry?
        var refreshClaim: CacheKey?
    }

    /// A response held back from the caller until a redirect or a challenge is decided.
    struct Held {
        enum Kind { case redirect(URLRequest), challenge }
        var kind: Kind
        var response: HTTPURLResponse
        var body = Data()
    }

    private init(binding: ProtocolBinding, hop: Hop, role: CacheTransaction.Role, delivery: Delivery?, outer: Outer?) {
        self.binding = binding
        cache = binding.cache
        self.delivery = delivery
        self.outer = outer
        state = Mutex(State(transaction: CacheTransaction(Self.context(hop, role: role, binding: binding)), hop: hop))
    }

    private static func context(_ hop: Hop, role: CacheTransaction.Role, binding: ProtocolBinding) -> CacheTransaction.Context {
        CacheTransaction.Context(request: hop.request, headers: hop.headers, key: hop.key, configuration: binding.cache.configuration,
                                 role: role, maxEntrySize: binding.cache.store.maxEntrySize, credentialed: hop.credentialed,
                                 entryWindows: binding.cache.windowsSetAhead(for: hop.key))
    }

    // MARK: - Starting

    /// An exchange answering a caller. Made on Foundation's shared queue, in `startLoading`;
    /// `begin()` starts it.
    convenience init(request: URLRequest, task: URLSessionTask?, session: URLSession?, binding: ProtocolBinding, delivery: Delivery) {
        let headers = binding.keys.headers(request)
        let hop = Hop(request: request, headers: headers, key: CacheKey(url: request.url ?? URL(fileURLWithPath: "/")),
                      credentialed: binding.keys.isCredentialed(headers), body: .none)
        self.init(binding: binding, hop: hop, role: .foreground(streaming: false), delivery: delivery,
                  outer: task.map { Outer(task: $0, session: session) })
    }

    /// Before an answer comes from the network: what the caller's task is (on its work queue),
    /// and so whether its body goes in chunks.
    private func prepareForNetwork() {
        guard let outer, let delivery else { return }
        outer.load()
        let streaming = outer.streaming
        let asks = outer.cacheDelegate != nil
        state.withLock { state in
            state.transaction.deliverInChunks(streaming)
            state.transaction.context.asksDelegateBeforeStoring = asks
        }
        if streaming, let session = outer.session { delivery.streamToDelegate(session: session) }
    }

    /// Derives the key, looks the entry up and starts the transaction. A hit from a store
    /// that answers from memory is served right here, on the caller's queue; anything that
    /// needs I/O (a store read, the partition secret) moves to the cache's I/O queue.
    func begin() {
        let hop = state.withLock { $0.hop }
        let method = hop.request.httpMethod?.uppercased() ?? "GET"
        if method != "GET" && method != "HEAD" {
            guard let body = Self.body(of: hop.request, task: outer?.task) else {
                delivery?.fail(CachingError.uploadBodyUnavailable)
                return
            }
            state.withLock { $0.hop.body = body }
        }
        if !hop.credentialed || cache.hasPartitionSecret, let key = try? binding.key(for: hop.request),
           case .answered(let entry, let other) = cache.lookupImmediately(key, headers: hop.headers) {
            // On the task's work queue already: a hit is delivered in place.
            let start = {
                let actions = self.makeTransaction(key: key, entry: entry, otherVariant: other)
                if !self.state.withLock({ $0.transaction.isDone }) { self.prepareForNetwork() }
                self.run(actions)
            }
            return delivery.map { $0.inline(start) } ?? start()
        }
        prepareForNetwork()
        cache.ioQueue(for: hop.key.url).async {
            guard let key = try? self.binding.key(for: hop.request) else {
                // The store cannot give the partition secret: this credentialed request can be
                // neither looked up nor stored; it goes to the network untouched.
                return self.startTransaction(key: hop.key, entry: nil, otherVariant: false, storeUnavailable: true)
            }
            let (entry, other) = self.cache.lookup(key, headers: hop.headers)
            self.startTransaction(key: key, entry: entry, otherVariant: other)
        }
    }

    private func startTransaction(key: CacheKey, entry: CacheEntry?, otherVariant: Bool?, storeUnavailable: Bool = false) {
        run(makeTransaction(key: key, entry: entry, otherVariant: otherVariant, storeUnavailable: storeUnavailable))
    }

    private func makeTransaction(key: CacheKey, entry: CacheEntry?, otherVariant: Bool?,
                                 storeUnavailable: Bool = false) -> [CacheTransaction.Action] {
        let now = cache.now()
        return state.withLock { state -> [CacheTransaction.Action] in
            guard !state.stopped else { return [] }
            state.hop.key = key
            var context = Self.context(state.hop, role: state.transaction.context.role, binding: binding)
            context.asksDelegateBeforeStoring = state.transaction.context.asksDelegateBeforeStoring
            if storeUnavailable { context.configuration.storesCredentialedResponses = false }
            state.transaction = CacheTransaction(context)
            return state.transaction.start(entry: entry, otherVariant: otherVariant, now: now)
        }
    }

    /// Refreshes a stale entry in the background, at most once at a time per key in this
    /// process, and across processes as far as the store's claims reach.
    static func refresh(_ previous: CacheEntry, hop: Hop, binding: ProtocolBinding) {
        let cache = binding.cache
        guard cache.beginRefresh(previous.key) else { return }
        cache.ioQueue(for: previous.key.url).async {
            guard cache.store.claimRefresh(of: previous.key, lease: 60) else {
                cache.endRefresh(previous.key)
                return
            }
            var refreshHop = hop
            refreshHop.body = .none
            refreshHop.key = previous.key.primary
            let exchange = Exchange(binding: binding, hop: refreshHop, role: .refresh(previous: previous), delivery: nil, outer: nil)
            exchange.state.withLock { $0.refreshClaim = previous.key }
            exchange.startTransaction(key: refreshHop.key, entry: previous, otherVariant: false)
        }
    }

    /// The body a request sends: its own, else an upload task's, read from the task.
    private static func body(of request: URLRequest, task: URLSessionTask?) -> ForwardingBody? {
        if let data = request.httpBody { return .data(data) }
        if let stream = request.httpBodyStream { return .stream(stream) }
        guard let task, task is URLSessionUploadTask else { return ForwardingBody.none }
        switch TaskIntrospection.uploadBody(of: task) {
        case .none?: return ForwardingBody.none
        case .data(let data)?: return .data(data)
        case .file(let url)?: return .file(url)
        case .stream(let stream)?: return .stream(stream)
        case .fromDelegate?: return .fromDelegate
        case nil: return nil
        }
    }

    // MARK: - Inputs

    /// The caller's task was resumed after a suspension: what waited goes to it now.
    func resume() {
        delivery?.resume()
    }

    /// The caller stopped (`stopLoading`): nothing reaches it any more; the request in flight
    /// is cancelled unless others wait on its answer, for whom it goes on.
    func stop() {
        delivery?.stop()
        let flights = cache.flights
        let (actions, waitingOn) = state.withLock { state -> ([CacheTransaction.Action], CacheKey?) in
            state.stopped = true
            defer { state.waitingOn = nil }
            let othersWait = state.flight.map { flights.followers(of: $0) > 0 } ?? false
            return (othersWait ? state.transaction.detach() : state.transaction.cancel(), state.waitingOn)
        }
        if let waitingOn { cache.flights.leave(waitingOn, self) }
        run(actions)
    }

    func forwardReceived(_ response: HTTPURLResponse, from task: Int) {
        let now = cache.now()
        guard let actions = input(from: task, { $0.head(ResponseHead(response), now: now) }) else { return }
        run(actions)
    }

    func forwardReceived(_ data: Data, from task: Int) {
        guard let actions = input(from: task, { $0.body(data) }) else { return }
        run(actions)
    }

    func forwardCompleted(_ task: Int, error: (any Error)?) {
        let now = cache.now()
        guard let actions = input(from: task, { transaction in
            if let error { return transaction.fail(TransactionError(error), now: now) }
            return transaction.end(now: now)
        }) else { return }
        run(actions)
    }

    func forwardSentBody(_ task: Int, sent: Int64, total: Int64, expected: Int64) {
        guard let outer, let session = outer.session, let delegate = outer.progressDelegate(onWorkQueue: false),
              state.withLock({ $0.forwardID == task }) else { return }
        let box = UncheckedBox((session, delegate, outer.task))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2, didSendBodyData: sent, totalBytesSent: total,
                                   totalBytesExpectedToSend: expected)
        }
    }

    /// Another request's answer, after this one waited for it.
    func collapsedResult(_ entry: CacheEntry?) {
        let actions = state.withLock { state -> [CacheTransaction.Action] in
            state.waitingOn = nil
            return state.stopped ? [] : state.transaction.collapsed(into: entry)
        }
        run(actions)
    }

    /// Feeds an input from the forwarded task `task`; nil if that task is no longer current.
    private func input(from task: Int, _ body: (inout CacheTransaction) -> [CacheTransaction.Action]) -> [CacheTransaction.Action]? {
        state.withLock { state in
            guard state.forwardID == task else { return nil }
            return body(&state.transaction)
        }
    }

    // MARK: - Carrying out actions

    /// Queues actions and performs them in order: one thread at a time performs an
    /// exchange's actions; store I/O moves the rest to the cache's I/O queue.
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
            if needsIO(next) && !cache.isOnIOQueue {
                cache.ioQueue(for: state.withLock { $0.hop.key.url }).async {
                    self.perform(next)
                    self.drain()
                }
                return
            }
            perform(next)
        }
    }

    private func needsIO(_ action: CacheTransaction.Action) -> Bool {
        switch action {
        case .store, .storeInMemory, .remove, .invalidate: !cache.storeIsInMemory
        default: false
        }
    }

    private func perform(_ action: CacheTransaction.Action) {
        let hop = state.withLock { $0.hop }
        switch action {
        case .emit(let kind):
            cache.emit(kind, hop.key, hop.request.url)
        case .serve(let entry, let form, let disposition):
            endFlight()
            serve(entry, form: form, disposition: disposition)
        case .forward(let conditional):
            forward(conditional: conditional, hop: hop)
        case .cancelForward:
            let task = state.withLock { state -> UncheckedBox<URLSessionDataTask>? in
                defer { state.forwardID = nil; state.forwardTask = nil }
                return state.forwardTask
            }
            if let task { binding.control.async { task.value.cancel() } }
            // A retry cancels one request and sends another: the flight and the claim go on.
            if state.withLock({ $0.transaction.isDone }) {
                endFlight()
                endRefreshClaim()
            }
        case .respond(let head, let disposition):
            respond(head, disposition: disposition, hop: hop)
        case .deliver(let data):
            let holding = state.withLock { state -> Bool in
                guard state.held != nil else { return false }
                state.held?.body.append(data)
                return true
            }
            if !holding { delivery?.load(data) }
        case .finish:
            endFlight()
            endRefreshClaim()
            finish()
        case .fail(let error):
            endFlight()
            endRefreshClaim()
            delivery?.fail(error.error)
        case .store(let entry):
            if cache.write(entry) { state.withLock { if $0.stored == nil || entry.key.variant == nil { $0.stored = entry } } }
        case .storeInMemory(let entry):
            if cache.writeInMemory(entry) { state.withLock { if $0.stored == nil || entry.key.variant == nil { $0.stored = entry } } }
        case .askToStore(let entry):
            askToStore(entry)
        case .remove(let key):
            cache.remove(key, url: hop.request.url)
        case .invalidate(let urls):
            for url in urls {
                var request = hop.request
                request.url = url
                request.httpMethod = "GET"
                guard let key = try? binding.key(for: request) else { continue }
                cache.invalidate(key, headers: binding.keys.headers(request), url: url)
            }
        case .refresh(let entry):
            Exchange.refresh(entry, hop: hop, binding: binding)
        }
    }

    private func endRefreshClaim() {
        guard let key = state.withLock({ state -> CacheKey? in
            defer { state.refreshClaim = nil }
            return state.refreshClaim
        }) else { return }
        cache.endRefresh(key)
        cache.ioQueue(for: key.url).async { [cache] in cache.store.releaseRefresh(of: key) }
    }

    private func endFlight() {
        let (flight, stored) = state.withLock { state -> (CacheKey?, CacheEntry?) in
            defer { state.flight = nil }
            return (state.flight, state.stored)
        }
        if let flight { cache.flights.end(flight, entry: stored) }
    }

    // MARK: - Forwarding

    private func forward(conditional: [String: String], hop: Hop) {
        let (plan, leading) = state.withLock { ($0.transaction.pendingPlan, $0.flight == hop.key) }
        // A retry of a request already leading its key's flight goes out again as the leader.
        if delivery != nil, !leading, let plan, plan.store, !plan.passThrough {
            switch cache.flights.join(hop.key, self) {
            case .follower:
                state.withLock { $0.waitingOn = hop.key }
                return
            case .leader:
                state.withLock { $0.flight = hop.key }
            }
        }
        if case .fromDelegate = hop.body { return askDelegateForBody(then: conditional, hop: hop) }
        send(conditional: conditional, hop: hop)
    }

    private func send(conditional: [String: String], hop: Hop) {
        let request = Self.forwardingRequest(from: hop.request, conditional: conditional)
        let body: ForwardingSession.Body
        switch hop.body {
        case .none, .fromDelegate: body = .none
        case .data(let data): body = .data(data)
        case .file(let url): body = .file(url)
        case .stream(let stream): body = .stream(stream)
        }
        let sending = UncheckedBox((request, body))
        // Never create or resume a task synchronously on Foundation's shared URLSession queue,
        // where `startLoading` runs: every session's work queue targets it, so creating a task
        // there waits on the queue the thread already holds, and traps.
        binding.control.async {
            let task = self.binding.forwarding.makeTask(sending.value.0, body: sending.value.1, observer: self)
            // Its answer reaches the caller through blocks on the queue its own transfer runs on.
            self.delivery?.follow(self.binding.forwarding.transferQueue ?? TaskIntrospection.workQueue(of: task))
            let go = self.state.withLock { state -> Bool in
                guard !state.transaction.isDone else { return false }
                state.forwardID = task.taskIdentifier
                state.forwardTask = UncheckedBox(task)
                return true
            }
            if go { task.resume() } else { task.cancel() }
        }
    }

    /// `uploadTask(withStreamedRequest:)`: the caller's delegate supplies the body stream.
    private func askDelegateForBody(then conditional: [String: String], hop: Hop) {
        guard let outer, let session = outer.session, let delegate = outer.delegate(onWorkQueue: delivery?.isInline ?? false) else {
            var hop = hop
            hop.body = .none
            return send(conditional: conditional, hop: hop)
        }
        let box = UncheckedBox((session, delegate, outer.task))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2) { stream in
                let updated = self.state.withLock { state -> Hop in
                    state.hop.body = stream.map(ForwardingBody.stream) ?? .none
                    return state.hop
                }
                self.send(conditional: conditional, hop: updated)
            }
        }
    }

    /// The request as it goes to the network: marked as handled, private fields removed, made
    /// conditional with `conditional`, never answered from Foundation's own cache.
    static func forwardingRequest(from request: URLRequest, conditional: [String: String]) -> URLRequest {
        let mutable = (request as NSURLRequest).mutableCopy() as! NSMutableURLRequest
        for name in HTTPCachingHeaders.allPrivate { mutable.setValue(nil, forHTTPHeaderField: name) }
        for (name, value) in conditional { mutable.setValue(value, forHTTPHeaderField: name) }
        mutable.cachePolicy = .reloadIgnoringLocalCacheData
        mutable.httpBody = nil
        mutable.httpBodyStream = nil
        URLProtocol.setProperty(true, forKey: CachingURLProtocol.handledKey, in: mutable)
        return mutable as URLRequest
    }

    // MARK: - Answering

    private func serve(_ entry: CacheEntry, form: ServeForm, disposition: Disposition) {
        guard delivery != nil else { return }
        let (response, range) = binding.builtResponses.response(for: entry, form: form, disposition: disposition,
                                                               cacheName: cache.configuration.cacheName)
        let body = range.count == entry.body.count ? entry.body : entry.body.subdata(in: range)
        if let kind = interception(for: response) {
            return resolve(Held(kind: kind, response: response, body: body))
        }
        saveCredentialIfUsed()
        delivery?.deliver(response, body: body)
    }

    private func respond(_ head: ResponseHead, disposition: Disposition, hop: Hop) {
        guard delivery != nil else { return }
        let response = HTTPURLResponse(Answers.fromNetwork(head, disposition: disposition, cacheName: cache.configuration.cacheName))
        if let kind = interception(for: response) {
            state.withLock { $0.held = Held(kind: kind, response: response) }
            return
        }
        delivery?.respond(response)
    }

    private func finish() {
        guard delivery != nil else { return }
        if let held = state.withLock({ state -> Held? in
            defer { state.held = nil }
            return state.held
        }) {
            return resolve(held)
        }
        saveCredentialIfUsed()
        delivery?.finish()
    }

    /// Whether a response is held back: a redirect to follow, or a challenge to answer.
    private func interception(for response: HTTPURLResponse) -> Held.Kind? {
        guard outer != nil, (300..<400).contains(response.statusCode) || response.statusCode == 401,
              !state.withLock({ $0.stopped }) else { return nil }
        let hop = state.withLock { $0.hop }
        if let next = Redirects.request(after: ResponseHead(response), from: hop.request) { return .redirect(next) }
        if response.statusCode == 401, Challenges.parse(response.value(forHTTPHeaderField: "WWW-Authenticate")) != nil {
            return .challenge
        }
        return nil
    }

    private func resolve(_ held: Held) {
        // A redirect or a challenge asks the caller's delegate: know it (a hit answered inside
        // `startLoading` has not read it yet, and is still on the task's work queue here).
        outer?.load()
        switch held.kind {
        case .redirect(let next): askAboutRedirect(held, next: next)
        case .challenge: answerChallenge(held)
        }
    }

    /// Delivers a held response as it is (a 401 without the field that would make Foundation
    /// start its own challenge, which on 6.3.1 can wait forever).
    private func deliverHeld(_ held: Held) {
        var response = held.response
        if held.response.statusCode == 401 {
            var head = ResponseHead(held.response)
            head.headers = head.headers.filter { !$0.key.equalsIgnoringASCIICase("WWW-Authenticate") }
            response = HTTPURLResponse(head)
        }
        delivery?.deliver(response, body: held.body)
    }

    // MARK: - Redirects

    private func askAboutRedirect(_ held: Held, next: URLRequest) {
        // As Foundation: the 21st redirect fails before the delegate is asked about it.
        let tooMany = state.withLock { state -> Bool in
            state.redirects += 1
            return state.redirects > 20
        }
        if tooMany {
            return delivery?.fail(URLError(.httpTooManyRedirects, userInfo: [NSLocalizedDescriptionKey: "too many HTTP redirects"])) ?? ()
        }
        guard let outer, let session = outer.session, let delegate = outer.delegate(onWorkQueue: delivery?.isInline ?? false) else {
            return follow(next, after: held)
        }
        let box = UncheckedBox((session, delegate, outer.task, held.response))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2, willPerformHTTPRedirection: box.value.3, newRequest: next) { request in
                if let request { self.follow(request, after: held) } else { self.deliverHeld(held) }
            }
        }
    }

    private func follow(_ request: URLRequest, after held: Held) {
        var next = request
        let previous = state.withLock { $0.hop }
        // 303, and 301/302 after a POST, change the method to GET and drop the body.
        let keepsBody = (next.httpMethod?.uppercased() ?? "GET") == (previous.request.httpMethod?.uppercased() ?? "GET")
            && [307, 308].contains(held.response.statusCode)
        if !keepsBody { next.httpBody = nil }
        var body = keepsBody ? previous.body : .none
        // A stream is spent: ask the caller's delegate for a new one (`needNewBodyStream`).
        if case .stream = body { body = .fromDelegate }
        startHop(next, body: body)
    }

    /// Starts the next request of the exchange (after a redirect, or with credentials): a
    /// transaction of its own, with its own key and lookup.
    private func startHop(_ request: URLRequest, body: ForwardingBody) {
        cache.ioQueue(for: request.url?.absoluteString ?? "").async {
            let headers = self.binding.keys.headers(request)
            let credentialed = self.binding.keys.isCredentialed(headers)
            let role = self.state.withLock { $0.transaction.context.role }
            guard let key = try? self.binding.key(for: request) else {
                return self.delivery?.fail(CachingError.storeUnavailableForCredentials) ?? ()
            }
            let hop = Hop(request: request, headers: headers, key: key, credentialed: credentialed, body: body)
            let (entry, other) = self.cache.lookup(key, headers: headers)
            let actions = self.state.withLock { state -> [CacheTransaction.Action] in
                guard !state.stopped else { return [] }
                state.hop = hop
                state.forwardID = nil
                state.forwardTask = nil
                state.held = nil
                state.stored = nil
                var context = Self.context(hop, role: role, binding: self.binding)
                context.asksDelegateBeforeStoring = state.transaction.context.asksDelegateBeforeStoring
                state.transaction = CacheTransaction(context)
                return state.transaction.start(entry: entry, otherVariant: other, now: self.cache.now())
            }
            self.run(actions)
        }
    }

    // MARK: - Authentication

    private func answerChallenge(_ held: Held) {
        guard let outer, let challenge = Challenges.parse(held.response.value(forHTTPHeaderField: "WWW-Authenticate")),
              let url = held.response.url, let host = url.host, let scheme = url.scheme else { return deliverHeld(held) }
        let space = URLProtectionSpace(host: host, port: url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme,
                                       realm: challenge.realm, authenticationMethod: challenge.method)
        let (failures, last) = state.withLock { state -> (Int, (space: URLProtectionSpace, credential: URLCredential)?) in
            defer { state.challenges += 1 }
            return (state.challenges, state.lastCredential)
        }
        var proposed: URLCredential?
        if let storage = credentialStorage {
            proposed = Challenges.storedCredential(in: storage, for: space)
        }
        if let candidate = proposed, last?.credential == candidate { proposed = nil }
        let offered = proposed
        guard let session = outer.session, let delegate = outer.delegate(onWorkQueue: delivery?.isInline ?? false) else {
            if let proposed { return retry(with: proposed, space: space, held: held) }
            return deliverHeld(held)
        }
        let authentication = URLAuthenticationChallenge(protectionSpace: space, proposedCredential: proposed,
                                                        previousFailureCount: failures, failureResponse: held.response,
                                                        error: nil, sender: ChallengeSender())
        let box = UncheckedBox((session, delegate, outer.task, authentication))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2, didReceive: box.value.3) { disposition, credential in
                switch disposition {
                case .useCredential:
                    if let credential { self.retry(with: credential, space: space, held: held) } else { self.deliverHeld(held) }
                case .performDefaultHandling:
                    if let offered { self.retry(with: offered, space: space, held: held) } else { self.deliverHeld(held) }
                case .cancelAuthenticationChallenge, .rejectProtectionSpace:
                    let task = UncheckedBox(outer.task)
                    DispatchQueue.global().async { task.value.cancel() }
                @unknown default:
                    self.deliverHeld(held)
                }
            }
        }
    }

    /// The caller's credential storage: its session's, as Foundation uses it.
    private var credentialStorage: URLCredentialStorage? {
        if let session = outer?.session { return session.configuration.urlCredentialStorage }
        return binding.credentialStorage.value
    }

    /// Sends the request again with a credential (Basic, as Foundation does on Linux).
    private func retry(with credential: URLCredential, space: URLProtectionSpace, held: Held) {
        guard space.authenticationMethod == NSURLAuthenticationMethodHTTPBasic else { return deliverHeld(held) }
        let token = Data("\(credential.user ?? ""):\(credential.password ?? "")".utf8).base64EncodedString()
        let (request, body) = state.withLock { state -> (URLRequest, ForwardingBody) in
            state.lastCredential = (space, credential)
            state.credentialToSave = (space, credential)
            return (state.hop.request, state.hop.body)
        }
        var next = request
        next.setValue("Basic \(token)", forHTTPHeaderField: "Authorization")
        startHop(next, body: body)
    }

    /// After an answer that needed a credential, keeps it in the caller's credential storage,
    /// as Foundation does.
    private func saveCredentialIfUsed() {
        guard let saved = state.withLock({ state -> (space: URLProtectionSpace, credential: URLCredential)? in
            defer { state.credentialToSave = nil }
            return state.credentialToSave
        }), let storage = credentialStorage, let task = outer?.task else { return }
        storage.set(saved.credential, for: saved.space, task: task)
    }
}

/// A challenge's sender: Foundation's own on Linux ignores these calls too (the delegate's
/// completion handler carries the answer).
private final class ChallengeSender: NSObject, URLAuthenticationChallengeSender, @unchecked Sendable {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
