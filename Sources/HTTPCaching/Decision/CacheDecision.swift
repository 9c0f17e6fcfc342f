import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one request was answered, as the response header and events report it.
public enum CacheStatus: String, Sendable, CaseIterable {
    /// Served from the store while fresh; no network.
    case fresh
    /// Served from the store, past its fresh window but usable; refreshed in the background.
    case stale
    /// Nothing stored could answer: fetched from the network.
    case miss
    /// The stored entry could not answer as it was (past its windows, or the request asked
    /// for the origin): fetched again.
    case expired
    /// Not cacheable (method, status, `no-store`, a conditional request, the network-only
    /// policy): passed through untouched.
    case bypass
    /// Validated with the origin (a conditional request answered 304): the stored body, with
    /// the origin's new headers, its age reset.
    case revalidated
    /// The network failed or the origin answered 5xx: an older entry served instead.
    case fallback
}

/// Why a request went to the network: RFC 9211's `fwd` parameter.
enum ForwardReason: String, Sendable, Equatable {
    /// Nothing stored under the URL.
    case uriMiss = "uri-miss"
    /// Something stored under the URL, but for other values of the fields its `Vary` names.
    case varyMiss = "vary-miss"
    /// Nothing stored could answer, and the cache cannot tell which of the two above (the
    /// store could not be read).
    case miss
    /// The stored entry was stale and could not be served stale.
    case stale
    /// The request's own directives (`no-cache`, `max-age`, a reload) forbade the stored entry.
    case request
    /// The method is not one the cache answers.
    case method
    /// The cache is set not to answer this request (policy, a conditional request, credentials).
    case bypass
}

/// How a stored entry answers without the network.
enum ServeForm: Sendable, Hashable {
    /// The whole response.
    case whole
    /// A HEAD: the stored GET's status and fields, no body.
    case headersOnly
    /// A 206 with these bytes of the body.
    case range(ClosedRange<Int>)
    /// A 416: the requested range lies outside the body.
    case rangeNotSatisfiable
}

/// Answering from the store, without the network.
struct ServePlan: Sendable, Equatable {
    /// `.fresh`, or `.stale` (served, then refreshed in the background).
    var status: CacheStatus
    /// What the `Age` field says.
    var age: TimeInterval
    /// Freshness left, in seconds; negative once stale (RFC 9211's `ttl`).
    var ttl: TimeInterval
    /// Whether to refresh the entry in the background.
    var refresh: Bool
    /// The whole response, its head, or a range of it.
    var form: ServeForm = .whole
}

/// Going to the network, and what to do with what comes back.
struct ForwardPlan: Sendable, Equatable {
    /// How a stored answer is reported: `.miss`, `.expired` or `.bypass`.
    var status: CacheStatus
    /// Why the request goes out.
    var reason: ForwardReason
    /// Send a conditional request built from the stored entry's validators; a 304 that
    /// selects the entry serves it as `.revalidated`.
    var validate = false
    /// Whether the response may be stored (not for `no-store` requests, other methods or the
    /// network-only policy).
    var store = true
    /// On a network error or a 5xx, serve the stored entry instead, as `.fallback`.
    var fallback = false
    /// The stored entry is of no more use (past every window, nothing to validate it with,
    /// no fallback): remove it now.
    var discardEntry = false
    /// The caller's own conditional or range request, or a method the cache does not answer:
    /// whatever comes back reaches the caller untouched, 304 and 206 included.
    var passThrough = false
    /// An unsafe method: a non-error answer invalidates the stored GET of its URL and of the
    /// same-origin URLs in its `Location` and `Content-Location`.
    var invalidates = false
    /// The stored entry answers the same request: a final answer that may not be stored
    /// makes it outdated, so it is removed.
    var replacesEntry = false

    static func bypass(_ reason: ForwardReason, passThrough: Bool = false, invalidates: Bool = false) -> ForwardPlan {
        ForwardPlan(status: .bypass, reason: reason, store: false, passThrough: passThrough, invalidates: invalidates)
    }
}

/// What the cache does with one request. Produced by `CacheDecision`, carried out by the
/// transaction and the URLProtocol plumbing.
enum CacheAction: Sendable, Equatable {
    /// Answer from the stored entry.
    case serve(ServePlan)
    /// Go to the network.
    case forward(ForwardPlan)
    /// Fail the request: it forbade the network and nothing stored may answer
    /// (`CachingError.notCached`), or it names a policy the cache does not know.
    case fail(CachingError)
}

