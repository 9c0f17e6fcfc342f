import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transaction's steps for a single-range GET whose answer may be stored as a part
/// (`ForwardPlan.storesPart`, RFC 9111 sections 3.3 and 3.4): the caller gets the network's
/// answer untouched; a 206 is stored as a part, combined with the stored entry when both
/// share a strong validator; a 304 to a conditional request serves the range from the
/// revalidated entry; a 5xx serves the range from a stored whole entry when the plan falls
/// back; any other answer is received as a GET's is (a 200 replaces the parts).
extension CacheTransaction {
    /// The head of the answer to a request forwarded with `storesPart`.
    mutating func partHead(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        switch head.statusCode {
        case 206: return receivePart(head, pending, now: now)
        case 304 where !pending.conditional.isEmpty: return notModified(head, pending, now: now)
        case 304, 100..<200: return passThrough(head, plan: pending.plan)
        case 500...:
            guard pending.plan.fallback, let entry = pending.entry else { return receive(head, pending, now: now) }
            return fallback(entry, status: head.statusCode, now: now, form: revalidatedForm(entry, plan: pending.plan) ?? .whole)
        default: return receive(head, pending, now: now)
        }
    }

    /// How the revalidated entry answers the request after a 304: the whole for an ordinary
    /// request; for a part's request, the range (nil when the entry cannot answer it).
    func revalidatedForm(_ merged: CacheEntry, plan: ForwardPlan) -> ServeForm? {
        guard plan.storesPart else { return .whole }
        return CacheDecision.serveForm(method: "GET", range: context.headers.value("Range"), entry: merged)
    }

    /// A 206: received to be stored as a part, or passed through with the reason it is not.
    private mutating func receivePart(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        let plan = pending.plan
        if let reason = reasonNotToStorePart(head, previous: pending.entry, store: plan.store, now: now) {
            state = .receiving(Receiving(head: head, plan: plan, storing: false))
            let disposition = Disposition(status: .bypass, forward: plan.reason, forwardStatus: head.statusCode, detail: reason.token)
            return [.emit(.notStored(reason)), .emit(.served(.bypass)), .respond(head, disposition)]
        }
        state = .receiving(Receiving(head: head, plan: plan, storing: true, previous: pending.entry))
        var whole = head
        whole.statusCode = 200
        let disposition = Disposition(status: plan.status, forward: plan.reason, forwardStatus: head.statusCode, stored: true,
                                      ttl: ttl(200, whole.header, windows: context.entryWindows, now: now))
        return [.emit(.served(plan.status)), .respond(head, disposition)]
    }

    /// Why a 206 is not stored as a part, known from its head: not one byte range of a known
    /// length, content-coded, not storable as its representation (a 200) would be, a request
    /// that says no-store, too large, or too many spans once combined.
    func reasonNotToStorePart(_ head: ResponseHead, previous: CacheEntry?, store: Bool, now: Date) -> NotStoredReason? {
        let range = ContentRange(head.header("Content-Range"))
        if let reason = PartialEntries.reasonNotToStore(head, range: range) { return reason }
        var whole = head
        whole.statusCode = 200 // a part is stored as its representation would be
        let policy = CacheDecision.policy(for: context.request, configuration: context.configuration)
        if let reason = Storability.reasonNotToStore(method: context.storageMethod, response: whole, policy: policy,
                                                     credentialed: context.credentialed, configuration: context.configuration) {
            return reason
        }
        guard store else { return .requestNoStore }
        guard let range else { return .unusablePart("its Content-Range is not one byte range") }
        if range.count > context.maxEntrySize { return .tooLarge(bytes: range.count, limit: context.maxEntrySize) }
        let limit = context.configuration.maxPartialSpans
        if PartialEntries.spanCount(adding: range, head: head, to: previous, now: now) > limit { return .tooManySpans(limit: limit) }
        return nil
    }

    /// The end of a part received to be stored: its entry combined with the stored one, then
    /// the caller's answer ended. Content that is not the bytes its `Content-Range` gives is
    /// not stored.
    func endPart(_ receiving: Receiving, now: Date) -> [Action] {
        storingPart(receiving, now: now) + ending(receiving.head, body: receiving.body, bodyChanged: nil)
    }

    private func storingPart(_ receiving: Receiving, now: Date) -> [Action] {
        let head = receiving.head
        guard let range = ContentRange(head.header("Content-Range")), range.count == receiving.body.count else {
            let count = receiving.body.count
            return [.emit(.notStored(.unusablePart("its content (\(count) bytes) is not what its Content-Range gives")))]
        }
        let part = makeEntry(head, body: receiving.body, now: now)
        let combination = PartialEntries.combine(part: part, range: range, head: head, previous: receiving.previous,
                                                 keepingCookies: context.configuration.storesResponsesSettingCookies,
                                                 maxSpans: context.configuration.maxPartialSpans, now: part.storedAt)
        guard case .entry(let entry, _) = combination else {
            return [.emit(.notStored(.tooManySpans(limit: context.configuration.maxPartialSpans)))]
        }
        guard entry.body.count <= context.maxEntrySize else {
            return [.emit(.notStored(.tooLarge(bytes: entry.body.count, limit: context.maxEntrySize)))]
        }
        guard var chosen = context.configuration.responseCacher.apply(context.request, entry) else {
            return [.emit(.notStored(.declinedByCacher))]
        }
        if chosen.key == entry.key { chosen.key = storageKey(chosen.header) }
        chosen.usefulUntil = CacheDecision.usefulUntil(chosen, configuration: context.configuration)
        return storing(chosen, replacing: receiving.previous)
    }
}

extension PartialEntries {
    /// How many spans the entry stored from a 206 of `range` holds: one alone, or the union's
    /// count when it combines with `previous` (the same strong validator and complete length);
    /// 0 when it would be whole.
    static func spanCount(adding range: ContentRange, head: ResponseHead, to previous: CacheEntry?, now: Date) -> Int {
        guard let length = range.completeLength else { return 1 }
        var spans = [range.span]
        if let previous, Validation.shareStrongValidator(previous.header, head.header, now: now) {
            if let parts = previous.partialContent, previous.isConsistentPartial, parts.completeLength == length {
                spans += parts.spans
            } else if previous.partialContent == nil, previous.statusCode == 200, previous.body.count == length {
                return 0
            }
        }
        var merged: [Range<Int>] = []
        for span in spans.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, span.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, span.upperBound)
            } else {
                merged.append(span)
            }
        }
        return merged == [0..<length] ? 0 : merged.count
    }
}
