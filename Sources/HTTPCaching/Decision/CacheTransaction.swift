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
        /// Write an entry.
        case store(CacheEntry)
        /// Remove the entry stored under a key.
        case remove(CacheKey)
        /// Remove the stored GETs of these URLs, with the request's credentials.
        case invalidate([URL])
        /// Refresh this entry in the background.
        case refresh(CacheEntry)
    }

    private enum State {
        case idle
        case awaitingHead(Pending)
        case receiving(Receiving)
        case done
    }

    private struct Pending {
        var plan: ForwardPlan
        var entry: CacheEntry?
        var conditional: [String: String]
        var retriedUnconditionally = false
    }

    private struct Receiving {
        var head: ResponseHead
        var plan: ForwardPlan
        var storing: Bool
        var body = Data()
        var previous: CacheEntry?
    }

    private(set) var context: Context
    private var state = State.idle

    init(_ context: Context) {
        self.context = context
    }

    private var streaming: Bool {
        if case .foreground(let streaming) = context.role { return streaming }
        return false
    }

    private var isRefresh: Bool {
        if case .refresh = context.role { return true }
        return false
    }

    /// Whether the transaction has ended: later inputs are ignored.
    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// The plan of the request in flight, while one is.
    var pendingPlan: ForwardPlan? {
        if case .awaitingHead(let pending) = state { return pending.plan }
        return nil
    }

    // MARK: - Inputs

    /// How the caller takes the body, learnt only when the answer is to come from the network
    /// (finding out costs time a hit should not spend): in chunks as they arrive, or whole.
    mutating func deliverInChunks(_ streaming: Bool) {
        if case .foreground = context.role { context.role = .foreground(streaming: streaming) }
    }

    /// The lookup is done: decide, and answer from the entry or go to the network.
    /// - Parameters:
    ///   - entry: the stored entry that matches the request, its `Vary` included.
    ///   - otherVariant: whether something is stored under the URL for other `Vary` values;
    ///     nil when the store could not be read.
    mutating func start(entry: CacheEntry?, otherVariant: Bool? = false, now: Date) -> [Action] {
        guard case .idle = state else { return [] }
        if case .refresh(let previous) = context.role {
            let validators = Validation.conditionalHeaders(for: previous)
            let plan = ForwardPlan(status: .stale, reason: .stale, validate: !validators.isEmpty, store: true)
            state = .awaitingHead(Pending(plan: plan, entry: previous, conditional: validators))
            return [.forward(conditional: validators)]
        }
        let action = CacheDecision.decide(request: context.request, headers: context.headers, entry: entry,
                                          otherVariant: otherVariant, credentialed: context.credentialed, now: now,
                                          configuration: context.configuration)
        switch action {
        case .fail(let error):
            state = .done
            return (error == .notCached ? [.emit(.served(.miss))] : []) + [.fail(.caching(error))]
        case .serve(let plan):
            state = .done
            guard let entry else { return [.fail(.caching(.notCached))] } // the decision serves only what exists
            var actions: [Action] = [.emit(.served(plan.status))]
            if plan.refresh { actions.append(.refresh(entry)) }
            actions.append(.serve(entry, plan.form, Disposition(status: plan.status, hit: true, ttl: plan.ttl, age: plan.age)))
            return actions
        case .forward(let plan):
            var actions: [Action] = []
            if plan.discardEntry, let entry { actions.append(.remove(entry.key)) }
            let conditional = plan.validate ? entry.map(Validation.conditionalHeaders(for:)) ?? [:] : [:]
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
        guard case .awaitingHead(var pending) = state else { return [] }
        let plan = pending.plan
        if plan.passThrough { return passThrough(head, plan: plan) }

        if head.statusCode == 304 {
            guard !pending.conditional.isEmpty, let entry = pending.entry else { return badResponse(head, pending, now: now) }
            guard Validation.selects(head, entry) else {
                // RFC 9111 section 4.3.4: a 304 that selects no stored response updates nothing;
                // ask once more, unconditionally.
                guard !pending.retriedUnconditionally else { return badResponse(head, pending, now: now) }
                pending.conditional = [:]
                pending.retriedUnconditionally = true
                state = .awaitingHead(pending)
                return [.cancelForward, .forward(conditional: [:])]
            }
            state = .done
            var merged = Validation.merge(entry, notModified: head, keepingCookies: context.configuration.storesResponsesSettingCookies,
                                          now: now)
            merged.usefulUntil = CacheDecision.usefulUntil(merged, configuration: context.configuration)
            if isRefresh { return storing(merged) + [.finish, .emit(.refreshed(bodyChanged: false))] }
            let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
            let disposition = Disposition(status: .revalidated, forward: plan.reason, forwardStatus: 304, stored: true,
                                          ttl: ttl(merged.statusCode, merged.header, windows: merged.windows, now: now),
                                          age: CacheDecision.servedAge(of: merged, policy: policy, now: now))
            return storing(merged) + [.emit(.served(.revalidated)), .serve(merged, .whole, disposition)]
        }
        if head.statusCode == 206 { return badResponse(head, pending, now: now) }
        if head.statusCode >= 500 {
            if isRefresh {
                state = .done
                return [.cancelForward, .finish, .emit(.refreshFailed(reason: "the origin answered \(head.statusCode); the stale entry was kept"))]
            }
            if plan.fallback, let entry = pending.entry { return fallback(entry, status: head.statusCode, now: now) }
        }

        let method = context.request.httpMethod?.uppercased() ?? "GET"
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        var reason = Storability.reasonNotToStore(method: method, response: head, policy: policy,
                                                  credentialed: context.credentialed, configuration: context.configuration)
        if reason == nil && !plan.store { reason = .requestNoStore }
        if reason == nil, let length = head.contentLength, length > context.maxEntrySize {
            reason = .tooLarge(bytes: length, limit: context.maxEntrySize)
        }
        let storing = reason == nil
        var actions: [Action] = []
        if !storing, plan.replacesEntry, let entry = pending.entry, (200..<400).contains(head.statusCode) {
            actions.append(.remove(entry.key)) // superseded by an answer that may not be stored
        }
        if let reason { actions.append(.emit(.notStored(reason))) }
        state = .receiving(Receiving(head: head, plan: plan, storing: storing, previous: pending.entry))
        if isRefresh { return actions }
        let status: CacheStatus = storing ? plan.status : .bypass
        let disposition = Disposition(status: status, forward: plan.reason, forwardStatus: head.statusCode, stored: storing,
                                      ttl: storing ? ttl(head.statusCode, head.header, windows: context.entryWindows, now: now) : nil,
                                      detail: reason?.token)
        return actions + [.emit(.served(status)), .respond(head, disposition)]
    }

    /// The freshness a response has left as it is stored (RFC 9211's `ttl`).
    private func ttl(_ status: Int, _ header: (String) -> String?, windows: CacheWindows?, now: Date) -> TimeInterval {
        CacheDecision.freshnessLeft(statusCode: status, header: header, receivedAt: now, windows: windows,
                                    request: context.request, configuration: context.configuration)
    }

    /// Body bytes arrived.
    mutating func body(_ chunk: Data) -> [Action] {
        guard case .receiving(var receiving) = state else { return [] }
        // Take the buffer out of `state` first: while both hold it, appending copies it whole.
        state = .idle
        var actions: [Action] = []
        if receiving.storing && receiving.body.count + chunk.count > context.maxEntrySize {
            receiving.storing = false
            actions.append(.emit(.notStored(.tooLarge(bytes: receiving.body.count + chunk.count, limit: context.maxEntrySize))))
            if streaming || isRefresh { receiving.body = Data() }
        }
        if receiving.storing || (!streaming && !isRefresh) {
            receiving.body.append(chunk)
        }
        state = .receiving(receiving)
        if streaming { actions.append(.deliver(chunk)) }
        return actions
    }

    /// The body ended.
    mutating func end(now: Date) -> [Action] {
        guard case .receiving(let receiving) = state else { return [] }
        state = .done
        var actions: [Action] = []
        var stored: CacheEntry?
        if receiving.storing {
            let entry = makeEntry(receiving.head, body: receiving.body, now: now)
            if let chosen = context.configuration.responseCacher.apply(context.request, entry) {
                var chosen = chosen
                chosen.usefulUntil = CacheDecision.usefulUntil(chosen, configuration: context.configuration)
                stored = chosen
                actions += storing(chosen)
            } else {
                actions.append(.emit(.notStored(.declinedByCacher)))
            }
        }
        switch context.role {
        case .refresh(let previous):
            actions.append(.finish)
            if let stored {
                actions.append(.emit(.refreshed(bodyChanged: stored.body != previous.body)))
            } else {
                actions.append(.emit(.refreshFailed(reason: "status \(receiving.head.statusCode) not stored; the stale entry was kept")))
            }
        case .foreground(let streaming):
            if !streaming && !receiving.body.isEmpty { actions.append(.deliver(receiving.body)) }
            actions.append(.finish)
        }
        return actions
    }

    /// The network failed (before or during the body).
    mutating func fail(_ error: TransactionError, now: Date) -> [Action] {
        switch state {
        case .awaitingHead(let pending):
            state = .done
            if error.isCancellation { return [] }
            if isRefresh { return [.finish, .emit(.refreshFailed(reason: error.description))] }
            if pending.plan.fallback, let entry = pending.entry { return fallback(entry, status: nil, now: now, detail: error.description) }
            return [.emit(.served(pending.plan.status)), .fail(error)]
        case .receiving:
            state = .done
            if error.isCancellation { return [] }
            return isRefresh ? [.finish, .emit(.refreshFailed(reason: error.description))] : [.fail(error)]
        case .idle, .done:
            state = .done
            return []
        }
    }

    /// The caller cancelled.
    mutating func cancel() -> [Action] {
        switch state {
        case .awaitingHead, .receiving:
            state = .done
            return [.cancelForward]
        case .idle, .done:
            state = .done
            return []
        }
    }

    // MARK: - Steps

    private mutating func passThrough(_ head: ResponseHead, plan: ForwardPlan) -> [Action] {
        var actions: [Action] = []
        if plan.invalidates && (200..<400).contains(head.statusCode) {
            actions.append(.invalidate(Self.invalidatedURLs(request: context.request, response: head)))
        }
        state = .receiving(Receiving(head: head, plan: plan, storing: false))
        if isRefresh { return actions }
        let disposition = Disposition(status: .bypass, forward: plan.reason, forwardStatus: head.statusCode)
        return actions + [.emit(.served(.bypass)), .respond(head, disposition)]
    }

    /// A 304 or 206 the cache did not ask for: a bad answer, treated as a network error.
    private mutating func badResponse(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        state = .done
        let error = TransactionError.badResponse(status: head.statusCode)
        if isRefresh { return [.cancelForward, .finish, .emit(.refreshFailed(reason: error.description))] }
        if pending.plan.fallback, let entry = pending.entry {
            return fallback(entry, status: head.statusCode, now: now, detail: error.description)
        }
        return [.cancelForward, .emit(.served(pending.plan.status)), .fail(error)]
    }

    private mutating func fallback(_ entry: CacheEntry, status: Int?, now: Date, detail: String? = nil) -> [Action] {
        state = .done
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        let age = CacheDecision.servedAge(of: entry, policy: policy, now: now)
        let disposition = Disposition(status: .fallback, forward: .stale, forwardStatus: status, age: age,
                                      detail: detail ?? status.map { "the origin answered \($0)" })
        return [.cancelForward, .emit(.served(.fallback)), .serve(entry, .whole, disposition)]
    }

    /// The writes for an entry: under its URL, and under its variant when it has a `Vary`.
    private func storing(_ entry: CacheEntry) -> [Action] {
        let names = Vary.names(entry.header("Vary")).filter { $0 != "*" }
        guard !names.isEmpty else { return [.store(entry)] }
        var variant = entry
        variant.key = entry.key.primary
        variant.key.variant = Vary.variantName(names: names, headers: context.headers)
        var primary = entry
        primary.key = entry.key.primary
        return [.store(variant), .store(primary)]
    }

    private func makeEntry(_ head: ResponseHead, body: Data, now: Date) -> CacheEntry {
        let names = Vary.names(head.header("Vary"))
        return CacheEntry(key: context.key.primary,
                          url: CacheKey.removingUserinfo(head.url), // the response's URL carries the request's userinfo
                          statusCode: head.statusCode,
                          headers: Storability.storedHeaders(of: head, keepingCookies: context.configuration.storesResponsesSettingCookies),
                          body: body,
                          storedAt: now,
                          windows: context.entryWindows,
                          varyValues: Vary.values(names: names, headers: context.headers))
    }

    /// The URLs an unsafe request's non-error answer invalidates (RFC 9111 section 4.4): its
    /// own, and those in `Location` and `Content-Location` when they share its origin.
    static func invalidatedURLs(request: URLRequest, response: ResponseHead) -> [URL] {
        guard let target = request.url else { return [] }
        var urls = [target]
        for name in ["Location", "Content-Location"] {
            guard let value = response.header(name), let url = URL(string: value, relativeTo: target)?.absoluteURL,
                  url.scheme?.lowercased() == target.scheme?.lowercased(), url.host?.lowercased() == target.host?.lowercased(),
                  url.port == target.port else { continue }
            if !urls.contains(url) { urls.append(url) }
        }
        return urls
    }
}

