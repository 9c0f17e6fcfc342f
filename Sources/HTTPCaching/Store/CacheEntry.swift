import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored response: status, headers, body and URL, with the time it was stored.
public struct CacheEntry: Sendable, Hashable {
    /// The key the entry is stored under.
    public var key: CacheKey
    /// The URL of the response (after any redirects the network followed).
    public var url: URL
    /// The HTTP status code.
    public var statusCode: Int
    /// The response's header fields as the origin sent them.
    public var headers: [String: String]
    /// The whole body.
    public var body: Data
    /// When the entry was stored; its age is measured from here.
    public var storedAt: Date
    /// Windows for this entry alone; nil uses the cache's. The default is nil.
    public var windows: CacheWindows?

    /// An entry with the given parts.
    public init(key: CacheKey, url: URL, statusCode: Int, headers: [String: String], body: Data,
                storedAt: Date, windows: CacheWindows? = nil) {
        self.key = key
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
        self.storedAt = storedAt
        self.windows = windows
    }

    /// The bytes the entry accounts for against a store's limit: body, headers and URL.
    public var byteCount: Int {
        var count = body.count + url.absoluteString.utf8.count + key.url.utf8.count + 64
        for (name, value) in headers { count += name.utf8.count + value.utf8.count + 4 }
        return count
    }

    /// The entry's age at `now` in seconds; never negative.
    public func age(at now: Date) -> TimeInterval {
        max(0, now.timeIntervalSince(storedAt))
    }
}
