import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request's life in the cache, from the stored entry to the network's answer, as a pure
/// state machine.
///
/// The plumbing feeds it inputs — the lookup's result (`start`), the response head, body
/// chunks, the end, an error, a cancellation — and carries out the actions it returns, in
/// order. Foreground requests and background refreshes drive the same machine; only the role
/// differs. Nothing here touches a socket, a store or a clock.
///
/// Two rules hold by construction: a stored entry is removed only when it is of no more use or
/// when a successful answer supersedes it (never on an error, a 5xx, an unexpected 304 or 206,
/// or a cancellation), and store writes come before the caller's `finish`, so the caller's next
/// request finds them.
struct CacheTransaction {
    /// Whom the transaction answers.
    enum Role: Sendable, Equatable {
        /// A caller: the body in chunks as they arrive (`streaming`, for delegate-based tasks),
        /// or whole at the end (completion handlers and `async data(for:)`).
        case foreground(streaming: Bool)
        /// A background refresh of a stale entry: no caller; events say how it went.
        case refresh(previous: CacheEntry)
    }

    /// What stays fixed for the whole transaction.
    struct Context: Sendable {
        /// The request as the caller sent it.
        var request: URLRequest
        /// Its fields as they reach the network (session headers included).
        var headers: RequestHeaders
        /// The key of the entry stored under the request's URL.
        var key: CacheKey
        var configuration: CacheConfiguration
        var role: Role
        /// The largest entry the store keeps.
        var maxEntrySize: Int = .max
        /// Whether the request carries credentials that partition it.
        var credentialed = false
        /// Windows set ahead of time for this key (`HTTPCache.setWindows`).
        var entryWindows: CacheWindows?
        /// Whether the caller's delegate is asked before its answer is stored
        /// (`willCacheResponse`): a data task whose delegate Foundation would ask.
        var asksDelegateBeforeStoring = false
        /// Whether the request's body is part of its key (`BodyKeying`): it is cached as a GET is.
        var keyedBody = false

        /// The method storability is judged for: GET for a keyed body.
        var storageMethod: String { keyedBody ? "GET" : request.sentMethod }
        /// Whether a stored entry may be revalidated with a conditional request: not for a keyed
        /// body sent with a method other than QUERY (the origin would answer 412, never 304).
        var sendsValidators: Bool { !keyedBody || request.sentMethod == "QUERY" }
    }

    /// What the plumbing does, in order.
    enum Action: Sendable, Equatable {
        /// Report an event.
        case emit(CacheEvent.Kind)
        /// Answer the caller from an entry: head, the body (or part of it), finish.
        case serve(CacheEntry, ServeForm, Disposition)
        /// Send the request to the network, made conditional with these fields (none: as is).
        case forward(conditional: [String: String])
        /// Stop the request in flight: its answer is no longer wanted.
        case cancelForward
        /// Give the caller the network's response head, with these status fields.
        case respond(ResponseHead, Disposition)
        /// Give the caller body bytes.
        case deliver(Data)
        /// The transaction is over: end the caller's response (for a refresh, give its claim back).
        case finish
        /// Fail the caller.
        case fail(TransactionError)
        /// Begin writing the answer to the store, under this key, as its body arrives.
        case openWriter(CacheKey)
        /// Write the next part of the body to the store.
        case appendToWriter(Data)
        /// Store these entries (metadata; their bodies are empty) with the body written,
        /// `bodyBytes` long; in the store's memory only when `inMemoryOnly`.
        case commitWriter([CacheEntry], bodyBytes: Int, inMemoryOnly: Bool)
        /// Leave nothing of the body written so far.
        case discardWriter
        /// Write an entry.
        case store(CacheEntry)
        /// Write an entry to the store's memory only, never to a disk or a server.
        case storeInMemory(CacheEntry)
        /// Ask the caller's delegate whether, and what, to store (`willCacheResponse`), then
        /// feed its answer to `delegateAnswered`.
        case askToStore(CacheEntry)
        /// Remove the entry stored under a key.
        case remove(CacheKey)
        /// Remove the stored GETs of these URLs, with the request's credentials.
        case invalidate([URL])
        /// Refresh this entry in the background.
        case refresh(CacheEntry)
    }

