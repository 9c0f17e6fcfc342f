import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one request was answered, as the response header and events report it.
public enum CacheStatus: String, Sendable, CaseIterable {
    /// Served from the store, younger than the fresh window; no network.
    case fresh
    /// Served from the store, past the fresh window but usable; refreshed in the background.
    case stale
    /// No stored entry: fetched from the network.
    case miss
    /// The stored entry was past the usable window: removed and fetched again.
    case expired
    /// Not cacheable (method, status, `no-store`, a conditional or range request, the
    /// network-only policy): passed through untouched.
    case bypass
    /// Validated with the origin (a conditional request answered 304): the stored body,
    /// with the origin's new headers, its age reset.
    case revalidated
    /// The network failed or the origin answered 5xx: an expired entry served instead.
    case fallback
}

/// What the cache does with one request. Produced by `CacheDecision`, carried out by the
/// URLProtocol plumbing.
enum CacheAction: Equatable, Sendable {
    /// Answer from the stored entry: `.fresh`, or `.stale` with `refresh` (a background
    /// refresh); `age` is what the `Age` header says.
    case serve(CacheStatus, age: TimeInterval, refresh: Bool)
    /// Go to the network.
    case forward(ForwardPlan)
    /// An unsafe method: pass it through and remove any entry stored for its URL.
    case invalidate
    /// The caller forbade the network (`only-if-cached`, the cache-only policy) and nothing
    /// stored may answer: fail with `CachingError.notCached`.
    case unsatisfiable
}

/// How to go to the network, and what to do with what comes back.
struct ForwardPlan: Equatable, Sendable {
    /// How the answer is reported if it can be stored: `.miss`, `.expired` or `.bypass`.
    var status: CacheStatus
    /// Send a conditional request built from the stored entry's validators; on 304 serve the
    /// entry as `.revalidated`.
    var validate = false
    /// Whether the response may be stored at all (not for network-only or `no-store`).
    var store = true
    /// On a network error or a 5xx, serve the stored entry instead, as `.fallback`.
    var fallback = false

    static func bypass() -> ForwardPlan { ForwardPlan(status: .bypass, store: false) }
}

/// The request's header fields as they will reach the network: the request's own, else the
/// session's `httpAdditionalHeaders` (which Foundation adds only later, in its HTTP class).
struct RequestHeaders: Sendable {
    let request: URLRequest
    let session: [String: String]

    init(_ request: URLRequest, session: [String: String] = [:]) {
        self.request = request
        self.session = session
    }

    func value(_ name: String) -> String? {
        if let value = request.value(forHTTPHeaderField: name) { return value }
        guard !session.isEmpty else { return nil }
        return session[name] ?? session.first { $0.key.equalsIgnoringASCIICase(name) }?.value
    }
}

/// The caching decision: pure functions of the request, the stored entry, the time and the
/// configuration. No I/O happens here.
enum CacheDecision {
    /// Methods whose success changes the resource: they invalidate what is stored.
    static let invalidatingMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    /// Request headers that make a GET the caller's own conditional or partial request,
    /// which passes through untouched.
    static let passThroughRequestHeaders = ["If-None-Match", "If-Modified-Since", "If-Match",
                                            "If-Unmodified-Since", "If-Range", "Range"]

    /// Decides what to do with a request.
    /// - Parameters:
    ///   - request: the request as the caller sent it.
    ///   - headers: its header fields as they will reach the network.
    ///   - entry: the entry stored under the request's key, if any.
    ///   - now: the current time.
    ///   - configuration: the cache's configuration.
    static func decide(request: URLRequest, headers: RequestHeaders? = nil, entry: CacheEntry?, now: Date,
                       configuration: CacheConfiguration) -> CacheAction {
        let headers = headers ?? RequestHeaders(request)
        let method = request.httpMethod?.uppercased() ?? "GET"
        if invalidatingMethods.contains(method) { return .invalidate }
        guard method == "GET" else { return .forward(.bypass()) }
        let policy = policy(for: request, configuration: configuration)
        if policy == .networkOnly { return .forward(.bypass()) }
        for name in passThroughRequestHeaders where request.value(forHTTPHeaderField: name) != nil {
            return .forward(.bypass())
        }
        if !configuration.storesCredentialedResponses && isCredentialed(headers) { return .forward(.bypass()) }

        var directives = CacheControl(headers.value("Cache-Control"), pragma: headers.value("Pragma"))
        switch request.cachePolicy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .forward(ForwardPlan(status: entry == nil ? .miss : .expired, store: !directives.has("no-store")))
        case .reloadRevalidatingCacheData:
            directives.require("no-cache")
        default:
            break
        }
        let onlyIfCached = directives.has("only-if-cached") || policy == .cacheOnly
        let store = !directives.has("no-store")
        guard let entry, varyMatches(entry, headers) else {
            return onlyIfCached ? .unsatisfiable : .forward(ForwardPlan(status: .miss, store: store))
        }

