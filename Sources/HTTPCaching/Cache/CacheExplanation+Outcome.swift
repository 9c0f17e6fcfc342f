import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CacheExplanation {
    /// What would happen, and the reasons that go with it.
    static func makeOutcome(_ evaluation: CacheDecision.Evaluation, method: String, entry: CacheEntry?, windows: CacheWindows,
                            policy: CachingPolicy, configuration: CacheConfiguration, throughNoVarySearch: Bool = false,
                            reasons: inout [String]) -> Outcome {
        let facts = OutcomeFacts(method: method, entry: entry, windows: windows, policy: policy, configuration: configuration,
                                 lifetime: evaluation.lifetime ?? windows.fresh, age: evaluation.age ?? 0, verdict: evaluation.verdict,
                                 throughNoVarySearch: throughNoVarySearch)
        switch evaluation.action {
        case .serve(let plan): return serveOutcome(plan, facts, reasons: &reasons)
        case .forward(let plan): return forwardOutcome(plan, facts, reasons: &reasons)
        case .fail(let error) where CacheDecision.answersGatewayTimeout(error, policy: policy):
            return Outcome(action: "gateway-timeout", cacheStatus: .miss, network: "none", forwardReason: nil,
                           cacheStatusField: CacheStatusField.member(CacheDecision.gatewayTimeout, cacheName: configuration.cacheName),
                           stores: false, fallback: false,
                           summary: "answers 504 (Gateway Timeout): nothing stored may answer, and the request says only-if-cached")
        case .fail(let error):
            let text = error.errorDescription ?? "\(error)"
            return Outcome(action: "fail", cacheStatus: .miss, network: "none",
                           forwardReason: nil, cacheStatusField: "none (the request fails)", stores: false, fallback: false,
                           summary: "fails: \(text)")
        }
    }

    /// What an outcome is worked out from.
    struct OutcomeFacts {
        var method: String
        var entry: CacheEntry?
        var windows: CacheWindows
        var policy: CachingPolicy
        var configuration: CacheConfiguration
        var lifetime: TimeInterval
        var age: TimeInterval
        var verdict: CachePolicyVerdict?
        /// The entry was stored for another URL, which its `No-Vary-Search` makes equivalent.
        var throughNoVarySearch = false
    }

    private static func serveOutcome(_ plan: ServePlan, _ facts: OutcomeFacts, reasons: inout [String]) -> Outcome {
        let disposition = Disposition(status: plan.status, hit: true, ttl: plan.ttl, age: plan.age,
                                      noVarySearch: facts.throughNoVarySearch)
        let form: String
        switch plan.form {
        case .whole: form = ""
        case .headersOnly: form = " (status and fields only: a HEAD)"
        case .range(let bytes): form = " (206, bytes \(bytes.lowerBound)-\(bytes.upperBound))"
        case .rangeNotSatisfiable: form = " (416: the range lies outside the stored body)"
        case .notModified: form = " (304: the stored response meets the request's own condition)"
        }
        let summary: String, network: String
        switch (plan.status, plan.refresh) {
        case (.fresh, _):
            summary = "fresh: served from the store\(form)"
            network = "none"
            if facts.policy != .cacheFirst && facts.policy != .cacheOnly {
                reasons.append("age \(seconds(facts.age)) is below the lifetime \(seconds(facts.lifetime))")
            }
        case (_, true):
            summary = "stale: served from the store at once\(form), then refreshed in the background"
            network = "a background refresh" + (facts.entry.map { Validation.hasValidator($0) ? ", conditional on its validators" : "" } ?? "")
            reasons.append("age \(seconds(facts.age)) is past the lifetime \(seconds(facts.lifetime)) but within the stale limit"
                           + (facts.policy == .httpSemantics ? " (stale-while-revalidate, or the request's max-stale)"
                                                             : " (the usable window \(seconds(facts.windows.usable)), or the request's max-stale)"))
        default:
            summary = "stale: served from the store whatever its age\(form), not refreshed"
            network = "none"
        }
        if let entry = facts.entry, CacheControl(entry.header("Cache-Control")).has("immutable"), facts.verdict == .fresh {
            reasons.append("immutable (RFC 8246): a fresh entry is not revalidated, even on a revalidating reload")
        }
        return Outcome(action: "serve", cacheStatus: plan.status, network: network, forwardReason: nil,
                       cacheStatusField: CacheStatusField.member(disposition, cacheName: facts.configuration.cacheName), stores: false,
                       fallback: false, summary: summary)
    }

    private static func forwardOutcome(_ plan: ForwardPlan, _ facts: OutcomeFacts, reasons: inout [String]) -> Outcome {
        let disposition = Disposition(status: plan.status, forward: plan.reason)
        var network = plan.validate ? "a conditional request ("
            + (facts.entry.map { Validation.conditionalHeaders(for: $0).keys.sorted().joined(separator: ", ") } ?? "") + ")" : "a request"
        if plan.passThrough { network += ", passed through untouched" }
        if plan.completesPart { network = "a request for the bytes the stored parts lack (Range, If-Range)" }
        var summary: String
        switch plan.reason {
        case .uriMiss, .varyMiss, .miss: summary = "miss: fetched from the origin"
        case .method: summary = "bypass: \(facts.method) goes to the origin"
        case .bypass: summary = "bypass: passed to the origin untouched"
        case .request: summary = "expired: the request's own directives send it to the origin"
        case .stale: summary = "expired: fetched again"
        case .partial: summary = "miss: the stored part cannot answer; fetched from the origin"
        }
        if plan.validate { summary += "; a 304 serves the stored body as revalidated" }
        if plan.completesPart { summary = "miss: the stored parts lack bytes; those are fetched, and the whole is served once they complete it" }
        if let entry = facts.entry { reasons += entryReasons(plan, entry: entry, facts) }
        if plan.storesPart {
            reasons.append("a 206 that comes back is stored as a part (storesPartialContent), combined with the stored parts when they share a strong validator")
        }
        if !plan.store && !plan.passThrough && plan.reason != .bypass { reasons.append("the answer is not stored (the request says no-store)") }
        return Outcome(action: "forward", cacheStatus: plan.status, network: network, forwardReason: plan.reason.rawValue,
                       cacheStatusField: CacheStatusField.member(disposition, cacheName: facts.configuration.cacheName),
                       stores: plan.store && (!plan.passThrough || plan.storesPart), fallback: plan.fallback, summary: summary)
    }

    /// Why a stored entry did not answer, and what becomes of it.
    private static func entryReasons(_ plan: ForwardPlan, entry: CacheEntry, _ facts: OutcomeFacts) -> [String] {
        var reasons: [String] = []
        let directives = CacheControl(entry.header("Cache-Control"))
        let honors = facts.policy == .httpSemantics || facts.configuration.honorsOriginDirectives
        if plan.reason == .stale {
            if directives.has("no-cache") && honors {
                reasons.append("the response says no-cache: revalidated before each use")
            } else {
                reasons.append("age \(seconds(facts.age)) is past the lifetime \(seconds(facts.lifetime))"
                               + (facts.policy == .twoTier ? " and past what may be served stale" : ""))
            }
        }
        if plan.reason == .request {
            reasons.append("the entry could answer, but the request's Cache-Control, Pragma or URLRequest.cachePolicy asks for the origin")
        }
        if !plan.passThrough, facts.verdict == .revalidate || plan.reason == .stale, !plan.validate {
            reasons.append("no validator (ETag or Last-Modified): the whole response is fetched again")
        }
        if plan.fallback {
            reasons.append("if the network fails or the origin answers 5xx, the stored entry is served instead (fallback)")
        } else if !plan.passThrough && plan.reason != .method {
            reasons.append(noFallbackReason(entry, directives: directives, facts))
        }
        if plan.discardEntry {
            reasons.append("the entry is of no more use (past every window, nothing to validate it with): removed before the request")
        }
        if plan.passThrough && (facts.method == "HEAD" || plan.status == .bypass) && plan.reason != .bypass && plan.reason != .partial {
            reasons.append("a HEAD or a range is answered from the store only from a fresh entry that holds it")
        }
        return reasons
    }

    private static func noFallbackReason(_ entry: CacheEntry, directives: CacheControl, _ facts: OutcomeFacts) -> String {
        if facts.configuration.errorFallbackWindow == nil { return "no fallback: errorFallbackWindow is off" }
        if entry.statusCode >= 500 { return "no fallback: the stored response is itself an error" }
        let policy = facts.policy
        if (directives.has("must-revalidate") || directives.has("no-cache") || (policy == .twoTier && directives.has("proxy-revalidate")))
            && (policy != .twoTier || facts.configuration.honorsOriginDirectives) {
            return "no fallback: the response says must-revalidate, proxy-revalidate or no-cache"
        }
        return "no fallback: the entry is past the error window"
    }
}