    enum State {
        case idle
        case awaitingHead(Pending)
        case receiving(Receiving)
        /// The whole answer is in; the caller's delegate decides what is stored.
        case askingDelegate(Asking)
        case done
    }

    struct Pending {
        var plan: ForwardPlan
        var entry: CacheEntry?
        var conditional: [String: String]
        var retriedUnconditionally = false
    }

    struct Receiving {
        var head: ResponseHead
        var plan: ForwardPlan
        var storing: Bool
        /// The bytes a partial entry lacks (`completesPart`): kept from the caller, who gets the whole.
        var completing = false
        var body = Data()
        var previous: CacheEntry?
        /// The body goes to a store writer as it arrives and is not kept here (nobody needs it
        /// whole: a delegate takes it in chunks, or there is no caller).
        var spooling = false
        /// The bytes of the body so far.
        var bodyBytes = 0
        /// The checksum of a spooled body, to tell a refresh whether the body changed.
        var checksum = BodyChecksum.Running()
        /// Whether `body` has been given its room (`append`).
        var sized = false
    }

    struct Asking {
        var entry: CacheEntry
        var body: Data
        /// The body was written to a store writer, this many bytes: `body` is empty.
        var spooledBytes: Int?
        /// The stored entry the answer replaces, if any.
        var previous: CacheEntry?
    }

    var context: Context
    var state = State.idle
    /// Whether the caller went away and the answer goes on for others (`detach()`).
    var detached = false
    /// When the request awaited was sent (RFC 9111's request_time, `sent(at:)`): what it
    /// brings is stored as of then, so the time the answer took counts in its age (4.2.3).
    var sentAt: Date?

    init(_ context: Context) {
        self.context = context
    }

    var streaming: Bool {
        if case .foreground(let streaming) = context.role { return streaming }
        return false
    }

    var isRefresh: Bool {
        if case .refresh = context.role { return true }
        return false
    }

    /// Whether the transaction has ended: later inputs are ignored.
    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Whether the caller's delegate is being asked whether to store the answer.
    var isAskingDelegate: Bool {
        if case .askingDelegate = state { return true }
        return false
    }

    /// Whether the answer being received is to be stored (so far: it may still grow too large).
    var storesAnswer: Bool {
        if case .receiving(let receiving) = state { return receiving.storing }
        return false
    }

    /// The plan of the request in flight, while one is.
    var pendingPlan: ForwardPlan? {
        if case .awaitingHead(let pending) = state { return pending.plan }
        return nil
    }

    // MARK: - Inputs

    /// How the caller takes an answer from the network, learnt only when it is to come from
    /// there (finding out costs time a hit should not spend): its body in chunks as they arrive
    /// or whole, and whether its delegate is asked before the answer is stored.
    mutating func callerTakes(streaming: Bool, asksBeforeStoring: Bool) {
        guard case .foreground = context.role, !detached else { return }
        context.role = .foreground(streaming: streaming)
        context.asksDelegateBeforeStoring = asksBeforeStoring
    }