/// The request half of the caching decision: pure functions of the request, the stored
/// entry, the time and the configuration. No I/O happens here.
enum CacheDecision {
    /// Methods known to be safe (RFC 9110 section 9.2.1): they never invalidate.
    static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE"]

    /// Request fields that make a GET the caller's own conditional request, which passes
    /// through untouched. (`Range` alone may be answered from a fresh entry.)
    static let conditionalRequestHeaders = ["If-None-Match", "If-Modified-Since", "If-Match",
                                            "If-Unmodified-Since", "If-Range"]

    /// The decision and how it was reached, for `explain`.
    struct Evaluation: Sendable {
        var action: CacheAction
        var policy: CachingPolicy?
        var windows: CacheWindows?
        var age: TimeInterval?
        var lifetime: TimeInterval?
        var lifetimeSource: Freshness.Source?
        var verdict: CachePolicyVerdict?
        var notes: [String] = []
    }

    /// Decides what to do with a request.
    /// - Parameters:
    ///   - request: the request as the caller sent it.
    ///   - headers: its header fields as they will reach the network.
    ///   - entry: the stored entry that matches the request (its `Vary` included), if any.
    ///   - otherVariant: whether something is stored under the URL for other `Vary` values;
    ///     nil when the store could not be read, so the cache cannot tell.
    ///   - credentialed: whether the request carries credentials that partition it.
    ///   - now: the current time.
    ///   - configuration: the cache's configuration.
    static func decide(request: URLRequest, headers: RequestHeaders? = nil, entry: CacheEntry?, otherVariant: Bool? = false,
                       credentialed: Bool? = nil, now: Date, configuration: CacheConfiguration) -> CacheAction {
        evaluate(request: request, headers: headers, entry: entry, otherVariant: otherVariant, credentialed: credentialed,
                 now: now, configuration: configuration).action
    }

    static func evaluate(request: URLRequest, headers: RequestHeaders? = nil, entry: CacheEntry?, otherVariant: Bool? = false,
                         credentialed: Bool? = nil, now: Date, configuration: CacheConfiguration) -> Evaluation {
        let headers = headers ?? RequestHeaders(request)
        let method = request.httpMethod?.uppercased() ?? "GET"
        func result(_ action: CacheAction, _ note: String) -> Evaluation {
            Evaluation(action: action, notes: [note])
        }
        guard method == "GET" || method == "HEAD" else {
            let safe = safeMethods.contains(method)
            return result(.forward(.bypass(.method, passThrough: true, invalidates: !safe)),
                          safe ? "\(method) is not answered from the store" : "\(method) is unsafe: a non-error answer invalidates the stored GET")
        }
        let policy: CachingPolicy
        switch resolvePolicy(for: request, configuration: configuration) {
        case .success(let resolved): policy = resolved
        case .failure(let error): return result(.fail(error), "the request names a policy the cache does not know")
        }
        if policy == .networkOnly { return Evaluation(action: .forward(.bypass(.bypass)), policy: policy, notes: ["the network-only policy"]) }
        if let name = conditionalRequestHeaders.first(where: { request.value(forHTTPHeaderField: $0) != nil }) {
            return Evaluation(action: .forward(.bypass(.bypass, passThrough: true)), policy: policy,
                              notes: ["the caller's own conditional request (\(name)) passes through"])
        }
        let isCredentialed = credentialed ?? !configuration.effectivePartitioning.inputs(headers).isEmpty
        if !configuration.storesCredentialedResponses && isCredentialed {
            return Evaluation(action: .forward(.bypass(.bypass)), policy: policy,
                              notes: ["credentialed requests are not cached (storesCredentialedResponses is false)"])
        }

        var directives = CacheControl(headers.value("Cache-Control"), pragma: headers.value("Pragma"))
        let requestDirectivesGiven = directives != CacheControl(nil)
        var reload = false, revalidating = false
        switch request.cachePolicy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData: reload = true
        case .reloadRevalidatingCacheData: revalidating = true
        default: break
        }
        let onlyIfCached = directives.has("only-if-cached") || policy == .cacheOnly
        let store = !directives.has("no-store") && method == "GET"
        let range = request.value(forHTTPHeaderField: "Range")
        var evaluation = Evaluation(action: .fail(.notCached), policy: policy)