extension DecisionNote {
    /// The note in words, as `explain` gives it.
    var text: String {
        switch self {
        case .bodyKeyed(let method, let validates):
            "the \(method) request's body is part of its key (bodyKeying), so it is cached as a GET is"
                + (validates ? "" : "; a stale entry is fetched again, never revalidated")
        case .methodNotAnswered(let method): "\(method) is not answered from the store"
        case .methodUnsafe(let method): "\(method) is unsafe: a non-error answer invalidates the stored GET"
        case .unknownPolicy: "the request names a policy the cache does not know"
        case .networkOnlyPolicy: "the network-only policy"
        case .conditionalRequest(let field): "the caller's own conditional request (\(field)) passes through"
        case .credentialsNotCached: "credentialed requests are not cached (storesCredentialedResponses is false)"
        case .notCachedAndNoNetwork: "nothing stored may answer, and the request forbids the network"
        case .varyMiss: "something is stored under this URL, but for other values of the fields its Vary names"
        case .storeUnreadable: "the store could not be read: nothing stored can answer"
        case .nothingStored: "nothing stored under this key"
        case .reloadRequested: "URLRequest.cachePolicy reloads from the origin"
        case .anyAgeAnswers(let policy): "\(policy): any stored entry answers, whatever its age"
        case .headOnlyWhileFresh: "a HEAD is answered from the store only while the entry is fresh"
        case .rangeOnlyFromFreshEntry: "a range is answered from the store only from a fresh entry that holds it"
        case .partialEntryInconsistent: "the stored partial entry's spans and body disagree: it is removed, and the request is a miss"
        case .partialEntryAnswersNoHead:
            "a HEAD is not answered from a partial entry (a 206 need not carry every field a 200 would): it goes to the origin, and the entry stays"
        case .partialEntryNotWhole: "the stored entry holds only part of the representation: the whole is fetched, and replaces it"
        case .partialEntryCompleted:
            "the stored entry holds only part of the representation: the bytes it lacks are asked for (Range and If-Range), and the whole is served once they complete it"
        case .partialEntryHoldsRange: "the partial entry holds every byte of the range"
        case .partialEntryStale: "the partial entry holds the range but is not fresh"
        case .partialEntryMissesRange(let combines):
            "the partial entry does not hold every byte of the range"
                + (combines ? "; a 206 that shares its strong validator is combined with it" : "")
        case .mustReachOriginButNoNetwork: "the entry may not answer without the origin, and the request forbids the network"
        }
    }
}