    /// The lookup is done: decide, and answer from the entry or go to the network.
    /// - Parameters:
    ///   - entry: the stored entry that matches the request, its `Vary` included.
    ///   - otherVariant: whether something is stored under the URL for other `Vary` values;
    ///     nil when the store could not be read.
    mutating func start(entry: CacheEntry?, otherVariant: Bool? = false, now: Date) -> [Action] {
        guard case .idle = state else { return [] }
        if case .refresh(let previous) = context.role {
            let validators = context.sendsValidators ? Validation.conditionalHeaders(for: previous) : [:]
            let plan = ForwardPlan(status: .stale, reason: .stale, validate: !validators.isEmpty, store: true)
            state = .awaitingHead(Pending(plan: plan, entry: previous, conditional: validators))
            return [.forward(conditional: validators)]
        }
        let action = CacheDecision.decide(request: context.request, headers: context.headers, entry: entry,
                                          otherVariant: otherVariant, credentialed: context.credentialed,
                                          keyedBody: context.keyedBody, now: now,
                                          configuration: context.configuration)
        switch action {
        case .fail(let error) where CacheDecision.answersGatewayTimeout(
            error, policy: CacheDecision.policy(for: context.request, configuration: context.configuration)):
            state = .done
            let head = ResponseHead(statusCode: 504, headers: ["Content-Length": "0"],
                                    url: context.request.url ?? URL(fileURLWithPath: "/"))
            return [.emit(.served(.miss)), .respond(head, CacheDecision.gatewayTimeout), .finish]
        case .fail(let error):
            state = .done
            return (error == .notCached ? [.emit(.served(.miss))] : []) + [.fail(.caching(error))]
        case .serve(let plan):
            state = .done
            guard let entry else { return [.fail(.caching(.notCached))] } // the decision serves only what exists
            var actions: [Action] = [.emit(.served(plan.status))]
            if plan.refresh { actions.append(.refresh(entry)) }
            actions.append(.serve(entry, plan.form, Disposition(status: plan.status, hit: true, ttl: plan.ttl, age: plan.age,
                                                                noVarySearch: answersThroughNoVarySearch(entry))))
            return actions
        case .forward(let plan):
            var actions: [Action] = []
            if plan.discardEntry, let entry { actions.append(.remove(entry.key)) }
            var conditional = plan.validate ? entry.map(Validation.conditionalHeaders(for:)) ?? [:] : [:]
            if plan.completesPart { conditional = entry.flatMap { PartialEntries.completionFields(for: $0, now: now) } ?? [:] }
            state = .awaitingHead(Pending(plan: plan, entry: plan.discardEntry ? nil : entry, conditional: conditional))
            actions.append(.forward(conditional: conditional))
            return actions
        }
    }

    /// Another request for the same key was in flight and this one waited for it: `entry` is
    /// what it stored (nil if it stored nothing). Serve it if it matches the request, else go
    /// to the network after all.
    mutating func collapsed(into entry: CacheEntry?) -> [Action] {
        guard case .awaitingHead(let pending) = state, !isRefresh else { return [] } // a refresh never waits on others
        guard let entry, Vary.matches(entry, context.headers) else { return [.forward(conditional: pending.conditional)] }
        state = .done
        let disposition = Disposition(status: pending.plan.status, forward: pending.plan.reason, forwardStatus: entry.statusCode,
                                      stored: true, collapsed: true, age: 0)
        return [.emit(.served(pending.plan.status)), .emit(.collapsed), .serve(entry, .whole, disposition)]
    }

    /// The network's response head arrived.
    mutating func head(_ head: ResponseHead, now: Date) -> [Action] {
        guard case .awaitingHead(let pending) = state else { return [] }
        let plan = pending.plan
        if plan.completesPart { return completionHead(head, pending, now: now) }
        if plan.storesPart { return partHead(head, pending, now: now) }
        if plan.passThrough { return headUpdate(head, pending, now: now) + passThrough(head, plan: plan) }
        if head.statusCode == 304 { return notModified(head, pending, now: now) }
        if head.statusCode == 206 { return badResponse(head, pending, now: now) }
        if head.statusCode >= 500 {
            if isRefresh {
                state = .done
                return [.cancelForward, .finish, .emit(.refreshFailed(reason: "the origin answered \(head.statusCode); the stale entry was kept"))]
            }
            if plan.fallback, let entry = pending.entry { return fallback(entry, status: head.statusCode, now: now) }
        }
        return receive(head, pending, now: now)
    }

    /// Body bytes arrived.
    mutating func body(_ chunk: Data) -> [Action] {
        guard case .receiving(var receiving) = state else { return [] }
        // Take the buffer out of `state` first: while both hold it, appending copies it whole.
        state = .idle
        var actions: [Action] = []
        receiving.bodyBytes += chunk.count
        if receiving.storing && receiving.bodyBytes > context.maxEntrySize {
            receiving.storing = false
            actions.append(.emit(.notStored(.tooLarge(bytes: receiving.bodyBytes, limit: context.maxEntrySize))))
            if receiving.spooling { actions.append(.discardWriter) }
            receiving.spooling = false
            if detached {
                state = .done // nobody to deliver to, nothing to store
                return actions + [.cancelForward]
            }
            if streaming || isRefresh { receiving.body = Data() }
        }
        if receiving.spooling {
            chunk.withUnsafeBytes { receiving.checksum.update($0) }
            actions.append(.appendToWriter(chunk))
        } else if receiving.storing || (!streaming && !isRefresh) {
            Self.append(chunk, to: &receiving.body, sized: &receiving.sized, expecting: receiving.head.contentLength)
        }
        state = .receiving(receiving)
        if streaming && !receiving.completing { actions.insert(.deliver(chunk), at: 0) }
        return actions
    }

