import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request half of the caching decision: pure functions of the request, the stored
/// entry, the time and the configuration. No I/O happens here.
enum CacheDecision {
    /// Methods known to be safe (RFC 9110 section 9.2.1): they never invalidate.
    static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "QUERY"]

    /// Request fields that make a GET the caller's own conditional request, which passes
    /// through untouched. (`Range` alone may be answered from a fresh entry.)
    static let conditionalRequestHeaders = ["If-None-Match", "If-Modified-Since", "If-Match",
                                            "If-Unmodified-Since", "If-Range"]

    /// Decides what to do with a request.
    /// - Parameters:
    ///   - request: the request as the caller sent it.
    ///   - headers: its header fields as they will reach the network.
    ///   - entry: the stored entry that matches the request (its `Vary` included), if any.
    ///   - otherVariant: whether something is stored under the URL for other `Vary` values;
    ///     nil when the store could not be read, so the cache cannot tell.
    ///   - credentialed: whether the request carries credentials that partition it.
    ///   - keyedBody: whether the request's body is part of its key: it is decided as a GET is.
    ///   - now: the current time.
    ///   - configuration: the cache's configuration.
    static func decide(request: URLRequest, headers: RequestHeaders? = nil, entry: CacheEntry?, otherVariant: Bool? = false,
                       credentialed: Bool? = nil, keyedBody: Bool = false, now: Date, configuration: CacheConfiguration) -> CacheAction {
        evaluate(request: request, headers: headers, entry: entry, otherVariant: otherVariant, credentialed: credentialed,
                 keyedBody: keyedBody, now: now, configuration: configuration).action
    }

    /// A HEAD or a range request that goes out: passed through, nothing stored or removed,
    /// but the stored entry still a fallback.
    static func headOrRangeForward(_ plan: ForwardPlan) -> ForwardPlan {
        var plan = plan
        plan.store = false
        plan.validate = false
        plan.discardEntry = false
        plan.replacesEntry = false
        plan.passThrough = true
        plan.status = .bypass
        return plan
    }

    /// A single-range request whose answer may be stored as a part: passed through, the
    /// stored entry kept (the part is combined with it or replaces it), a conditional request
    /// and a fallback (the range, from a whole entry) as the plan says.
    static func partForward(_ plan: ForwardPlan) -> ForwardPlan {
        var plan = plan
        plan.passThrough = true
        plan.storesPart = true
        plan.discardEntry = false
        plan.replacesEntry = false
        return plan
    }

    /// How a fresh entry answers: whole (a suffix range of an empty body too), head only, or
    /// a range; nil when a range cannot be answered from it (several ranges, another unit, a
    /// content-coded body: its ranges are of the coded bytes), and for a partial entry
    /// anything but a single range it holds or one that starts past its complete length (416).
    static func serveForm(method: String, range: String?, entry: CacheEntry) -> ServeForm? {
        if let parts = entry.partialContent {
            guard method == "GET", let range, entry.isConsistentPartial else { return nil }
            switch ByteRange.resolve(range, length: parts.completeLength) {
            case .satisfiable(let bytes): return parts.covers(bytes) ? .range(bytes) : nil
            case .unsatisfiable: return .rangeNotSatisfiable
            case .whole, .unsupported: return nil
            }
        }
        if method == "HEAD" { return .headersOnly }
        guard let range else { return .whole }
        guard entry.statusCode == 200, !entry.isContentCoded else { return nil }
        switch ByteRange.resolve(range, length: entry.body.count) {
        case .satisfiable(let bytes): return .range(bytes)
        case .unsatisfiable: return .rangeNotSatisfiable
        case .whole: return .whole
        case .unsupported: return nil
        }
    }

    /// The policy that decides for a request: its private policy field (a built-in policy,
    /// the configuration's own, or one of its `customPolicies`), else what its
    /// `URLRequest.cachePolicy` asks for, else the configuration's.
    static func resolvePolicy(for request: URLRequest, configuration: CacheConfiguration) -> Result<CachingPolicy, HTTPCachingError> {
        if let name = request.value(forHTTPHeaderField: HTTPCachingHeaders.policy) {
            if let builtIn = CachingPolicy(builtInNamed: name) { return .success(builtIn) }
            if configuration.policy.name == name { return .success(configuration.policy) }
            if let custom = configuration.customPolicies.first(where: { $0.name == name }) { return .success(custom) }
            return .failure(.unknownPolicy(name))
        }
        return .success(policy(for: request.cachePolicy) ?? configuration.policy)
    }

    /// Whether a decision's failure is answered with HTTP's 504 (Gateway Timeout) instead, as
    /// RFC 9111 5.2.1.7 says for `only-if-cached`: yes for `notCached` (nothing stored may answer
    /// and the network is forbidden) under any policy but cache-only (`.returnCacheDataDontLoad`
    /// included), which fails.
    static func answersGatewayTimeout(_ error: HTTPCachingError, policy: CachingPolicy) -> Bool {
        error == .notCached && policy != .cacheOnly
    }

    /// How the status fields describe that 504.
    static let gatewayTimeout = Disposition(status: .miss, detail: "only-if-cached")

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
            // The client wants an answer still fresh for that long (RFC 9111 5.2.1.3): one that
            // is not is validated, never served stale in the meantime.
            freshLimit -= minFresh
            staleLimit = freshLimit
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
