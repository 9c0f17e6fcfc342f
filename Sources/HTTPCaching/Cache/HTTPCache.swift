import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response cache: a configuration, a store and a clock, plus the events it reports.
///
/// Install it on a session with `URLSessionConfiguration.enableHTTPCaching(_:)`. One cache
/// may serve many sessions; each session may have its own cache.
public final class HTTPCache: Sendable {
    /// The cache used when none is given: standard windows and a default memory store.
    public static let shared = HTTPCache()

    /// How the cache decides.
    public let configuration: CacheConfiguration
    /// Where the entries live.
    public let store: any ResponseStore
    /// The cache's clock. The default is the system clock.
    public let now: @Sendable () -> Date

    let hub = EventHub()
    private let refreshing = Mutex<Set<CacheKey>>([])

    /// A cache with the given parts.
    /// - Parameters:
    ///   - configuration: windows, storable statuses, key rewriting. The default is
    ///     `CacheConfiguration()`.
    ///   - store: where entries live. The default is a new `MemoryResponseStore()`.
    ///   - now: the clock; tests pass one they can move. The default is `Date()`.
    public init(configuration: CacheConfiguration = CacheConfiguration(),
                store: any ResponseStore = MemoryResponseStore(),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.configuration = configuration
        self.store = store
        self.now = now
    }

    // MARK: - Events

    /// Calls `handler` with every event, on the thread where it happens; keep it quick.
    /// - Returns: a handle whose `cancel()` stops the calls.
    @discardableResult
    public func observe(_ handler: @escaping @Sendable (CacheEvent) -> Void) -> CacheObservation {
        hub.add(handler)
    }

    /// A new stream of every event from now on; ending the iteration ends the stream.
    /// Keeps the newest 4,096 events a slow reader has not taken.
    public func events() -> AsyncStream<CacheEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CacheEvent.self, bufferingPolicy: .bufferingNewest(4096))
        let observation = hub.add { continuation.yield($0) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    // MARK: - Management

    /// The key a request is stored under, after the configuration's `keyRewriter`.
    public func key(for request: URLRequest) -> CacheKey {
        let key = CacheKey(method: request.httpMethod ?? "GET", url: request.url ?? URL(fileURLWithPath: "/"))
        return configuration.keyRewriter?(key, request) ?? key
    }

    /// The entry stored for a request, whatever its age; nil if none.
    public func cachedEntry(for request: URLRequest) -> CacheEntry? {
        lookup(key(for: request), url: request.url)
    }

    /// Removes the entry stored for a request, if any.
    public func removeEntry(for request: URLRequest) throws {
        try store.removeEntry(for: key(for: request))
    }

    /// Removes every entry.
    public func removeAll() throws {
        try store.removeAll()
    }

    /// How many background refreshes are running now.
    public var refreshesInFlight: Int {
        refreshing.withLock { $0.count }
    }

    // MARK: - Engine (used by the URLProtocol plumbing)

    func emit(_ kind: CacheEvent.Kind, _ key: CacheKey, _ url: URL?) {
        hub.emit(CacheEvent(kind: kind, key: key, url: url, date: now()))
    }

    /// Reads the store; a failing read is reported and treated as a miss.
    func lookup(_ key: CacheKey, url: URL?) -> CacheEntry? {
        do {
            return try store.entry(for: key)
        } catch {
            emit(.storeFailed(reason: "read: \(error)"), key, url)
            return nil
        }
    }

    func remove(_ key: CacheKey, url: URL?) {
        do {
            try store.removeEntry(for: key)
        } catch {
            emit(.storeFailed(reason: "remove: \(error)"), key, url)
        }
    }

    /// Whether the configuration lets a response to a request be stored.
    func isStorable(_ response: HTTPURLResponse, for request: URLRequest) -> Bool {
        CacheDecision.isStorable(request: request, response: response, statusCodes: configuration.storableStatusCodes)
    }

    /// Writes a response the caller found storable, reporting `stored` and evictions.
    /// - Returns: the entry that was stored, or nil if the store declined or failed.
    @discardableResult
    func record(_ response: HTTPURLResponse, body: Data, for request: URLRequest, key: CacheKey) -> CacheEntry? {
        let entry = CacheEntry(key: key,
                               url: response.url ?? request.url ?? URL(fileURLWithPath: "/"),
                               statusCode: response.statusCode,
                               headers: Self.storableHeaders(of: response),
                               body: body,
                               storedAt: now(),
                               windows: configuration.responseWindows?(response))
        do {
            let result = try store.write(entry)
            for evicted in result.evicted { emit(.evicted, evicted, URL(string: evicted.url)) }
            guard result.stored else { return nil }
            emit(.stored, key, entry.url)
            return entry
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), key, entry.url)
            return nil
        }
    }

    /// Claims the one refresh slot for a key; false if a refresh is already running.
    func beginRefresh(_ key: CacheKey) -> Bool {
        refreshing.withLock { $0.insert(key).inserted }
    }

    func endRefresh(_ key: CacheKey) {
        refreshing.withLock { _ = $0.remove(key) }
    }

    /// Hop-by-hop headers (RFC 9111 section 3.1) are not stored.
    static let hopByHopHeaders: Set<String> = ["connection", "keep-alive", "proxy-connection", "te",
                                               "transfer-encoding", "upgrade", "proxy-authenticate",
                                               "proxy-authorization", HTTPCachingHeaders.status.lowercased()]

    static func storableHeaders(of response: HTTPURLResponse) -> [String: String] {
        var headers: [String: String] = [:]
        let named = Set((response.value(forHTTPHeaderField: "Connection") ?? "")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            let lower = name.lowercased()
            if hopByHopHeaders.contains(lower) || named.contains(lower) { continue }
            headers[name] = value
        }
        return headers
    }
}