        guard let entry else {
            if onlyIfCached {
                evaluation.action = .fail(.notCached)
                evaluation.notes.append("nothing stored may answer, and the request forbids the network")
                return evaluation
            }
            let reason: ForwardReason = switch otherVariant {
            case true?: .varyMiss
            case false?: .uriMiss
            case nil: .miss
            }
            var plan = ForwardPlan(status: .miss, reason: reason, store: store)
            if method == "HEAD" || range != nil { plan = headOrRangeForward(plan) }
            evaluation.action = .forward(plan)
            let note = switch reason {
            case .varyMiss: "something is stored under this URL, but for other values of the fields its Vary names"
            case .miss: "the store could not be read: nothing stored can answer"
            default: "nothing stored under this key"
            }
            evaluation.notes.append(note)
            return evaluation
        }
        if reload {
            var plan = ForwardPlan(status: .expired, reason: .request, store: store, replacesEntry: true)
            if method == "HEAD" || range != nil { plan = headOrRangeForward(plan) }
            evaluation.action = .forward(plan)
            evaluation.notes.append("URLRequest.cachePolicy reloads from the origin")
            return evaluation
        }

        let windows = windows(for: request, entry: entry, default: configuration.windows)
        let age = entry.age(at: now)
        let servedAge = servedAge(of: entry, policy: policy, now: now)
        evaluation.windows = windows
        evaluation.age = servedAge
        var errorLimit = configuration.errorFallbackWindow ?? -1
        var mustRevalidate = false
        let response = CacheControl(entry.header("Cache-Control"), pragma: entry.header("Pragma"))
        let immutable = response.has("immutable")
        if revalidating { directives.require("no-cache") }

        let verdict: CachePolicyVerdict, withoutRequestDirectives: CachePolicyVerdict
        var ttl: TimeInterval
        switch policy {
        case .cacheFirst, .cacheOnly:
            let status: CacheStatus = age < windows.fresh ? .fresh : .stale
            evaluation.verdict = .fresh
            evaluation.notes.append("\(policy.name): any stored entry answers, whatever its age")
            evaluation.action = .serve(ServePlan(status: status, age: age, ttl: windows.fresh - age, refresh: false,
                                                 form: serveForm(method: method, range: range, entry: entry) ?? .whole))
            return evaluation
        case .httpSemantics:
            let (lifetime, source) = Freshness.lifetimeAndSource(statusCode: entry.statusCode, header: entry.header, storedAt: entry.storedAt)
            evaluation.lifetime = lifetime
            evaluation.lifetimeSource = source
            mustRevalidate = response.has("must-revalidate") || response.has("no-cache")
            let whileRevalidating = response.seconds("stale-while-revalidate") ?? 0
            if let ifError = response.seconds("stale-if-error") ?? directives.seconds("stale-if-error") {
                errorLimit = max(errorLimit, lifetime + ifError)
            }
            if immutable && revalidating && servedAge < lifetime { directives = CacheControl(nil) }
            ttl = lifetime - servedAge
            verdict = builtInVerdict(age: servedAge, lifetime: lifetime, staleLimit: lifetime + whileRevalidating,
                                     forceRevalidate: response.has("no-cache"), mustRevalidate: mustRevalidate, directives: directives)
            withoutRequestDirectives = builtInVerdict(age: servedAge, lifetime: lifetime, staleLimit: lifetime + whileRevalidating,
                                                      forceRevalidate: response.has("no-cache"), mustRevalidate: mustRevalidate,
                                                      directives: CacheControl(nil))
        case .twoTier:
            evaluation.lifetime = windows.fresh
            evaluation.lifetimeSource = .windows
            let honors = configuration.honorsOriginDirectives
            let noCache = honors && response.has("no-cache")
            mustRevalidate = honors && (noCache || response.has("must-revalidate") || response.has("proxy-revalidate"))
            if immutable && revalidating && age < windows.fresh { directives = CacheControl(nil) }
            ttl = windows.fresh - age
            verdict = builtInVerdict(age: age, lifetime: windows.fresh, staleLimit: mustRevalidate ? windows.fresh : windows.usable,
                                     forceRevalidate: noCache, mustRevalidate: mustRevalidate, directives: directives)
            withoutRequestDirectives = builtInVerdict(age: age, lifetime: windows.fresh,
                                                      staleLimit: mustRevalidate ? windows.fresh : windows.usable,
                                                      forceRevalidate: noCache, mustRevalidate: mustRevalidate, directives: CacheControl(nil))
        default:
            guard let rule = policy.rule else {
                evaluation.action = .fail(.unknownPolicy(policy.name))
                return evaluation
            }
            ttl = windows.fresh - age
            verdict = rule.verdict(for: CachePolicyContext(request: request, entry: entry, age: age, now: now, windows: windows))
            withoutRequestDirectives = verdict
        }
        evaluation.verdict = verdict