    /// Appends a chunk without copying more than it must: the first chunk is kept as it is (a
    /// body that arrives whole is never copied), and the buffer is sized once from
    /// `Content-Length` when a second chunk comes.
    private static func append(_ chunk: Data, to body: inout Data, sized: inout Bool, expecting length: Int?) {
        if body.isEmpty { return body = chunk }
        if !sized, let length, length >= body.count + chunk.count, length <= 1 << 30 {
            var buffer = Data(capacity: length)
            buffer.append(body)
            body = buffer
        }
        sized = true
        body.append(chunk)
    }

    /// The body ended.
    mutating func end(now: Date) -> [Action] {
        guard case .receiving(let receiving) = state else { return [] }
        state = .done
        var actions: [Action] = []
        var bodyChanged: Bool?
        if receiving.completing { return endCompletion(receiving, now: now) }
        if receiving.storing && receiving.plan.storesPart && receiving.head.statusCode == 206 { return endPart(receiving, now: now) }
        if receiving.storing {
            let entry = makeEntry(receiving.head, body: receiving.body, now: now)
            if var chosen = context.configuration.responseCacher.apply(context.request, entry) {
                if chosen.key == entry.key { chosen.key = storageKey(chosen.header) } // its fields may have changed
                chosen.usefulUntil = CacheDecision.usefulUntil(chosen, configuration: context.configuration)
                let spooled = receiving.spooling ? receiving.bodyBytes : nil
                if context.asksDelegateBeforeStoring, case .foreground = context.role {
                    state = .askingDelegate(Asking(entry: chosen, body: receiving.body, spooledBytes: spooled,
                                                   previous: receiving.previous))
                    return [.askToStore(chosen)]
                }
                actions += storing(chosen, spooledBytes: spooled, replacing: receiving.previous)
                bodyChanged = Self.bodyChanged(receiving, from: context.role)
            } else {
                actions.append(.emit(.notStored(.declinedByCacher)))
                if receiving.spooling { actions.append(.discardWriter) }
            }
        }
        return actions + ending(receiving.head, body: receiving.body, bodyChanged: bodyChanged)
    }

    /// For a refresh: whether the body stored differs from the stale entry's.
    private static func bodyChanged(_ receiving: Receiving, from role: Role) -> Bool? {
        guard case .refresh(let previous) = role else { return nil }
        guard receiving.spooling else { return receiving.body != previous.body }
        return receiving.bodyBytes != previous.body.count
            || receiving.checksum.finish() != previous.body.withUnsafeBytes { BodyChecksum.checksum($0) }
    }

    /// The network failed (before or during the body).
    mutating func fail(_ error: TransactionError, now: Date) -> [Action] {
        switch state {
        case .awaitingHead(let pending):
            state = .done
            if error.isCancellation { return [] }
            if isRefresh { return [.finish, .emit(.refreshFailed(reason: error.description))] }
            if pending.plan.fallback, let entry = pending.entry {
                return fallback(entry, status: nil, now: now, detail: error.description,
                                form: revalidatedForm(entry, plan: pending.plan) ?? .whole)
            }
            return [.emit(.served(pending.plan.status)), .fail(error)]
        case .receiving(let receiving):
            state = .done
            let discard: [Action] = receiving.spooling ? [.discardWriter] : []
            if error.isCancellation { return discard }
            return discard + (isRefresh ? [.finish, .emit(.refreshFailed(reason: error.description))] : [.fail(error)])
        case .idle, .done, .askingDelegate:
            state = .done
            return []
        }
    }

    /// The caller cancelled.
    mutating func cancel() -> [Action] {
        switch state {
        case .awaitingHead:
            state = .done
            return [.cancelForward]
        case .receiving(let receiving):
            state = .done
            return receiving.spooling ? [.cancelForward, .discardWriter] : [.cancelForward]
        case .askingDelegate(let asking):
            state = .done
            return asking.spooledBytes != nil ? [.discardWriter] : []
        case .idle, .done:
            state = .done
            return []
        }
    }


}
