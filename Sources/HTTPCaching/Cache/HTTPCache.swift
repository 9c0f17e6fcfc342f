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
    /// Windows set ahead of time for single entries with `setWindows(_:for:)`.
    private let entryWindows = Mutex<[CacheKey: CacheWindows]>([:])

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

    /// The key a request is stored under, after the configuration's `keyRewriter`; a request
    /// carrying `Authorization` or `Cookie` gets a key of its own, holding a one-way hash of them.
    public func key(for request: URLRequest) -> CacheKey {
        key(for: request, headers: RequestHeaders(request))
    }

    func key(for request: URLRequest, headers: RequestHeaders) -> CacheKey {
        var key = CacheKey(method: request.httpMethod ?? "GET", url: request.url ?? URL(fileURLWithPath: "/"))
        key = configuration.keyRewriter?(key, request) ?? key
        if let partition = CacheDecision.credentialPartition(headers) { key.url += "#credentials=" + partition }
        return key
    }

    /// Whether a response is stored for a request, whatever its age.
    public func hasEntry(for request: URLRequest) -> Bool {
        cachedEntry(for: request) != nil
    }

    /// The entry stored for a request, whatever its age; nil if none.
    public func cachedEntry(for request: URLRequest) -> CacheEntry? {
        lookup(key(for: request), url: request.url)
    }

    /// Stores a response for a request by hand, as if it had just come from the network,
    /// whatever its status or headers say.
    /// - Parameter windows: windows for this entry alone; nil uses those set with
    ///   `setWindows(_:for:)`, else the configuration's `responseWindows`, else the cache's.
    /// - Returns: whether the store kept it (false if it exceeds the store's limits).
    @discardableResult
    public func storeResponse(_ response: HTTPURLResponse, data: Data, for request: URLRequest,
                              windows: CacheWindows? = nil) throws -> Bool {
        let key = key(for: request)
        var entry = makeEntry(response, body: data, for: request, headers: RequestHeaders(request), key: key)
        if let windows { entry.windows = windows }
        return try write(entry)
    }

    /// Sets the windows for one request's entry: applied to the entry stored now, if any,
    /// and to every response stored for it from now on (this process only). nil clears them.
    public func setWindows(_ windows: CacheWindows?, for request: URLRequest) throws {
        let key = key(for: request)
        entryWindows.withLock { $0[key] = windows }
        if var entry = try store.entry(for: key) {
            entry.windows = windows
            try store.write(entry)
        }
    }

    /// Removes the entry stored for a request, if any.
    public func removeEntry(for request: URLRequest) throws {
        try store.removeEntry(for: key(for: request))
    }

    /// Removes every entry.
    /// - Parameter progress: called as entries are removed (often, for a large disk store).
    public func removeAll(progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeAll(progress: progress)
    }

    /// Removes every entry stored at or after `date`.
    /// - Parameter progress: called as entries are removed.
    public func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeEntries(storedSince: date, progress: progress)
    }

    /// The bytes the stored entries account for.
    public var totalBytes: Int { store.totalBytes }

    /// How many entries are stored.
    public var entryCount: Int { store.entryCount }

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
        } catch let ResponseStoreError.corruptEntry(_, reason) {
            emit(.corrupted(reason: reason), key, url)
            return nil
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
    func isStorable(_ response: HTTPURLResponse, for request: URLRequest, headers: RequestHeaders) -> Bool {
        CacheDecision.isStorable(request: request, headers: headers, response: response, configuration: configuration)
    }

    /// Writes a response the caller found storable (after the configuration's
    /// `responseCacher`), reporting `stored` and evictions.
    /// - Returns: the entry that was stored, or nil if it was declined or the store failed.
    @discardableResult
    func record(_ response: HTTPURLResponse, body: Data, for request: URLRequest, headers: RequestHeaders,
                key: CacheKey) -> CacheEntry? {
        guard let entry = configuration.responseCacher.apply(request, response,
                                                              makeEntry(response, body: body, for: request, headers: headers, key: key)) else {
            return nil
        }
        do {
            return try write(entry) ? entry : nil
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), key, entry.url)
            return nil
        }
    }

    /// The stored entry brought up to date by a 304, written back.
    func revalidate(_ entry: CacheEntry, with notModified: HTTPURLResponse) -> CacheEntry {
        let updated = CacheDecision.merge(entry, notModified: notModified, storableHeaders: Self.storableHeaders(of: notModified), now: now())
        do {
            _ = try write(updated)
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), entry.key, entry.url)
        }
        return updated
    }

    /// Writes an entry, reporting evictions and `stored`. - Returns: whether it was stored.
    private func write(_ entry: CacheEntry) throws -> Bool {
        let result = try store.write(entry)
        for evicted in result.evicted { emit(.evicted, evicted, URL(string: evicted.url)) }
        if result.stored { emit(.stored, entry.key, entry.url) }
        return result.stored
    }

    private func makeEntry(_ response: HTTPURLResponse, body: Data, for request: URLRequest, headers: RequestHeaders,
                           key: CacheKey) -> CacheEntry {
        let windows = entryWindows.withLock { $0.isEmpty ? nil : $0[key] } ?? configuration.responseWindows?(response)
        return CacheEntry(key: key,
                          url: response.url ?? request.url ?? URL(fileURLWithPath: "/"),
                          statusCode: response.statusCode,
                          headers: Self.storableHeaders(of: response),
                          body: body,
                          storedAt: now(),
                          windows: windows,
                          varyValues: CacheDecision.varyValues(for: response, headers: headers))
    }

    /// The `Age` an entry is served with, by the policy that decides for the request.
    func age(of entry: CacheEntry, for request: URLRequest) -> TimeInterval {
        CacheDecision.servedAge(of: entry, policy: CacheDecision.policy(for: request, configuration: configuration), now: now())
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
        let named = Set((response.value(forHTTPHeaderField: "Connection") ?? "")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        return response.headerFields.filter { name, _ in
            let lower = name.lowercased()
            return !hopByHopHeaders.contains(lower) && !named.contains(lower)
        }
    }
}

extension HTTPURLResponse {
    /// The header fields as strings (Foundation types them `[AnyHashable: Any]`).
    var headerFields: [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        return fields
    }
}
