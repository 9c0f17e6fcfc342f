import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why the decision went the way it did, as facts: `explain` words them (`CacheExplanation`),
/// the decision never writes text.
enum DecisionNote: Sendable, Equatable {
    case methodNotAnswered(String)
    case methodUnsafe(String)
    case unknownPolicy
    case networkOnlyPolicy
    case conditionalRequest(field: String)
    case credentialsNotCached
    case notCachedAndNoNetwork
    case varyMiss
    case storeUnreadable
    case nothingStored
    case reloadRequested
    case anyAgeAnswers(policy: String)
    case headOnlyWhileFresh
    case rangeOnlyFromFreshEntry
    case mustReachOriginButNoNetwork
    /// The body is part of the key (`BodyKeying`); `validates`: a stale entry is revalidated
    /// (QUERY), else fetched again (a conditional POST would be answered 412, never 304).
    case bodyKeyed(method: String, validates: Bool)
    /// A partial entry whose spans and body disagree: removed, the request a miss.
    case partialEntryInconsistent
    /// A HEAD on a partial entry: to the origin, the entry kept.
    case partialEntryAnswersNoHead
    /// A request for the whole on a partial entry: fetched whole, replacing it.
    case partialEntryNotWhole
    /// A request for the whole on a partial entry with a strong validator: only the bytes it
    /// lacks are asked for.
    case partialEntryCompleted
    /// A fresh partial entry holds every byte of the range.
    case partialEntryHoldsRange
    /// The partial entry holds the range but is not fresh.
    case partialEntryStale
    /// The partial entry does not hold every byte of the range; `combines`: a part that
    /// comes back is combined with it.
    case partialEntryMissesRange(combines: Bool)
}

extension CacheDecision {
    /// The decision and how it was reached, for `explain`.
    struct Evaluation: Sendable {
        var action: CacheAction
        var policy: CachingPolicy?
        var windows: CacheWindows?
        var age: TimeInterval?
        var lifetime: TimeInterval?
        var lifetimeSource: Freshness.Source?
        var verdict: CachePolicyVerdict?
        var notes: [DecisionNote] = []

        init(_ action: CacheAction, policy: CachingPolicy? = nil, _ notes: DecisionNote...) {
            self.action = action
            self.policy = policy
            self.notes = notes
        }
    }

    /// What the request itself asks, read once.
    struct RequestFacts {
        var method: String
        var headers: RequestHeaders
        var directives: CacheControl
        var directivesGiven: Bool
        var reload: Bool
        var revalidating: Bool
        var onlyIfCached: Bool
        var store: Bool
        var range: String?
        /// A keyed body's method other than QUERY: a stale entry is never revalidated.
        var neverValidates = false
        /// A single `bytes` range of a GET that may be stored, with `storesPartialContent` on:
        /// a 206 answer is stored as a part.
        var storesParts = false

        init(_ request: URLRequest, headers: RequestHeaders, method: String, policy: CachingPolicy) {
            self.method = method
            self.headers = headers
            directives = CacheControl(headers.value("Cache-Control"), pragma: headers.value("Pragma"))
            directivesGiven = directives != CacheControl(nil)
            reload = [.reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData].contains(request.cachePolicy)
            revalidating = request.cachePolicy == .reloadRevalidatingCacheData
            onlyIfCached = directives.has("only-if-cached") || policy == .cacheOnly
            store = !directives.has("no-store") && method == "GET"
            range = headers.value("Range") // the session's own too: Foundation sends it
            if revalidating { directives.require("no-cache") }
        }

        /// A forward plan adjusted for a HEAD or a range request.
        func adjusted(_ plan: ForwardPlan) -> ForwardPlan {
            if storesParts && method == "GET" { return partForward(plan) }
            return method == "HEAD" || range != nil ? headOrRangeForward(plan) : plan
        }
    }

    /// Decides what to do with a request, and says how (see `decide`).
    /// - Parameter keyedBody: whether the request's body is part of its key (`BodyKeying`): it
    ///   is then decided as a GET is.
    static func evaluate(request: URLRequest, headers: RequestHeaders? = nil, entry: CacheEntry?, otherVariant: Bool? = false,
                         credentialed: Bool? = nil, keyedBody: Bool = false, now: Date, configuration: CacheConfiguration) -> Evaluation {
        let headers = headers ?? RequestHeaders(request)
        let sent = request.sentMethod
        let method = keyedBody ? "GET" : sent
        // The caller's own condition, looked for once: evaluated here, or passed through by the gate.
        let condition = method == "GET" || method == "HEAD" ? conditionalRequestHeaders.first { headers.value($0) != nil } : nil
        let evaluated = condition != nil && CallerConditional.evaluable(headers, method: sent)
        var evaluation = evaluate(request, sent: sent, method: method, headers: headers, condition: evaluated ? nil : condition,
                                  entry: entry, otherVariant: otherVariant, credentialed: credentialed, now: now,
                                  configuration: configuration)
        if evaluated {
            evaluation = CallerConditional.adjust(evaluation, headers: headers, entry: entry,
                                                  onlyIfCached: mayNotReachNetwork(headers, policy: evaluation.policy))
        }
        if keyedBody { evaluation.notes.insert(.bodyKeyed(method: sent, validates: sent == "QUERY"), at: 0) }
        return evaluation
    }

