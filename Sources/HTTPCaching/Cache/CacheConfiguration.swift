import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a cache decides: its windows, what it stores, and how it keys entries.
public struct CacheConfiguration: Sendable {
    /// The status codes stored by default: 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501.
    public static let defaultStorableStatusCodes: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The windows for every entry that sets none of its own. The default is 60 seconds
    /// fresh, 2 days usable.
    public var windows: CacheWindows
    /// Status codes whose GET responses are stored under the two-tier policy (the HTTP policy
    /// follows RFC 9111 instead). The default is `defaultStorableStatusCodes`.
    public var storableStatusCodes: Set<Int>
    /// Rewrites the key a request is stored under, for example to drop a timestamp query
    /// item. The default is nil: the method plus the normalized URL.
    public var keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)?
    /// How stored entries answer requests; a request can choose another with
    /// `URLRequest.cachingPolicy`. The default is `.twoTier`.
    public var policy: CachingPolicy
    /// Policies of your own (`CachingPolicy.custom`) that a request may select by name,
    /// besides the built-in ones and `policy`. The default is none.
    public var customPolicies: [CachingPolicy]
    /// When the network fails or the origin answers 5xx, an expired entry younger than this
    /// (seconds since stored) is served instead, reported as `fallback`; nil turns fallback
    /// off and callers get the error. Never for responses that forbid it (`must-revalidate`,
    /// `no-cache`). The default is 7 days.
    public var errorFallbackWindow: TimeInterval?
    /// Whether responses to requests carrying credentials (see `partitioning`) are stored,
    /// each under a key holding a keyed hash of them, so one user's response is never served
    /// to another. The default is true.
    public var storesCredentialedResponses: Bool
    /// Whether responses that set a cookie (`Set-Cookie`) are stored, with the field, and
    /// served back on hits (never replayed into cookie storage). Turn it on only for a cache
    /// private to one user: a cache shared by several users of a process must never hand one
    /// user's cookie to another. Turning it on also stops `Cookie` from partitioning entries
    /// (one user: the cookie the origin just set would otherwise make the next request a
    /// miss). The default is false.
    public var storesResponsesSettingCookies: Bool
    /// Decides, per response about to be stored, to store it, not, or store a changed entry
    /// (for example with windows of its own). The default is `.cache`.
    public var responseCacher: ResponseCacher
    /// Which request fields partition entries by credentials. The default is `.standard`.
    public var partitioning: CredentialPartitioning
    /// A name every key carries: changing it makes every entry stored under another namespace
    /// a miss, in every store (a cache version). The default is empty.
    public var namespace: String
    /// Whether the two-tier policy honours the origin's `no-cache` (revalidate before each
    /// use) and `must-revalidate`/`proxy-revalidate` (never serve stale or fall back); false
    /// makes the windows the only rule. The HTTP policy always honours them. The default is true.
    public var honorsOriginDirectives: Bool
    /// The cache's name in the `Cache-Status` field. The default is `HTTPCaching`.
    public var cacheName: String
    /// Which requests have their body as part of the key (`QUERY`; POST to a search or
    /// GraphQL endpoint when you say so). The default is `.query`.
    public var bodyKeying: BodyKeying
    /// How long a miss that fetches a key for every process sharing the store (a disk or Redis
    /// store) holds its claim: other processes' misses for the key wait for its answer, up to
    /// this long, instead of asking the origin too; nil: each process fetches on its own. A
    /// store kept in one process's memory is never waited on. The default is 15 seconds.
    public var sharedFillLease: TimeInterval?
    /// Whether a response's `No-Vary-Search` (draft-ietf-httpbis-no-vary-search) lets it answer
    /// requests for URLs that differ only in the query parameters it names (or their order):
    /// it is stored under its URL normalized by the field, and found from every equivalent URL.
    /// The key rewriter applies first. False stores every response under its own URL. The
    /// default is true.
    public var honorsNoVarySearch: Bool
    /// Whether `206 (Partial Content)` answers to single-range GETs are stored as parts of
    /// their representation (RFC 9111 section 3.3) and combined with the parts stored when they
    /// share a strong validator (section 3.4), so a range the parts hold is served from the
    /// store (206) and the whole once they hold all of it (200). Off, every 206 passes through
    /// and nothing of it is stored. The default is false.
    public var storesPartialContent: Bool
    /// The most spans (runs of bytes with gaps between them) a partial entry holds; a part
    /// that would make more is not stored (`NotStoredReason.tooManySpans`). At least 1. The
    /// default is 16.
    public var maxPartialSpans: Int

    /// A configuration with the given parts; every argument has the default above.
    public init(windows: CacheWindows = .standard,
                storableStatusCodes: Set<Int> = CacheConfiguration.defaultStorableStatusCodes,
                keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)? = nil,
                policy: CachingPolicy = .twoTier,
                customPolicies: [CachingPolicy] = [],
                errorFallbackWindow: TimeInterval? = 7 * 86_400,
                storesCredentialedResponses: Bool = true,
                storesResponsesSettingCookies: Bool = false,
                responseCacher: ResponseCacher = .cache,
                partitioning: CredentialPartitioning = .standard,
                namespace: String = "",
                honorsOriginDirectives: Bool = true,
                cacheName: String = "HTTPCaching",
                bodyKeying: BodyKeying = .query,
                sharedFillLease: TimeInterval? = 15,
                honorsNoVarySearch: Bool = true,
                storesPartialContent: Bool = false,
                maxPartialSpans: Int = 16) {
        self.windows = windows
        self.storableStatusCodes = storableStatusCodes
        self.keyRewriter = keyRewriter
        self.policy = policy
        self.customPolicies = customPolicies
        self.errorFallbackWindow = errorFallbackWindow
        self.storesCredentialedResponses = storesCredentialedResponses
        self.storesResponsesSettingCookies = storesResponsesSettingCookies
        self.responseCacher = responseCacher
        self.partitioning = partitioning
        self.namespace = namespace
        self.honorsOriginDirectives = honorsOriginDirectives
        self.cacheName = cacheName
        self.bodyKeying = bodyKeying
        self.sharedFillLease = sharedFillLease
        self.honorsNoVarySearch = honorsNoVarySearch
        self.storesPartialContent = storesPartialContent
        self.maxPartialSpans = max(1, maxPartialSpans)
    }
}