        let windows = windows(for: request, entry: entry, default: configuration.windows)
        let age = entry.age(at: now)
        let verdict: CachePolicyVerdict
        var mustRevalidate = false
        let servedAge = servedAge(of: entry, policy: policy, now: now)
        var errorLimit = configuration.errorFallbackWindow ?? -1

        switch policy {
        case .cacheFirst, .cacheOnly:
            return .serve(age < windows.fresh ? .fresh : .stale, age: age, refresh: false)
        case .httpSemantics:
            let response = CacheControl(entry.header("Cache-Control"), pragma: entry.header("Pragma"))
            let lifetime = Freshness.lifetime(of: entry)
            mustRevalidate = response.has("must-revalidate") || response.has("no-cache")
            let whileRevalidating = response.seconds("stale-while-revalidate") ?? 0
            if let ifError = response.seconds("stale-if-error") ?? directives.seconds("stale-if-error") {
                errorLimit = max(errorLimit, lifetime + ifError)
            }
            verdict = builtInVerdict(age: servedAge, lifetime: lifetime, staleLimit: lifetime + whileRevalidating,
                                     forceRevalidate: response.has("no-cache"), mustRevalidate: mustRevalidate,
                                     directives: directives)
        case .twoTier:
            verdict = builtInVerdict(age: age, lifetime: windows.fresh, staleLimit: windows.usable,
                                     forceRevalidate: false, mustRevalidate: false, directives: directives)
        default:
            guard let rule = configuration.customPolicies[policy.name] else {
                // An unknown name: the safest reading is to ask the network.
                return onlyIfCached ? .unsatisfiable : .forward(ForwardPlan(status: .expired, store: store))
            }
            verdict = rule.verdict(for: CachePolicyContext(request: request, entry: entry, age: age, now: now, windows: windows))
        }