/// Why a transaction failed its caller.
enum TransactionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The network failed with this error.
    case network(NetworkError)
    /// The origin answered 304 or 206 to a request that did not ask for one.
    case badResponse(status: Int)
    /// The cache itself refused.
    case caching(CachingError)

    /// An error from the network, as the transaction keeps it.
    init(_ error: any Error) {
        self = .network(NetworkError(error))
    }

    var isCancellation: Bool {
        if case .network(let error) = self { return error.value.domain == NSURLErrorDomain && error.value.code == NSURLErrorCancelled }
        return false
    }

    var description: String {
        switch self {
        case .network(let error): error.value.localizedDescription
        case .badResponse(let status): "the origin answered \(status) to a request that did not ask for one"
        case .caching(let error): error.errorDescription ?? "\(error)"
        }
    }

    /// The error a caller receives.
    var error: any Error {
        switch self {
        case .network(let error):
            return error.error
        case .badResponse:
            return URLError(.badServerResponse, userInfo: [NSLocalizedDescriptionKey: description])
        case .caching(let error):
            return error
        }
    }
}

/// A network error as it came, compared by domain and code.
struct NetworkError: @unchecked Sendable, Equatable {
    /// The error itself, handed to the caller unchanged.
    let error: any Error
    var value: NSError { error as NSError }

    init(_ error: any Error) { self.error = error }

    static func == (lhs: NetworkError, rhs: NetworkError) -> Bool {
        lhs.value.domain == rhs.value.domain && lhs.value.code == rhs.value.code
    }
}