    /// `evaluate` for the method decided on (`sent`, or GET for a keyed body).
    /// - Parameter condition: the conditional field the caller's request passes through with, if any.
    private static func evaluate(_ request: URLRequest, sent: String, method: String, headers: RequestHeaders, condition: String?,
                                 entry: CacheEntry?, otherVariant: Bool?, credentialed: Bool?, now: Date,
                                 configuration: CacheConfiguration) -> Evaluation {
        let policy: CachingPolicy
        switch gate(request, method: method, headers: headers, condition: condition, credentialed: credentialed,
                    configuration: configuration) {
        case .decided(let evaluation): return evaluation
        case .policy(let resolved): policy = resolved
        }
        var facts = RequestFacts(request, headers: headers, method: method, policy: policy)
        facts.neverValidates = method != sent && sent != "QUERY"
        facts.storesParts = configuration.storesPartialContent && facts.store && method == sent
            && facts.range.map { ByteRange.resolve($0, length: .max) != .unsupported } == true
        guard let entry else { return withoutEntry(facts, otherVariant: otherVariant, policy: policy) }
        if facts.reload {
            // A reload ignores what is stored; with no network either, nothing may answer.
            if facts.onlyIfCached { return Evaluation(.fail(.notCached), policy: policy, .reloadRequested, .notCachedAndNoNetwork) }
            let plan = facts.adjusted(ForwardPlan(status: .expired, reason: .request, store: facts.store, replacesEntry: true))
            return Evaluation(.forward(plan), policy: policy, .reloadRequested)
        }
        let windows = windows(for: request, entry: entry, default: configuration.windows)
        if entry.partialContent != nil || entry.statusCode == 206 {
            return evaluatePartial(entry, facts, request: request, policy: policy, windows: windows, now: now,
                                   configuration: configuration)
        }
        if policy == .cacheFirst || policy == .cacheOnly {
            return anyAge(entry, facts, policy: policy, windows: windows, now: now)
        }
        guard let judged = judge(entry, facts, request: request, policy: policy, windows: windows, now: now,
                                 configuration: configuration) else {
            return Evaluation(.fail(.unknownPolicy(policy.name)), policy: policy)
        }
        var evaluation = conclude(judged, entry: entry, facts, windows: windows, configuration: configuration)
        evaluation.policy = policy
        evaluation.windows = windows
        evaluation.age = judged.servedAge
        evaluation.lifetime = judged.lifetime
        evaluation.lifetimeSource = judged.lifetimeSource
        evaluation.verdict = judged.verdict
        return evaluation
    }

    private enum Gate {
        case decided(Evaluation)
        case policy(CachingPolicy)
    }

    /// Whether the request may not reach the network: `only-if-cached`, or the cache-only policy.
    private static func mayNotReachNetwork(_ headers: RequestHeaders, policy: CachingPolicy?) -> Bool {
        policy == .cacheOnly || CacheControl(headers.value("Cache-Control"), pragma: nil).has("only-if-cached")
    }

