import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transaction's steps that more than one input leads to.
extension CacheTransaction {
    /// The request awaited has just been sent (a retry or a wait for another's answer sends
    /// it later than the decision to): its answer's age counts from `now`.
    mutating func sent(at now: Date) {
        sentAt = now
    }

    /// The freshness a response has left as it arrives (RFC 9211's `ttl`), its age counted
    /// from when its request was sent.
    func ttl(_ status: Int, _ header: (String) -> String?, windows: CacheWindows?, now: Date) -> TimeInterval {
        let sent = sentAt ?? now
        return CacheDecision.freshnessLeft(statusCode: status, header: header, receivedAt: sent, windows: windows,
                                           request: context.request, configuration: context.configuration)
            - max(0, now.timeIntervalSince(sent))
    }

    /// A 304: the stored entry, revalidated, if the 304 selects it (RFC 9111 section 4.3.4);
    /// else one more request, unconditional.
    mutating func notModified(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        guard !pending.conditional.isEmpty, let entry = pending.entry else { return badResponse(head, pending, now: now) }
        let form = Validation.selects(head, entry) ? revalidatedForm(entry, plan: pending.plan) : nil
        guard let form else {
            // A 304 that selects no stored response updates nothing: ask once more, unconditionally.
            guard !pending.retriedUnconditionally else { return badResponse(head, pending, now: now) }
            var retry = pending
            retry.conditional = [:]
            retry.retriedUnconditionally = true
            state = .awaitingHead(retry)
            return [.cancelForward, .forward(conditional: [:])]
        }
        state = .done
        let merged = updated(entry, by: head, now: now)
        if isRefresh { return storing(merged, replacing: entry) + [.finish, .emit(.refreshed(bodyChanged: false))] }
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        let disposition = Disposition(status: .revalidated, forward: pending.plan.reason, forwardStatus: 304, stored: true,
                                      ttl: ttl(merged.statusCode, merged.header, windows: merged.windows, now: now),
                                      age: CacheDecision.servedAge(of: merged, policy: policy, now: now),
                                      noVarySearch: answersThroughNoVarySearch(entry))
        return storing(merged, replacing: entry) + [.emit(.served(.revalidated)), .serve(merged, form, disposition)]
    }

    /// The stored entry updated with the fields of a 304 that selects it, or of a 200 to a
    /// HEAD that describes it, as of when the request was sent.
    func updated(_ entry: CacheEntry, by head: ResponseHead, now: Date) -> CacheEntry {
        var merged = Validation.merge(entry, notModified: head, keepingCookies: context.configuration.storesResponsesSettingCookies,
                                      now: sentAt ?? now)
        merged.usefulUntil = CacheDecision.usefulUntil(merged, configuration: context.configuration)
        merged.key = storageKey(merged.header) // a 304 may change the No-Vary-Search
        // ... and the `Vary`: the entry then names the values this request has for it.
        merged.varyValues = Vary.values(names: Vary.names(merged.header("Vary")), headers: context.headers)
        return merged
    }

    /// A 200 to a HEAD sent for a stale stored GET updates that entry as a 304 would when its
    /// validators and length match it (RFC 9111 section 4.3.5); nothing for any other answer.
    func headUpdate(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        guard context.request.sentMethod == "HEAD", head.statusCode == 200, let entry = pending.entry,
              entry.partialContent == nil, Validation.headDescribes(head, entry) else { return [] }
        return storing(updated(entry, by: head, now: now), replacing: entry)
    }

