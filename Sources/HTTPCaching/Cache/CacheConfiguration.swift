import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a cache decides: its windows, what it stores, and how it keys entries.
public struct CacheConfiguration: Sendable {
    /// The status codes stored by default: 200, 203, 204, 300, 301, 404, 405, 410, 414, 501.
    public static let defaultStorableStatusCodes: Set<Int> = [200, 203, 204, 300, 301, 404, 405, 410, 414, 501]

    /// The windows for every entry that sets none of its own. The default is 60 seconds
    /// fresh, 2 days usable.
    public var windows: CacheWindows
    /// Status codes whose GET responses are stored. The default is
    /// `defaultStorableStatusCodes`.
    public var storableStatusCodes: Set<Int>
    /// Rewrites the key a request is stored under, for example to drop a timestamp query
    /// item. The default is nil: the method plus the normalized URL.
    public var keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)?
    /// Chooses windows for one response as it is stored, for example from a header your
    /// server sends; nil keeps `windows`. The default is nil.
    public var responseWindows: (@Sendable (HTTPURLResponse) -> CacheWindows?)?
    /// How stored entries answer requests; a request can choose another with
    /// `URLRequest.cachingPolicy`. The default is `.twoTier`.
    public var policy: CachingPolicy
    /// Policies of your own, by name, selectable with `CachingPolicy(named:)`. The default
    /// is none.
    public var customPolicies: [String: any CachePolicyRule]
    /// When the network fails or the origin answers 5xx, an expired entry younger than this
    /// (seconds since stored) is served instead, reported as `fallback`; nil turns fallback
    /// off and callers get the error. Never for non-GET requests, nor for responses that say
    /// `must-revalidate`. The default is 7 days.
    public var errorFallbackWindow: TimeInterval?
    /// Whether responses to requests carrying `Authorization` or `Cookie` are stored (each
    /// under a key that includes a one-way hash of those values, so one user's response is
    /// never served to another). The default is true.
    public var storesCredentialedResponses: Bool
    /// Whether responses that set a cookie (`Set-Cookie`) are stored. The default is false.
    public var storesResponsesSettingCookies: Bool
    /// Decides, per response about to be stored, to store it, not, or store a changed entry.
    /// The default is `.cache`.
    public var responseCacher: ResponseCacher

    /// A configuration with the given parts; every argument has the default above.
    public init(windows: CacheWindows = .standard,
                storableStatusCodes: Set<Int> = CacheConfiguration.defaultStorableStatusCodes,
                keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)? = nil,
                responseWindows: (@Sendable (HTTPURLResponse) -> CacheWindows?)? = nil,
                policy: CachingPolicy = .twoTier,
                customPolicies: [String: any CachePolicyRule] = [:],
                errorFallbackWindow: TimeInterval? = 7 * 86_400,
                storesCredentialedResponses: Bool = true,
                storesResponsesSettingCookies: Bool = false,
                responseCacher: ResponseCacher = .cache) {
        self.windows = windows
        self.storableStatusCodes = storableStatusCodes
        self.keyRewriter = keyRewriter
        self.responseWindows = responseWindows
        self.policy = policy
        self.customPolicies = customPolicies
        self.errorFallbackWindow = errorFallbackWindow
        self.storesCredentialedResponses = storesCredentialedResponses
        self.storesResponsesSettingCookies = storesResponsesSettingCookies
        self.responseCacher = responseCacher
    }
}

/// Decides, per response about to be stored, whether to store it as it is, not at all, or
/// changed (for example with windows of its own), in the spirit of Alamofire's
/// `ResponseCacher`.
public struct ResponseCacher: Sendable {
    private let transform: @Sendable (URLRequest, HTTPURLResponse, CacheEntry) -> CacheEntry?

    /// A cacher that stores the entry `transform` returns, or nothing when it returns nil.
    public init(_ transform: @escaping @Sendable (URLRequest, HTTPURLResponse, CacheEntry) -> CacheEntry?) {
        self.transform = transform
    }

    /// Store the response as it is. The default.
    public static let cache = ResponseCacher { _, _, entry in entry }
    /// Store nothing.
    public static let doNotCache = ResponseCacher { _, _, _ in nil }
    /// Store what `modify` returns (nil: store nothing).
    public static func modify(_ modify: @escaping @Sendable (URLRequest, HTTPURLResponse, CacheEntry) -> CacheEntry?) -> ResponseCacher {
        ResponseCacher(modify)
    }

    func apply(_ request: URLRequest, _ response: HTTPURLResponse, _ entry: CacheEntry) -> CacheEntry? {
        transform(request, response, entry)
    }
}

/// The header names the cache reads and writes.
public enum HTTPCachingHeaders {
    /// Set on every response that passes through the cache: `fresh`, `stale`, `miss`,
    /// `expired` or `bypass` (see `CacheStatus`).
    public static let status = "X-HTTP-Caching"
    /// The private request header carrying per-request windows; removed before a request is
    /// forwarded. Set it through `URLRequest.cacheWindows`.
    public static let windows = "X-HTTP-Caching-Windows"
    /// The private request header naming a policy for one request; removed before a request
    /// is forwarded. Set it through `URLRequest.cachingPolicy`.
    public static let policy = "X-HTTP-Caching-Policy"
    /// Every private header, all removed before a request reaches the network.
    static let allPrivate = [windows, policy]
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
        get { value(forHTTPHeaderField: HTTPCachingHeaders.policy).map(CachingPolicy.init(named:)) }
        set { setValue(newValue?.name, forHTTPHeaderField: HTTPCachingHeaders.policy) }
    }
}

extension HTTPURLResponse {
    /// How the cache answered this response, read from its `X-HTTP-Caching` header; nil if
    /// it did not pass through a cache.
    public var cacheStatus: CacheStatus? {
        value(forHTTPHeaderField: HTTPCachingHeaders.status).flatMap(CacheStatus.init(rawValue:))
    }

    /// Whether the body came from the store rather than straight from the network
    /// (fresh, stale, revalidated or fallback).
    public var isFromCache: Bool {
        switch cacheStatus {
        case .fresh?, .stale?, .revalidated?, .fallback?: true
        default: false
        }
    }
}