    /// What is decided before the entry matters: methods not answered from the store, the
    /// request's policy, the network-only policy, the caller's own conditional requests that
    /// pass through (`condition`, their field), credentials the configuration does not cache;
    /// of these, what would reach the network is not answered under `only-if-cached` or the
    /// cache-only policy.
    private static func gate(_ request: URLRequest, method: String, headers: RequestHeaders, condition: String?,
                             credentialed: Bool?, configuration: CacheConfiguration) -> Gate {
        // What would go to the origin untouched is not answered when the request may not reach
        // the network (`only-if-cached`: a 504 the cache makes; the cache-only policy: it fails).
        // Read only where a request would pass the store by, never on the way to a hit.
        let resolved = resolvePolicy(for: request, configuration: configuration)
        func bypass(_ plan: ForwardPlan, policy: CachingPolicy?, _ note: DecisionNote) -> Gate {
            .decided(mayNotReachNetwork(headers, policy: try? resolved.get())
                ? Evaluation(.fail(.notCached), policy: policy, note, .notCachedAndNoNetwork)
                : Evaluation(.forward(plan), policy: policy, note))
        }
        guard method == "GET" || method == "HEAD" else {
            let safe = safeMethods.contains(method)
            return bypass(.bypass(.method, passThrough: true, invalidates: !safe), policy: nil,
                          safe ? .methodNotAnswered(method) : .methodUnsafe(method))
        }
        let policy: CachingPolicy
        switch resolved {
        case .success(let known): policy = known
        case .failure(let error): return .decided(Evaluation(.fail(error), .unknownPolicy))
        }
        if policy == .networkOnly { return bypass(.bypass(.bypass), policy: policy, .networkOnlyPolicy) }
        // The caller's own conditional request (other than those `CallerConditional`
        // evaluates) goes to the origin as it is.
        if let name = condition { return bypass(.bypass(.bypass, passThrough: true), policy: policy, .conditionalRequest(field: name)) }
        let isCredentialed = credentialed ?? !configuration.effectivePartitioning.inputs(headers).isEmpty
        if !configuration.storesCredentialedResponses && isCredentialed {
            return bypass(.bypass(.bypass), policy: policy, .credentialsNotCached)
        }
        return .policy(policy)
    }

    /// Nothing stored answers: the network, unless the request forbids it.
    private static func withoutEntry(_ facts: RequestFacts, otherVariant: Bool?, policy: CachingPolicy) -> Evaluation {
        if facts.onlyIfCached { return Evaluation(.fail(.notCached), policy: policy, .notCachedAndNoNetwork) }
        let (reason, note): (ForwardReason, DecisionNote) = switch otherVariant {
        case true?: (.varyMiss, .varyMiss)
        case false?: (.uriMiss, .nothingStored)
        case nil: (.miss, .storeUnreadable)
        }
        return Evaluation(.forward(facts.adjusted(ForwardPlan(status: .miss, reason: reason, store: facts.store))), policy: policy, note)
    }

    /// The cache-first and cache-only policies: any stored entry answers, whatever its age.
    private static func anyAge(_ entry: CacheEntry, _ facts: RequestFacts, policy: CachingPolicy, windows: CacheWindows,
                               now: Date) -> Evaluation {
        let age = entry.age(at: now)
        let status: CacheStatus = age < windows.fresh ? .fresh : .stale
        var evaluation = Evaluation(.serve(ServePlan(status: status, age: age, ttl: windows.fresh - age, refresh: false,
                                                     form: serveForm(method: facts.method, range: facts.range, entry: entry) ?? .whole)),
                                    policy: policy, .anyAgeAnswers(policy: policy.name))
        evaluation.windows = windows
        evaluation.age = servedAge(of: entry, policy: policy, now: now)
        evaluation.verdict = .fresh
        return evaluation
    }
}

extension CacheDecision {
    /// What the policy says of a stored entry for a request: its verdict, and what the
    /// conclusion and `explain` need of how it was reached.
    struct Judgement {
        var verdict: CachePolicyVerdict
        /// The verdict the request's own directives did not shape: worked out only when the
        /// request forced the network, to tell `request` from `stale` (RFC 9211's `fwd`).
        var withoutRequestDirectives: () -> CachePolicyVerdict
        var ttl: TimeInterval
        var age: TimeInterval
        var servedAge: TimeInterval
        var lifetime: TimeInterval?
        var lifetimeSource: Freshness.Source?
        var mustRevalidate = false
        var errorLimit: TimeInterval
    }