        switch verdict {
        case .fresh, .stale:
            let status: CacheStatus = verdict == .fresh ? .fresh : .stale
            if method == "HEAD" && status == .stale {
                evaluation.action = .forward(headOrRangeForward(ForwardPlan(status: .expired, reason: .stale)))
                evaluation.notes.append("a HEAD is answered from the store only while the entry is fresh")
                return evaluation
            }
            guard let form = serveForm(method: method, range: range, entry: entry), status == .fresh || range == nil else {
                // RFC 9211: a fresh entry the range cannot use is `request`; a stale one, `stale`.
                evaluation.action = .forward(headOrRangeForward(ForwardPlan(status: .expired, reason: status == .fresh ? .request : .stale)))
                evaluation.notes.append("a range is answered from the store only from a fresh, complete entry")
                return evaluation
            }
            evaluation.action = .serve(ServePlan(status: status, age: servedAge, ttl: ttl, refresh: verdict == .stale, form: form))
            return evaluation
        case .revalidate, .network:
            if onlyIfCached {
                evaluation.action = .fail(.notCached)
                evaluation.notes.append("the entry may not answer without the origin, and the request forbids the network")
                return evaluation
            }
            let forcedByRequest = requestDirectivesGiven || revalidating
            let reason: ForwardReason = forcedByRequest && (withoutRequestDirectives == .fresh || withoutRequestDirectives == .stale)
                ? .request : .stale
            let validate = verdict == .revalidate && Validation.hasValidator(entry)
            // A stored error is never a fallback: it would answer an error with an older one.
            let fallback = configuration.errorFallbackWindow != nil && !mustRevalidate && age < errorLimit && entry.statusCode < 500
            let pastUse = reason == .stale && !validate && !fallback && age >= windows.usable
            var plan = ForwardPlan(status: .expired, reason: reason, validate: validate, store: store, fallback: fallback,
                                   discardEntry: pastUse, replacesEntry: true)
            if method == "HEAD" || range != nil { plan = headOrRangeForward(plan) }
            evaluation.action = .forward(plan)
            return evaluation
        }
    }

    /// A HEAD or a range request that goes out: passed through, nothing stored or removed,
    /// but the stored entry still a fallback.
    private static func headOrRangeForward(_ plan: ForwardPlan) -> ForwardPlan {
        var plan = plan
        plan.store = false
        plan.validate = false
        plan.discardEntry = false
        plan.replacesEntry = false
        plan.passThrough = true
        plan.status = .bypass
        return plan
    }

    /// How a fresh entry answers: whole, head only, or a range; nil when a range cannot be
    /// answered from it (several ranges, another unit, a partial entry).
    private static func serveForm(method: String, range: String?, entry: CacheEntry) -> ServeForm? {
        if method == "HEAD" { return .headersOnly }
        guard let range else { return .whole }
        guard entry.statusCode == 200 else { return nil }
        switch ByteRange.resolve(range, length: entry.body.count) {
        case .satisfiable(let bytes): return .range(bytes)
        case .unsatisfiable: return .rangeNotSatisfiable
        case .unsupported: return nil
        }
    }

    /// The policy that decides for a request: its private policy field (a built-in policy,
    /// the configuration's own, or one of its `customPolicies`), else what its
    /// `URLRequest.cachePolicy` asks for, else the configuration's.
    static func resolvePolicy(for request: URLRequest, configuration: CacheConfiguration) -> Result<CachingPolicy, CachingError> {
        if let name = request.value(forHTTPHeaderField: HTTPCachingHeaders.policy) {
            if let builtIn = CachingPolicy(builtInNamed: name) { return .success(builtIn) }
            if configuration.policy.name == name { return .success(configuration.policy) }
            if let custom = configuration.customPolicies.first(where: { $0.name == name }) { return .success(custom) }
            return .failure(.unknownPolicy(name))
        }
        return .success(policy(for: request.cachePolicy) ?? configuration.policy)
    }

    /// The policy for a request, the configuration's when the request names an unknown one.
    static func policy(for request: URLRequest, configuration: CacheConfiguration) -> CachingPolicy {
        (try? resolvePolicy(for: request, configuration: configuration).get()) ?? configuration.policy
    }

    /// The age an entry is served with (its `Age` field): RFC 9111's current age under the
    /// HTTP policy, else the seconds since it was stored.
    static func servedAge(of entry: CacheEntry, policy: CachingPolicy, now: Date) -> TimeInterval {
        policy == .httpSemantics ? Freshness.currentAge(of: entry, at: now) : entry.age(at: now)
    }

    /// The freshness a response has left as it is stored or revalidated (RFC 9211's `ttl`):
    /// under the HTTP policy its lifetime minus its age; under the others the fresh window
    /// (the request's own, else the entry's, else the configuration's).
    static func freshnessLeft(statusCode: Int, header: (String) -> String?, receivedAt: Date, windows entryWindows: CacheWindows?,
                              request: URLRequest, configuration: CacheConfiguration) -> TimeInterval {
        if policy(for: request, configuration: configuration) == .httpSemantics {
            let lifetime = Freshness.lifetimeAndSource(statusCode: statusCode, header: header, storedAt: receivedAt).lifetime
            return lifetime - Freshness.initialAge(header: header, receivedAt: receivedAt)
        }
        if let value = request.value(forHTTPHeaderField: HTTPCachingHeaders.windows), let windows = CacheWindows(headerValue: value) {
            return windows.fresh
        }
        return (entryWindows ?? configuration.windows).fresh
    }

    /// The policy a request's own `URLRequest.cachePolicy` asks for, so existing code that
    /// sets one keeps its meaning: `.returnCacheDataElseLoad` is cache-first,
    /// `.returnCacheDataDontLoad` cache-only (the reload policies are handled in `decide`).
    static func policy(for cachePolicy: URLRequest.CachePolicy) -> CachingPolicy? {
        switch cachePolicy {
        case .returnCacheDataElseLoad: .cacheFirst
        case .returnCacheDataDontLoad: .cacheOnly
        default: nil
        }
    }

    /// The two-tier and HTTP verdict: fresh below the lifetime, stale (served, refreshed in the
    /// background) below the stale limit, else revalidate; adjusted by the request's
    /// `no-cache`, `max-age`, `min-fresh` and `max-stale`.
    static func builtInVerdict(age: TimeInterval, lifetime: TimeInterval, staleLimit: TimeInterval,
                               forceRevalidate: Bool, mustRevalidate: Bool, directives: CacheControl) -> CachePolicyVerdict {
        if forceRevalidate || directives.has("no-cache") { return .revalidate }
        var freshLimit = lifetime, staleLimit = max(staleLimit, lifetime)
        if let maxAge = directives.seconds("max-age") {
            freshLimit = min(freshLimit, maxAge)
            staleLimit = min(staleLimit, maxAge)
        }
        if let minFresh = directives.seconds("min-fresh") {
            freshLimit -= minFresh
            staleLimit -= minFresh
        }
        if age < freshLimit { return .fresh }
        if mustRevalidate { return .revalidate }
        if age < staleLimit { return .stale }
        if directives.has("max-stale") {
            // A bare max-stale accepts any staleness; a malformed one, none.
            let extra: TimeInterval
            switch directives.delta("max-stale") {
            case .seconds(let seconds): extra = seconds
            case .bare: extra = .infinity
            case .invalid, .absent: extra = 0
            }
            let cap = directives.seconds("max-age") ?? .infinity
            if age < lifetime + extra && age <= cap { return .stale }
        }
        return .revalidate
    }

    /// The windows for a request: the request's own, else the entry's, else the default.
    static func windows(for request: URLRequest, entry: CacheEntry?, default fallback: CacheWindows) -> CacheWindows {
        if let value = request.value(forHTTPHeaderField: HTTPCachingHeaders.windows),
           let windows = CacheWindows(headerValue: value) {
            return windows
        }
        return entry?.windows ?? fallback
    }

    /// When an entry stops being of use under a configuration: past its usable window and the
    /// error window; nil while it has a validator (it can be revalidated any time).
    static func usefulUntil(_ entry: CacheEntry, configuration: CacheConfiguration) -> Date? {
        if Validation.hasValidator(entry) { return nil }
        let windows = entry.windows ?? configuration.windows
        var span = windows.usable
        if let error = configuration.errorFallbackWindow { span = max(span, error) }
        if configuration.policy == .httpSemantics {
            let response = CacheControl(entry.header("Cache-Control"))
            let lifetime = Freshness.lifetime(of: entry)
            span = max(span, lifetime + max(response.seconds("stale-while-revalidate") ?? 0, response.seconds("stale-if-error") ?? 0))
        }
        guard span.isFinite else { return nil }
        return entry.storedAt.addingTimeInterval(Freshness.clamp(span))
    }
}