        switch verdict {
        case .fresh:
            return .serve(.fresh, age: servedAge, refresh: false)
        case .stale:
            return .serve(.stale, age: servedAge, refresh: true)
        case .revalidate, .network:
            if onlyIfCached { return .unsatisfiable }
            return .forward(ForwardPlan(status: .expired,
                                        validate: verdict == .revalidate && hasValidator(entry),
                                        store: store,
                                        fallback: configuration.errorFallbackWindow != nil && !mustRevalidate && age < errorLimit))
        }
    }

    /// The policy that decides for a request: its private policy header, else what its
    /// `URLRequest.cachePolicy` asks for, else the configuration's.
    static func policy(for request: URLRequest, configuration: CacheConfiguration) -> CachingPolicy {
        request.cachingPolicy ?? policy(for: request.cachePolicy) ?? configuration.policy
    }

    /// The age an entry is served with (its `Age` header): RFC 9111's current age under the
    /// HTTP policy, else the seconds since it was stored.
    static func servedAge(of entry: CacheEntry, policy: CachingPolicy, now: Date) -> TimeInterval {
        policy == .httpSemantics ? Freshness.currentAge(of: entry, at: now) : entry.age(at: now)
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
            let extra = directives.seconds("max-stale") ?? .infinity
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

    // MARK: - Storing

    /// Whether a response to a request may be stored.
    ///
    /// GET only; a status in `storableStatusCodes`; not `no-store`; not `Vary: *`; not
    /// `Set-Cookie` unless allowed; not for a credentialed request unless allowed.
    static func isStorable(request: URLRequest, headers: RequestHeaders? = nil, response: HTTPURLResponse,
                           configuration: CacheConfiguration) -> Bool {
        guard (request.httpMethod?.uppercased() ?? "GET") == "GET",
              configuration.storableStatusCodes.contains(response.statusCode) else { return false }
        if CacheControl(response.value(forHTTPHeaderField: "Cache-Control")).has("no-store") { return false }
        if varyNames(response.value(forHTTPHeaderField: "Vary")).contains("*") { return false }
        if !configuration.storesResponsesSettingCookies && response.value(forHTTPHeaderField: "Set-Cookie") != nil { return false }
        if !configuration.storesCredentialedResponses && isCredentialed(headers ?? RequestHeaders(request)) { return false }
        return true
    }

    // MARK: - Vary and credentials

    static func varyNames(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// The request's values of the headers a response varies on, to store with the entry.
    static func varyValues(for response: HTTPURLResponse, headers: RequestHeaders) -> [String: String] {
        var values: [String: String] = [:]
        for name in varyNames(response.value(forHTTPHeaderField: "Vary")) where name != "*" {
            if let value = headers.value(name) { values[name] = normalize(value) }
        }
        return values
    }

    /// Whether a stored entry may answer a request, as far as `Vary` goes.
    static func varyMatches(_ entry: CacheEntry, _ headers: RequestHeaders) -> Bool {
        let names = varyNames(entry.header("Vary"))
        if names.contains("*") { return false }
        return names.allSatisfy { entry.varyValues[$0] == headers.value($0).map(normalize) }
    }

    private static func normalize(_ value: String) -> String {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ",")
    }

    static func isCredentialed(_ headers: RequestHeaders) -> Bool {
        headers.value("Authorization") != nil || headers.value("Cookie") != nil
    }

    /// A one-way hash of the request's credentials, to partition keys by; nil without any.
    static func credentialPartition(_ headers: RequestHeaders) -> String? {
        let authorization = headers.value("Authorization"), cookie = headers.value("Cookie")
        guard authorization != nil || cookie != nil else { return nil }
        return String(SHA256.hex(Array("\(authorization ?? "")\u{0}\(cookie ?? "")".utf8)).prefix(32))
    }

    // MARK: - Validation

    static func hasValidator(_ entry: CacheEntry) -> Bool {
        entry.header("ETag") != nil || entry.header("Last-Modified") != nil
    }

    /// The headers that make a request conditional on a stored entry: `If-None-Match` with its
    /// ETag (weak or strong), else `If-Modified-Since` with its Last-Modified.
    static func conditionalHeaders(for entry: CacheEntry) -> [String: String] {
        if let etag = entry.header("ETag") { return ["If-None-Match": etag] }
        if let lastModified = entry.header("Last-Modified") { return ["If-Modified-Since": lastModified] }
        return [:]
    }

    /// Header fields a 304 must not change in the stored entry (RFC 9111 section 3.2).
    static let keptOnUpdate: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]

    /// The stored entry updated by a 304 (RFC 9111 section 4.3.4): the 304's header fields
    /// replace the stored ones (but framing fields), the body is kept, the age starts again.
    static func merge(_ entry: CacheEntry, notModified: HTTPURLResponse, storableHeaders: [String: String], now: Date) -> CacheEntry {
        var updated = entry
        for (name, value) in storableHeaders where !keptOnUpdate.contains(name.lowercased()) {
            if let existing = updated.headers.keys.first(where: { $0.equalsIgnoringASCIICase(name) }) {
                updated.headers[existing] = nil
            }
            updated.headers[name] = value
        }
        updated.storedAt = now
        return updated
    }
}

/// Freshness and age as a private cache computes them (RFC 9111 section 4.2).
enum Freshness {
    /// Statuses whose responses may be given a heuristic lifetime (RFC 9110 section 15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The freshness lifetime: `max-age`, else `Expires` minus `Date`, else 10% of the time
    /// since `Last-Modified`, else zero. `s-maxage` is for shared caches and is ignored.
    static func lifetime(of entry: CacheEntry) -> TimeInterval {
        let directives = CacheControl(entry.header("Cache-Control"))
        if let maxAge = directives.seconds("max-age") { return maxAge }
        let date = entry.header("Date").flatMap(HTTPDate.parse) ?? entry.storedAt
        if let expires = entry.header("Expires") {
            guard let expiry = HTTPDate.parse(expires) else { return 0 } // an invalid date is in the past
            return max(0, expiry.timeIntervalSince(date))
        }
        if let lastModified = entry.header("Last-Modified").flatMap(HTTPDate.parse),
           heuristicallyCacheable.contains(entry.statusCode) {
            return max(0, date.timeIntervalSince(lastModified) / 10)
        }
        return 0
    }

    /// The current age: the age the response already had when stored (the larger of its
    /// `Age` header and the time since its `Date`), plus the time since it was stored.
    static func currentAge(of entry: CacheEntry, at now: Date) -> TimeInterval {
        let ageHeader = entry.header("Age").flatMap { TimeInterval($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        let apparent = entry.header("Date").flatMap(HTTPDate.parse).map { max(0, entry.storedAt.timeIntervalSince($0)) } ?? 0
        return max(ageHeader, apparent) + entry.age(at: now)
    }
}