    /// A final answer to receive: stored or not (and why), its head to the caller.
    mutating func receive(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        let plan = pending.plan
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        var reason = Storability.reasonNotToStore(method: context.storageMethod, response: head, policy: policy,
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
        if detached && !storing {
            state = .done // nobody to deliver to, nothing to store
            return actions + [.cancelForward]
        }
        var receiving = Receiving(head: head, plan: plan, storing: storing, previous: pending.entry)
        // Nobody needs the body whole (a delegate takes chunks; a refresh has no caller), and
        // the configuration's cacher does not read it: it streams to the store.
        receiving.spooling = storing && (streaming || isRefresh) && !context.configuration.responseCacher.inspectsBody
        state = .receiving(receiving)
        let opening: [Action] = receiving.spooling ? [.openWriter(storageKey(head.header))] : []
        if isRefresh { return actions + opening }
        let status: CacheStatus = storing ? plan.status : .bypass
        // Whether it is stored is not known yet when the caller's delegate is still to be asked
        // (`willCacheResponse`, after the body): `stored` is said only when it is certain.
        let disposition = Disposition(status: status, forward: plan.reason, forwardStatus: head.statusCode,
                                      stored: storing && !context.asksDelegateBeforeStoring,
                                      ttl: storing ? ttl(head.statusCode, head.header, windows: context.entryWindows, now: now) : nil,
                                      detail: reason?.token)
        return actions + [.emit(.served(status)), .respond(head, disposition)] + opening
    }

    /// The caller's delegate answered `willCacheResponse` (`askToStore`): store what it said,
    /// then end the caller's answer.
    mutating func delegateAnswered(_ answer: DelegateStoreAnswer, now: Date) -> [Action] {
        guard case .askingDelegate(let asking) = state else { return [] }
        state = .done
        var actions: [Action] = []
        switch answer {
        case .declined:
            actions.append(.emit(.notStored(.declinedByDelegate)))
            if asking.spooledBytes != nil { actions.append(.discardWriter) }
        case .store(let replacement, let inMemoryOnly):
            var entry = asking.entry
            var spooled = asking.spooledBytes
            if let replacement {
                entry.statusCode = replacement.head.statusCode
                entry.headers = Storability.storedHeaders(of: replacement.head,
                                                          keepingCookies: context.configuration.storesResponsesSettingCookies)
                entry.varyValues = Vary.values(names: Vary.names(entry.header("Vary")), headers: context.headers)
                entry.key = storageKey(entry.header)
                entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: context.configuration)
                if let body = replacement.body {
                    entry.body = body // a body of its own: what was written is not it
                    if spooled != nil { actions.append(.discardWriter) }
                    spooled = nil
                }
            }
            actions += storing(entry, inMemoryOnly: inMemoryOnly, spooledBytes: spooled, replacing: asking.previous)
        }
        return actions + ending(nil, body: asking.body, bodyChanged: nil)
    }

    /// The last actions of an answer that came from the network, after its store writes: a
    /// refresh reports whether the stored body changed (`bodyChanged` nil: nothing stored).
    func ending(_ head: ResponseHead?, body: Data, bodyChanged: Bool?) -> [Action] {
        var actions: [Action] = []
        switch context.role {
        case .refresh:
            actions.append(.finish)
            if let bodyChanged {
                actions.append(.emit(.refreshed(bodyChanged: bodyChanged)))
            } else {
                let status = head.map { "status \($0.statusCode)" } ?? "the answer"
                actions.append(.emit(.refreshFailed(reason: "\(status) not stored; the stale entry was kept")))
            }
        case .foreground(let streaming):
            if !streaming && !body.isEmpty { actions.append(.deliver(body)) }
            actions.append(.finish)
        }
        return actions
    }

    /// The caller went away while other requests wait for this answer: it goes on without a
    /// caller while it may still be stored (the waiting requests get the entry), and is
    /// cancelled as soon as it cannot.
    mutating func detach() -> [Action] {
        switch state {
        case .awaitingHead(let pending) where pending.plan.store && !pending.plan.passThrough:
            break
        case .receiving(let receiving) where receiving.storing:
            break
        default:
            return cancel()
        }
        detached = true
        context.role = .foreground(streaming: true) // nothing is kept for delivery
        context.asksDelegateBeforeStoring = false // there is no caller to ask
        return []
    }


    mutating func passThrough(_ head: ResponseHead, plan: ForwardPlan) -> [Action] {
        var actions: [Action] = []
        if plan.invalidates && (200..<400).contains(head.statusCode) {
            actions.append(.invalidate(Self.invalidatedURLs(request: context.request, response: head)))
        }
        state = .receiving(Receiving(head: head, plan: plan, storing: false))
        if isRefresh { return actions }
        let disposition = Disposition(status: .bypass, forward: plan.reason, forwardStatus: head.statusCode)
        return actions + [.emit(.served(.bypass)), .respond(head, disposition)]
    }

    /// The answer awaited followed a redirect the cache never saw: the request was sent by
    /// Foundation's own class (`DirectForward`). It reaches the caller as it came, unstored; an
    /// entry the request's answer was to replace goes, as for any answer not stored (the
    /// redirect superseded it).
    mutating func answeredFromElsewhere(_ head: ResponseHead) -> [Action] {
        guard case .awaitingHead(let pending) = state else { return [] }
        state = .receiving(Receiving(head: head, plan: pending.plan, storing: false))
        let reason = NotStoredReason.redirectedUnseen
        let disposition = Disposition(status: .bypass, forward: pending.plan.reason, forwardStatus: head.statusCode,
                                      detail: reason.token)
        let removal: [Action] = pending.plan.replacesEntry ? pending.entry.map { [.remove($0.key)] } ?? [] : []
        return removal + [.emit(.notStored(reason)), .emit(.served(.bypass)), .respond(head, disposition)]
    }

