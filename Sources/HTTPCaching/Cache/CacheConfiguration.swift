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

    /// A configuration with the given parts; every argument has the default above.
    public init(windows: CacheWindows = .standard,
                storableStatusCodes: Set<Int> = CacheConfiguration.defaultStorableStatusCodes,
                keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)? = nil,
                responseWindows: (@Sendable (HTTPURLResponse) -> CacheWindows?)? = nil) {
        self.windows = windows
        self.storableStatusCodes = storableStatusCodes
        self.keyRewriter = keyRewriter
        self.responseWindows = responseWindows
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

extension HTTPURLResponse {
    /// How the cache answered this response, read from its `X-HTTP-Caching` header; nil if
    /// it did not pass through a cache.
    public var cacheStatus: CacheStatus? {
        value(forHTTPHeaderField: HTTPCachingHeaders.status).flatMap(CacheStatus.init(rawValue:))
    }

    /// Whether the body came from the store rather than the network.
    public var isFromCache: Bool {
        cacheStatus == .fresh || cacheStatus == .stale
    }
}
