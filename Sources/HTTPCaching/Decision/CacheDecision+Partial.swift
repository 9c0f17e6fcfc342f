import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CacheDecision {
    /// A stored partial entry (RFC 9111 section 3.3): it answers a single range it holds, or
    /// one that starts past its complete length (416), while it is fresh (at any age under
    /// cache-first and cache-only); anything else goes to the network, where a 206 that comes
    /// back is combined with it (section 3.4) and a 200 replaces it. A HEAD or a request for
    /// the whole never gets the part: the first goes to the origin, the second is fetched
    /// whole. An entry whose spans and body disagree is removed, and the request is a miss.
    static func evaluatePartial(_ entry: CacheEntry, _ facts: RequestFacts, request: URLRequest, policy: CachingPolicy,
                                windows: CacheWindows, now: Date, configuration: CacheConfiguration) -> Evaluation {
        guard entry.isConsistentPartial else {
            var plan = facts.adjusted(ForwardPlan(status: .miss, reason: .miss, store: facts.store))
            plan.discardEntry = true
            return Evaluation(.forward(plan), policy: policy, .partialEntryInconsistent)
        }
        if facts.method == "HEAD" {
            return Evaluation(.forward(headOrRangeForward(ForwardPlan(status: .miss, reason: .partial))), policy: policy,
                              .partialEntryAnswersNoHead)
        }
        guard facts.range != nil else {
            if facts.onlyIfCached { return Evaluation(.fail(.notCached), policy: policy, .mustReachOriginButNoNetwork) }
            var plan = ForwardPlan(status: .miss, reason: .partial, store: facts.store, replacesEntry: true)
            plan.completesPart = configuration.storesPartialContent && facts.store && request.sentMethod == "GET"
                && Validation.ifRangeValue(entry.header, now: now) != nil
            return Evaluation(.forward(plan), policy: policy, plan.completesPart ? .partialEntryCompleted : .partialEntryNotWhole)
        }
        let form = serveForm(method: facts.method, range: facts.range, entry: entry)
        let anyAge = policy == .cacheFirst || policy == .cacheOnly
        var judged: Judgement?
        if !anyAge {
            judged = judge(entry, facts, request: request, policy: policy, windows: windows, now: now, configuration: configuration)
            if judged == nil { return Evaluation(.fail(.unknownPolicy(policy.name)), policy: policy) }
        }
        var evaluation: Evaluation
        if let form, anyAge || judged?.verdict == .fresh {
            evaluation = servePartial(entry, form: form, judged: judged, policy: policy, windows: windows, now: now)
        } else if facts.onlyIfCached {
            evaluation = Evaluation(.fail(.notCached), .mustReachOriginButNoNetwork)
        } else {
            evaluation = forwardPartial(entry, facts, covered: form != nil, judged: judged)
        }
        evaluation.policy = policy
        evaluation.windows = windows
        evaluation.age = judged?.servedAge ?? servedAge(of: entry, policy: policy, now: now)
        evaluation.lifetime = judged?.lifetime
        evaluation.lifetimeSource = judged?.lifetimeSource
        evaluation.verdict = judged?.verdict ?? .fresh
        return evaluation
    }

    /// A range the partial entry answers: fresh (under cache-first and cache-only, fresh or
    /// stale by the fresh window), never refreshed in the background.
    private static func servePartial(_ entry: CacheEntry, form: ServeForm, judged: Judgement?, policy: CachingPolicy,
                                     windows: CacheWindows, now: Date) -> Evaluation {
        let age = entry.age(at: now)
        var plan = ServePlan(status: age < windows.fresh ? .fresh : .stale, age: servedAge(of: entry, policy: policy, now: now),
                             ttl: windows.fresh - age, refresh: false, form: form)
        if let judged {
            plan.status = .fresh
            plan.age = judged.servedAge
            plan.ttl = judged.ttl
        }
        let note: DecisionNote = judged == nil ? .anyAgeAnswers(policy: policy.name) : .partialEntryHoldsRange
        return Evaluation(.serve(plan), note)
    }

    /// A range the partial entry cannot answer: to the origin, conditional when the entry
    /// holds the range and has a validator (a 304 then serves it), the part that comes back
    /// stored when the configuration stores parts. Never a fallback: a partial entry cannot
    /// stand in for what the origin failed to send.
    private static func forwardPartial(_ entry: CacheEntry, _ facts: RequestFacts, covered: Bool, judged: Judgement?) -> Evaluation {
        var reason = ForwardReason.partial
        if covered {
            reason = .stale
            if facts.directivesGiven || facts.revalidating, judged?.withoutRequestDirectives() == .fresh { reason = .request }
        }
        let validate = covered && facts.storesParts && Validation.hasValidator(entry) && !facts.neverValidates
        let plan = ForwardPlan(status: covered ? .expired : .miss, reason: reason, validate: validate, store: facts.store)
        return Evaluation(.forward(facts.storesParts ? partForward(plan) : headOrRangeForward(plan)),
                          covered ? .partialEntryStale : .partialEntryMissesRange(combines: facts.storesParts))
    }
}

extension PartialEntries {
    /// The fields that ask for the bytes a partial entry lacks, and only while it is the same
    /// representation: `Range` from its first gap to the end of its last, and `If-Range` with
    /// its strong validator. Nil for a whole entry or one without a strong validator.
    static func completionFields(for entry: CacheEntry, now: Date) -> [String: String]? {
        guard let parts = entry.partialContent, let first = parts.gaps.first, let last = parts.gaps.last,
              let validator = Validation.ifRangeValue(entry.header, now: now) else { return nil }
        let end = last.upperBound == parts.completeLength ? "" : String(last.upperBound - 1)
        return ["Range": "bytes=\(first.lowerBound)-\(end)", "If-Range": validator]
    }
}