    /// The policy's verdict on `entry`; nil for a policy with no rule.
    static func judge(_ entry: CacheEntry, _ facts: RequestFacts, request: URLRequest, policy: CachingPolicy,
                              windows: CacheWindows, now: Date, configuration: CacheConfiguration) -> Judgement? {
        let age = entry.age(at: now)
        let servedAge = servedAge(of: entry, policy: policy, now: now)
        let response = CacheControl(entry.header("Cache-Control"), pragma: entry.header("Pragma"))
        var directives = facts.directives
        let errorLimit = configuration.errorFallbackWindow ?? -1
        switch policy {
        case .httpSemantics:
            let (lifetime, source) = Freshness.lifetimeAndSource(statusCode: entry.statusCode, header: entry.header, storedAt: entry.storedAt)
            let mustRevalidate = response.has("must-revalidate") || response.has("no-cache")
            let staleLimit = lifetime + (response.seconds("stale-while-revalidate") ?? 0)
            let ifError = response.seconds("stale-if-error") ?? directives.seconds("stale-if-error")
            if response.has("immutable") && facts.revalidating && servedAge < lifetime { directives = CacheControl(nil) }
            let verdict = { (directives: CacheControl) in
                builtInVerdict(age: servedAge, lifetime: lifetime, staleLimit: staleLimit, forceRevalidate: response.has("no-cache"),
                               mustRevalidate: mustRevalidate, directives: directives)
            }
            return Judgement(verdict: verdict(directives), withoutRequestDirectives: { verdict(CacheControl(nil)) },
                             ttl: lifetime - servedAge, age: age, servedAge: servedAge, lifetime: lifetime, lifetimeSource: source,
                             mustRevalidate: mustRevalidate, errorLimit: ifError.map { max(errorLimit, lifetime + $0) } ?? errorLimit)
        case .twoTier:
            let honors = configuration.honorsOriginDirectives
            let noCache = honors && response.has("no-cache")
            let mustRevalidate = honors && (noCache || response.has("must-revalidate") || response.has("proxy-revalidate"))
            if response.has("immutable") && facts.revalidating && age < windows.fresh { directives = CacheControl(nil) }
            let verdict = { (directives: CacheControl) in
                builtInVerdict(age: age, lifetime: windows.fresh, staleLimit: mustRevalidate ? windows.fresh : windows.usable,
                               forceRevalidate: noCache, mustRevalidate: mustRevalidate, directives: directives)
            }
            return Judgement(verdict: verdict(directives), withoutRequestDirectives: { verdict(CacheControl(nil)) },
                             ttl: windows.fresh - age, age: age, servedAge: servedAge, lifetime: windows.fresh,
                             lifetimeSource: .windows, mustRevalidate: mustRevalidate, errorLimit: errorLimit)
        default:
            guard let rule = policy.rule else { return nil }
            let verdict = rule.verdict(for: CachePolicyContext(request: request, entry: entry, age: age, now: now, windows: windows))
            return Judgement(verdict: verdict, withoutRequestDirectives: { verdict }, ttl: windows.fresh - age, age: age,
                             servedAge: servedAge, errorLimit: errorLimit)
        }
    }

    /// From the verdict to the action: serve (fresh, or stale and refreshed), or go to the
    /// network (revalidating when the entry has a validator), with the fallback it allows.
    private static func conclude(_ judged: Judgement, entry: CacheEntry, _ facts: RequestFacts, windows: CacheWindows,
                                 configuration: CacheConfiguration) -> Evaluation {
        switch judged.verdict.kind {
        case .fresh, .stale:
            let status: CacheStatus = judged.verdict == .fresh ? .fresh : .stale
            // `only-if-cached` (or cache-only): a stored answer, whatever it is, or none; never
            // the network, not even a refresh (RFC 9111 5.2.1.7).
            if facts.method == "HEAD" && status == .stale && !facts.onlyIfCached {
                return Evaluation(.forward(headOrRangeForward(ForwardPlan(status: .expired, reason: .stale))), .headOnlyWhileFresh)
            }
            guard let form = serveForm(method: facts.method, range: facts.range, entry: entry),
                  status == .fresh || facts.range == nil || facts.onlyIfCached else {
                if facts.onlyIfCached { return Evaluation(.fail(.notCached), .mustReachOriginButNoNetwork) }
                // RFC 9211: a fresh entry the range cannot use is `request`; a stale one, `stale`.
                let validate = status == .stale && facts.storesParts && Validation.hasValidator(entry) && !facts.neverValidates
                let plan = ForwardPlan(status: .expired, reason: status == .fresh ? .request : .stale, validate: validate,
                                       store: facts.store)
                return Evaluation(.forward(facts.adjusted(plan)), .rangeOnlyFromFreshEntry)
            }
            return Evaluation(.serve(ServePlan(status: status, age: judged.servedAge, ttl: judged.ttl,
                                               refresh: judged.verdict == .stale && !facts.onlyIfCached, form: form)))
        case .revalidate, .network:
            if facts.onlyIfCached { return Evaluation(.fail(.notCached), .mustReachOriginButNoNetwork) }
            var reason = ForwardReason.stale
            if facts.directivesGiven || facts.revalidating, [.fresh, .stale].contains(judged.withoutRequestDirectives()) {
                reason = .request
            }
            let validate = judged.verdict == .revalidate && Validation.hasValidator(entry) && !facts.neverValidates
            // A stored error is never a fallback: it would answer an error with an older one.
            let fallback = configuration.errorFallbackWindow != nil && !judged.mustRevalidate && judged.age < judged.errorLimit
                && entry.statusCode < 500
            let pastUse = reason == .stale && !validate && !fallback && judged.age >= windows.usable
            return Evaluation(.forward(facts.adjusted(ForwardPlan(status: .expired, reason: reason, validate: validate, store: facts.store,
                                                                  fallback: fallback, discardEntry: pastUse, replacesEntry: true))))
        }
    }
}
