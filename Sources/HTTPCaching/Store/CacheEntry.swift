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
    /// When the entry was stored, as of the moment its request was sent (so the time the
    /// response took to come counts in its age, RFC 9111 section 4.2.3); its age is measured
    /// from here.
    public var storedAt: Date
    /// Windows for this entry alone; nil uses the cache's. The default is nil.
    public var windows: CacheWindows?
    /// The values, in the request that was answered, of the request headers the response's
    /// `Vary` names (lower-cased names; an absent header is absent here). The default is none.
    public var varyValues: [String: String]
    /// Identifies this version of the entry: a new one for every response stored, including
    /// one updated by a 304. Stores keep it as it is. The default is a random number.
    public var generation: UInt64
    /// After this moment the entry is of no more use to the cache (past every window, with no
    /// validator to revalidate it): stores may drop it then, and a Redis store uses it as the
    /// key's time to live. nil: no known end. The default is nil.
    public var usefulUntil: Date?
    /// For a partial entry (status 206, stored when `CacheConfiguration.storesPartialContent`
    /// is on): the complete length of the representation and the spans of it that `body`
    /// holds, in order. nil: the body is the whole response. The default is nil.
    public var partialContent: PartialContent?

    /// An entry with the given parts.
    public init(key: CacheKey, url: URL, statusCode: Int, headers: [String: String], body: Data,
                storedAt: Date, windows: CacheWindows? = nil, varyValues: [String: String] = [:],
                generation: UInt64 = CacheEntry.newGeneration(), usefulUntil: Date? = nil,
                partialContent: PartialContent? = nil) {
        self.key = key
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
        self.storedAt = storedAt
        self.windows = windows
        self.varyValues = varyValues
        self.generation = generation
        self.usefulUntil = usefulUntil
        self.partialContent = partialContent
    }

    /// A new random generation, never zero.
    public static func newGeneration() -> UInt64 {
        UInt64.random(in: 1...UInt64.max)
    }

    /// A header's value, the name compared case-insensitively.
    public func header(_ name: String) -> String? {
        if let value = headers[name] { return value }
        return headers.first { $0.key.equalsIgnoringASCIICase(name) }?.value
    }

    /// The bytes the entry accounts for against a store's limit: body, headers and URL.
    public var byteCount: Int {
        var count = body.count + url.absoluteString.utf8.count + key.url.utf8.count + 96
        count += (key.partition?.rawValue.utf8.count ?? 0) + (key.variant?.utf8.count ?? 0) + key.namespace.utf8.count
        for (name, value) in headers { count += name.utf8.count + value.utf8.count + 4 }
        for (name, value) in varyValues { count += name.utf8.count + value.utf8.count + 4 }
        if let partialContent { count += 12 + 16 * partialContent.spans.count }
        return count
    }

    /// Whether the entry is a partial one (status 206) whose spans account for its body
    /// exactly; false for a whole entry.
    var isConsistentPartial: Bool {
        guard let partialContent else { return false }
        return statusCode == 206 && partialContent.storedBytes == body.count
    }

    /// The entry's age at `now` in seconds; never negative.
    public func age(at now: Date) -> TimeInterval {
        max(0, now.timeIntervalSince(storedAt))
    }
}
