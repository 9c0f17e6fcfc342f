import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transaction's steps for a request for the whole on a partial entry
/// (`ForwardPlan.completesPart`, RFC 9111 section 3.4): only the bytes the entry lacks were
/// asked for, with `If-Range`. A 206 that completes the entry is combined with it and the
/// caller gets the whole (200), as if it had come whole. Any other 206, a 304 or a 416 asks
/// once more for the whole, as the caller sent it; any other answer (the origin's 200 when the
/// representation changed) is received as a GET's is, replacing the parts.
extension CacheTransaction {
    /// The head of the answer to the request for the missing bytes.
    mutating func completionHead(_ head: ResponseHead, _ pending: Pending, now: Date) -> [Action] {
        var plan = pending.plan
        plan.completesPart = false
        var whole = pending
        whole.plan = plan
        guard !pending.conditional.isEmpty, let entry = pending.entry else {
            return head.statusCode == 206 ? badResponse(head, whole, now: now) : receive(head, whole, now: now)
        }
        switch head.statusCode {
        case 206 where completes(entry, head, now: now):
            state = .receiving(Receiving(head: head, plan: pending.plan, storing: true, completing: true, previous: entry))
            return []
        case 206, 304, 416:
            // Not the bytes that complete the entry: the whole, as the caller asked for it.
            whole.conditional = [:]
            whole.retriedUnconditionally = true
            state = .awaitingHead(whole)
            return [.cancelForward, .forward(conditional: [:])]
        default:
            return receive(head, whole, now: now)
        }
    }

    /// Whether a 206 makes the partial entry whole: a part that may be stored, of the same
    /// representation (a strong validator shared), covering every byte the entry lacks, within
    /// the store's entry limit.
    private func completes(_ entry: CacheEntry, _ head: ResponseHead, now: Date) -> Bool {
        guard let range = ContentRange(head.header("Content-Range")), let length = range.completeLength,
              length <= context.maxEntrySize,
              reasonNotToStorePart(head, previous: entry, store: true, now: now) == nil,
              Validation.shareStrongValidator(entry.header, head.header, now: now) else { return false }
        return PartialEntries.spanCount(adding: range, head: head, to: entry, now: now) == 0
    }

    /// The end of the bytes that complete the entry: the whole stored and served. Content that
    /// is not what its `Content-Range` gives fails the request (the origin sent bytes it did
    /// not describe); nothing is stored.
    func endCompletion(_ receiving: Receiving, now: Date) -> [Action] {
        let head = receiving.head
        let failure: [Action] = [.emit(.served(receiving.plan.status)), .fail(.badResponse(status: head.statusCode))]
        guard receiving.storing, let range = ContentRange(head.header("Content-Range")), range.count == receiving.body.count else {
            return [.emit(.notStored(.unusablePart("its content is not what its Content-Range gives")))] + failure
        }
        let part = makeEntry(head, body: receiving.body, now: now)
        let combination = PartialEntries.combine(part: part, range: range, head: head, previous: receiving.previous,
                                                 keepingCookies: context.configuration.storesResponsesSettingCookies,
                                                 maxSpans: context.configuration.maxPartialSpans, now: part.storedAt)
        guard case .entry(var entry, _) = combination, entry.partialContent == nil else { return failure }
        entry.key = storageKey(entry.header)
        entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: context.configuration)
        let chosen = context.configuration.responseCacher.apply(context.request, entry)
        let actions = chosen.map { storing($0, replacing: receiving.previous) } ?? [.emit(.notStored(.declinedByCacher))]
        let disposition = Disposition(status: receiving.plan.status, forward: receiving.plan.reason, forwardStatus: 206,
                                      stored: chosen != nil, ttl: ttl(200, entry.header, windows: entry.windows, now: now))
        return actions + [.emit(.served(receiving.plan.status)), .serve(entry, .whole, disposition)]
    }
}