/// Decides, per response about to be stored, whether to store it as it is, not at all, or
/// changed (for example with windows of its own), in the spirit of Alamofire's
/// `ResponseCacher`.
public struct ResponseCacher: Sendable {
    private let transform: @Sendable (URLRequest, CacheEntry) -> CacheEntry?
    /// Whether the transform may read or change the body (`modify`): the cache then holds a
    /// storable body whole until it is stored, instead of streaming it to the store.
    let inspectsBody: Bool

    private init(inspectsBody: Bool, _ transform: @escaping @Sendable (URLRequest, CacheEntry) -> CacheEntry?) {
        self.inspectsBody = inspectsBody
        self.transform = transform
    }

    /// Store the response as it is. The default.
    public static let cache = ResponseCacher(inspectsBody: false) { _, entry in entry }
    /// Store nothing.
    public static let doNotCache = ResponseCacher(inspectsBody: false) { _, _ in nil }
    /// Store what `modify` returns (nil: store nothing). It sees the whole body.
    public static func modify(_ modify: @escaping @Sendable (URLRequest, CacheEntry) -> CacheEntry?) -> ResponseCacher {
        ResponseCacher(inspectsBody: true, modify)
    }
    /// Store every response with the windows `choose` returns for it (nil: the cache's), for
    /// example from a field your server sends. `choose` sees the status and headers; the body
    /// may not be there (a body the cache streams to the store is not held).
    public static func windows(_ choose: @escaping @Sendable (CacheEntry) -> CacheWindows?) -> ResponseCacher {
        ResponseCacher(inspectsBody: false) { _, entry in
            var entry = entry
            if let windows = choose(entry) { entry.windows = windows }
            return entry
        }
    }

    func apply(_ request: URLRequest, _ entry: CacheEntry) -> CacheEntry? {
        transform(request, entry)
    }
}

/// The names of the fields the cache reads and writes.
public enum HTTPCachingHeaders {
    /// The field every response that passes through the cache carries with its status word
    /// (`fresh`, `stale`, `miss`, ...): read it with `HTTPURLResponse.cacheStatus`.
    public static let statusField = "X-HTTP-Caching"
    /// The standard field (RFC 9211) every response that passes through the cache carries,
    /// with the cache's member last: `HTTPCaching; hit; ttl=42`, `HTTPCaching; fwd=uri-miss;
    /// fwd-status=200; stored`, ...
    public static let cacheStatusField = "Cache-Status"
    /// The private request field carrying per-request windows; removed before a request is
    /// forwarded. Set it through `URLRequest.cacheWindows`.
    static let windows = "X-HTTP-Caching-Windows"
    /// The private request field naming a policy for one request; removed before a request
    /// is forwarded. Set it through `URLRequest.cachingPolicy`.
    static let policy = "X-HTTP-Caching-Policy"
    /// The private request field saying whether the body is part of the key; removed before a
    /// request is forwarded. Set it through `URLRequest.keysBody`.
    static let bodyKey = "X-HTTP-Caching-Body-Key"
    /// Every private header, all removed before a request reaches the network.
    static let allPrivate = [windows, policy, bodyKey]

    /// Whether a field name is one of the private headers (`allPrivate`), in any case.
    static func isPrivate(_ name: String) -> Bool {
        allPrivate.contains { $0.equalsIgnoringASCIICase(name) }
    }
}

extension URLRequest {
    /// Windows for this request alone, overriding the entry's and the cache's; nil uses
    /// theirs. The default is nil.
    ///
    /// Carried in a private header (protocol properties do not survive on Linux) that is
    /// removed before the request reaches the network.
    public var cacheWindows: CacheWindows? {
        get { value(forHTTPHeaderField: HTTPCachingHeaders.windows).flatMap(CacheWindows.init(headerValue:)) }
        set {
            setValue(newValue.map { "fresh=\($0.fresh), usable=\($0.usable)" },
                     forHTTPHeaderField: HTTPCachingHeaders.windows)
        }
    }
}

extension URLRequest {
    /// The policy for this request alone; nil uses the cache's. The default is nil.
    ///
    /// Carried in a private header that is removed before the request reaches the network.
    public var cachingPolicy: CachingPolicy? {
        get { value(forHTTPHeaderField: HTTPCachingHeaders.policy).map { CachingPolicy(builtInNamed: $0) ?? .named($0) } }
        set { setValue(newValue?.name, forHTTPHeaderField: HTTPCachingHeaders.policy) }
    }
}

extension HTTPURLResponse {
    /// How the cache answered this response, read from its `X-HTTP-Caching` header; nil if
    /// it did not pass through a cache.
    public var cacheStatus: CacheStatus? {
        value(forHTTPHeaderField: HTTPCachingHeaders.statusField).flatMap(CacheStatus.init(rawValue:))
    }

    /// Whether the body came from the store rather than straight from the network
    /// (fresh, stale, revalidated or fallback).
    public var isFromCache: Bool {
        guard let status = cacheStatus else { return false }
        return [.fresh, .stale, .revalidated, .fallback].contains(status)
    }
}