    /// A 304 or 206 the cache did not ask for: a bad answer. A stored entry answers instead
    /// where a fallback is allowed. Else, when the request went as the caller made it (no
    /// condition of the cache's own), the answer reaches the caller as it came, unstored, as
    /// without the cache; to the cache's own conditional request, it is an error.
    mutating func badResponse(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        state = .done
        let error = TransactionError.badResponse(status: head.statusCode)
        if isRefresh { return [.cancelForward, .finish, .emit(.refreshFailed(reason: error.description))] }
        if pending.plan.fallback, let entry = pending.entry {
            return fallback(entry, status: head.statusCode, now: now, detail: error.description,
                            form: revalidatedForm(entry, plan: pending.plan) ?? .whole)
        }
        guard pending.conditional.isEmpty else { return [.cancelForward, .emit(.served(pending.plan.status)), .fail(error)] }
        if detached { return [.cancelForward] } // nobody to deliver to, nothing to store
        return passThrough(head, plan: pending.plan)
    }

    mutating func fallback(_ entry: CacheEntry, status: Int?, now: Date, detail: String? = nil,
                           form: ServeForm = .whole) -> [Action] {
        state = .done
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        let age = CacheDecision.servedAge(of: entry, policy: policy, now: now)
        let disposition = Disposition(status: .fallback, forward: .stale, forwardStatus: status, age: age,
                                      detail: detail ?? status.map { "the origin answered \($0)" },
                                      noVarySearch: answersThroughNoVarySearch(entry))
        return [.cancelForward, .emit(.served(.fallback)), .serve(entry, form, disposition)]
    }

    /// The entries one answer is stored as: under its URL, and under its variant when it has a
    /// `Vary`.
    func storedEntries(_ entry: CacheEntry) -> [CacheEntry] {
        let names = Vary.names(entry.header("Vary")).filter { $0 != "*" }
        guard !names.isEmpty else { return [entry] }
        var variant = entry
        variant.key = entry.key.primary
        variant.key.variant = Vary.variantName(names: names, headers: context.headers)
        var primary = entry
        primary.key = entry.key.primary
        return [variant, primary]
    }

    /// The writes for an entry: whole, or the commit of the body written as it arrived
    /// (`spooledBytes` long); then the removal of the entry it replaces (`previous`, the one
    /// the lookup found) when that is stored under another key: an answer with a
    /// `No-Vary-Search` replacing one without, or the reverse, or under another config.
    func storing(_ entry: CacheEntry, inMemoryOnly: Bool = false, spooledBytes: Int? = nil,
                 replacing previous: CacheEntry? = nil) -> [Action] {
        let entries = storedEntries(entry)
        var actions: [Action]
        if let spooledBytes {
            actions = [.commitWriter(entries, bodyBytes: spooledBytes, inMemoryOnly: inMemoryOnly)]
        } else {
            actions = entries.map { inMemoryOnly ? .storeInMemory($0) : .store($0) }
        }
        if let previous, previous.key.primary != entry.key.primary { actions.append(.remove(previous.key)) }
        return actions
    }

    /// The entry a response arriving at `now` is stored as: as of when its request was sent.
    func makeEntry(_ head: ResponseHead, body: Data, now: Date) -> CacheEntry {
        let names = Vary.names(head.header("Vary"))
        return CacheEntry(key: storageKey(head.header),
                          url: CacheKey.removingUserinfo(head.url), // the response's URL carries the request's userinfo
                          statusCode: head.statusCode,
                          headers: Storability.storedHeaders(of: head, keepingCookies: context.configuration.storesResponsesSettingCookies),
                          body: body,
                          storedAt: sentAt ?? now,
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

/// What the caller's delegate answered `willCacheResponse` with.
enum DelegateStoreAnswer: Sendable, Equatable {
    /// nil: nothing is stored.
    case declined
    /// Store the proposed response (`replacement` nil) or the delegate's own, in the store's
    /// memory only when its storage policy says `.allowedInMemoryOnly`.
    case store(replacement: Replacement?, inMemoryOnly: Bool)

    /// A response the delegate returned in place of the proposed one.
    struct Replacement: Sendable, Equatable {
        var head: ResponseHead
        /// Its own body; nil when it kept the proposed one.
        var body: Data?
    }
}
