import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response cache: a configuration, a store and a clock, plus the events it reports.
///
/// Install it on a session with `URLSessionConfiguration.enableHTTPCaching(_:)`. One cache
/// may serve many sessions; each session may have its own cache. The management calls here
/// key requests without any session's own headers; use the `CacheInstallation` that
/// `enableHTTPCaching(_:)` returns to key them as a session does.
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
    let flights = Flights()
    /// Where store reads and writes happen: never Foundation's shared URLSession queue. Serial
    /// queues, each with a thread of its own when busy (serial queues never wait for a thread
    /// the way a concurrent queue on the shared pool can when other work blocks it); a URL
    /// always maps to the same one, so one key's reads and writes stay in order.
    private let ioQueues: [DispatchQueue]
    private let ioQueueKey = DispatchSpecificKey<Bool>()
    /// Whether the store answers from memory, so its reads and writes may run anywhere.
    let storeIsInMemory: Bool
    private let refreshing = Mutex<Set<CacheKey>>([])
    private let secret = Mutex<[UInt8]?>(nil)
    /// Windows set ahead of time for single entries with `setWindows(_:for:)`, oldest first
    /// out past 10,000.
    private let entryWindows = Mutex(BoundedWindows())
    /// Why the last response for a key was not stored, for `explain`: the 1,000 most recent.
    private let notStored = Mutex(BoundedNotStored())
    /// Keys requests with no session's headers.
    let plainKeys: KeyDerivation

    /// A cache with the given parts.
    /// - Parameters:
    ///   - configuration: windows, policy, what is stored, how keys are made. The default is
    ///     `CacheConfiguration()`.
    ///   - store: where entries live. The default is a new `MemoryResponseStore()`.
    ///   - now: the clock; tests pass one they can move. The default is `Date()`.
    public init(configuration: CacheConfiguration = CacheConfiguration(),
                store: any ResponseStore = MemoryResponseStore(),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.configuration = configuration
        self.store = store
        self.now = now
        storeIsInMemory = store is MemoryResponseStore
        plainKeys = KeyDerivation(configuration: configuration, sessionHeaders: [:])
        ioQueues = (0..<8).map { DispatchQueue(label: "HTTPCaching.io.\($0)", qos: .userInitiated) }
        for queue in ioQueues { queue.setSpecific(key: ioQueueKey, value: true) }
        if let memory = store as? MemoryResponseStore { secret.withLock { $0 = memory.partitionSecret() } }
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

    /// The key a request is stored under (without any session's own headers): the method and
    /// normalized URL after the configuration's `keyRewriter`, the namespace, and for a
    /// request with credentials a keyed hash of them.
    /// - Throws: what the store's `partitionSecret()` throws, for a credentialed request.
    public func key(for request: URLRequest) throws -> CacheKey {
        try plainKeys.key(for: request, headers: plainKeys.headers(request), secret: partitionSecret)
    }

    /// Whether an entry is stored for a request (its `Vary` included), whatever its age.
    public func hasEntry(for request: URLRequest) -> Bool {
        cachedEntry(for: request) != nil
    }

    /// The entry stored for a request (its `Vary` included), whatever its age; nil if none.
    public func cachedEntry(for request: URLRequest) -> CacheEntry? {
        cachedEntry(for: request, keys: plainKeys)
    }

    /// Stores a response for a request by hand, as if it had just come from the network,
    /// whatever its status or headers say.
    /// - Parameter windows: windows for this entry alone; nil uses those set with
    ///   `setWindows(_:for:)`, else the cache's.
    /// - Returns: whether the store kept it (false if it exceeds the store's limits).
    /// - Throws: the store's error when it cannot write.
    @discardableResult
    public func storeResponse(_ response: HTTPURLResponse, data: Data, for request: URLRequest,
                              windows: CacheWindows? = nil) throws -> Bool {
        try storeResponse(response, data: data, for: request, windows: windows, keys: plainKeys)
    }

    /// Sets the windows for one request's entry: applied to the entry stored now, if any,
    /// and to every response stored for it from now on (this process only; the 10,000 most
    /// recent settings are kept). nil clears them.
    /// - Throws: the store's error when it cannot read or write the entry.
    public func setWindows(_ windows: CacheWindows?, for request: URLRequest) throws {
        try setWindows(windows, for: request, keys: plainKeys)
    }

    /// Removes the entry stored for a request, if any.
    /// - Throws: the store's error when it cannot remove.
    public func removeEntry(for request: URLRequest) throws {
        try removeEntry(for: request, keys: plainKeys)
    }

    /// Removes every entry.
    /// - Parameter progress: called as entries are removed (often, for a large disk store).
    /// - Throws: the store's error when it cannot remove.
    public func removeAll(progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeAll(progress: progress)
    }

    /// Removes every entry stored at or after `date`.
    /// - Parameter progress: called as entries are removed.
    /// - Throws: the store's error when it cannot list or remove.
    public func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeEntries(storedSince: date, progress: progress)
    }

    /// Removes every entry stored before `date`.
    /// - Parameter progress: called as entries are removed.
    /// - Throws: the store's error when it cannot list or remove.
    public func removeEntries(storedBefore date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeEntries(storedBefore: date, progress: progress)
    }

    /// Removes every entry that can no longer be of use by the cache's clock: past its usable
    /// and error windows, with no validator to revalidate it.
    /// - Parameter progress: called as entries are removed.
    /// - Throws: the store's error when it cannot list or remove.
    public func removeUnusableEntries(progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeUnusableEntries(at: now(), progress: progress)
    }

    /// The metadata of every stored entry (key, URL, size, stored-at, status), read without
    /// reading bodies.
    /// - Throws: the store's error when it cannot list.
    public func entryInfos() throws -> [StoredEntryInfo] {
        try store.entryInfos()
    }

    /// The bytes the stored entries account for.
    public var totalBytes: Int { store.totalBytes }

    /// How many entries are stored.
    public var entryCount: Int { store.entryCount }

    // MARK: - Management, keyed as a session keys

    func cachedEntry(for request: URLRequest, keys: KeyDerivation) -> CacheEntry? {
        let headers = keys.headers(request)
        guard let key = try? keys.key(for: request, headers: headers, secret: partitionSecret) else { return nil }
        guard var entry = lookup(key, headers: headers).entry else { return nil }
        entry.varyValues[Vary.variantListName] = nil // the cache's own bookkeeping
        return entry
    }

    func storeResponse(_ response: HTTPURLResponse, data: Data, for request: URLRequest, windows: CacheWindows?,
                       keys: KeyDerivation) throws -> Bool {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        let head = ResponseHead(response)
        let names = Vary.names(head.header("Vary"))
        var entry = CacheEntry(key: key, url: CacheKey.removingUserinfo(response.url ?? request.url ?? URL(fileURLWithPath: "/")),
                               statusCode: response.statusCode,
                               headers: Storability.storedHeaders(of: head, keepingCookies: configuration.storesResponsesSettingCookies),
                               body: data, storedAt: now(), windows: windows ?? windowsSetAhead(for: key),
                               varyValues: Vary.values(names: names, headers: headers))
        entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: configuration)
        var stored = true
        if !names.isEmpty && !names.contains("*") {
            var variant = entry
            variant.key.variant = Vary.variantName(names: names, headers: headers)
            stored = try write(variant, reporting: true)
        }
        return try write(entry, reporting: true) && stored
    }

    func setWindows(_ windows: CacheWindows?, for request: URLRequest, keys: KeyDerivation) throws {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        entryWindows.withLock { $0.set(windows, for: key) }
        if var entry = try store.entry(for: key) {
            entry.windows = windows
            entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: configuration)
            try store.write(entry)
        }
    }

    func removeEntry(for request: URLRequest, keys: KeyDerivation) throws {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        if let primary = try? store.entry(for: key) {
            let names = Vary.names(primary.header("Vary")).filter { $0 != "*" }
            if !names.isEmpty { try store.removeEntry(for: keys.variantKey(of: key, varyNames: names, headers: headers)) }
        }
        try store.removeEntry(for: key)
    }

    // MARK: - Engine (used by the URLProtocol plumbing)

    /// How many background refreshes are running now.
    var refreshesInFlight: Int {
        refreshing.withLock { $0.count }
    }

    func emit(_ kind: CacheEvent.Kind, _ key: CacheKey, _ url: URL?) {
        let date = now()
        switch kind {
        case .notStored(let reason):
            notStored.withLock { $0.set(NotStoredRecord(reason: reason, date: date), for: key.primary) }
        case .stored where key.variant == nil:
            notStored.withLock { $0.clear(key) }
        default:
            break
        }
        // An event never carries a password: userinfo is dropped from its URL.
        hub.emit(CacheEvent(kind: kind, key: key, url: url.map(CacheKey.removingUserinfo), date: date))
    }

    /// Why the last response for a key was not stored, if this process saw one since the
    /// last one stored.
    func lastNotStored(_ key: CacheKey) -> NotStoredRecord? {
        notStored.withLock { $0.record(for: key.primary) }
    }

    /// The I/O queue for a URL (or any text naming what the work is about).
    func ioQueue(for name: String) -> DispatchQueue {
        var hasher = Hasher()
        hasher.combine(name)
        return ioQueues[Int(UInt(bitPattern: hasher.finalize()) % UInt(ioQueues.count))]
    }

    /// Whether the calling thread is running on an I/O queue.
    var isOnIOQueue: Bool { DispatchQueue.getSpecific(key: ioQueueKey) == true }

    /// Whether the partition secret is at hand without I/O.
    var hasPartitionSecret: Bool { secret.withLock { $0 != nil } }

    /// The store's partition secret, read once.
    /// - Throws: what the store's `partitionSecret()` throws.
    func partitionSecret() throws -> [UInt8] {
        if let known = secret.withLock({ $0 }) { return known }
        let read = try store.partitionSecret()
        secret.withLock { $0 = read }
        return read
    }

    /// What a lookup that may not block found.
    enum ImmediateAnswer {
        case answered(entry: CacheEntry?, otherVariant: Bool)
        case needsIO
    }

    /// Looks an entry up without blocking, when the store can answer from memory.
    func lookupImmediately(_ key: CacheKey, headers: RequestHeaders) -> ImmediateAnswer {
        switch store.immediateEntry(for: key) {
        case .needsIO:
            return .needsIO
        case .absent:
            return .answered(entry: nil, otherVariant: false)
        case .found(let primary):
            if Vary.matches(primary, headers) { return .answered(entry: primary, otherVariant: false) }
            let names = Vary.names(primary.header("Vary"))
            if names.contains("*") { return .answered(entry: nil, otherVariant: true) }
            var variantKey = key
            variantKey.variant = Vary.variantName(names: names, headers: headers)
            switch store.immediateEntry(for: variantKey) {
            case .needsIO: return .needsIO
            case .absent: return .answered(entry: nil, otherVariant: true)
            case .found(let variant):
                return Vary.matches(variant, headers) ? .answered(entry: variant, otherVariant: false)
                                                      : .answered(entry: nil, otherVariant: true)
            }
        }
    }

    /// Looks an entry up, reading the store: the entry under the URL if its `Vary` matches,
    /// else the variant the request's values name.
    /// - Returns: the entry, and whether something is stored under the URL for other `Vary`
    ///   values (nil when the store could not be read, so the cache cannot tell).
    func lookup(_ key: CacheKey, headers: RequestHeaders) -> (entry: CacheEntry?, otherVariant: Bool?) {
        let (primary, failed) = readReporting(key)
        guard let primary else { return (nil, failed ? nil : false) }
        if Vary.matches(primary, headers) { return (primary, false) }
        let names = Vary.names(primary.header("Vary"))
        if names.contains("*") { return (nil, true) }
        var variantKey = key
        variantKey.variant = Vary.variantName(names: names, headers: headers)
        let (variant, variantFailed) = readReporting(variantKey)
        guard let variant, Vary.matches(variant, headers) else { return (nil, variantFailed ? nil : true) }
        return (variant, false)
    }

    /// Reads the store; a failing read is reported and treated as a miss.
    func read(_ key: CacheKey) -> CacheEntry? {
        readReporting(key).entry
    }

    /// Reads the store, saying whether the read failed (damaged entry, store error), which is
    /// reported and treated as a miss.
    private func readReporting(_ key: CacheKey) -> (entry: CacheEntry?, failed: Bool) {
        do {
            return (try store.entry(for: key), false)
        } catch let ResponseStoreError.corruptEntry(_, reason) {
            emit(.corrupted(reason: reason), key, URL(string: key.url))
            return (nil, true)
        } catch {
            emit(.storeFailed(reason: "read: \(error)"), key, URL(string: key.url))
            return (nil, true)
        }
    }

    /// Writes an entry, reporting `stored`, evictions and failures; false if not stored.
    @discardableResult
    func write(_ entry: CacheEntry) -> Bool {
        (try? write(entry, reporting: false)) ?? false
    }

    /// Writes an entry to the store's memory only (a delegate's `.allowedInMemoryOnly`),
    /// reporting as `write`; a store that keeps nothing in memory stores nothing
    /// (`notStored(.memoryOnly)`).
    @discardableResult
    func writeInMemory(_ entry: CacheEntry) -> Bool {
        (try? write(entry, reporting: false, inMemoryOnly: true)) ?? false
    }

    private func write(_ entry: CacheEntry, reporting: Bool, inMemoryOnly: Bool = false) throws -> Bool {
        var entry = entry
        var dropped: [CacheKey] = []
        if entry.key.variant == nil {
            dropped = listVariants(in: &entry)
        } else if entry.varyValues[Vary.variantListName] != nil {
            entry.varyValues[Vary.variantListName] = nil // only the entry under the URL lists variants
        }
        let result: StoreWriteResult
        do {
            if inMemoryOnly {
                guard let written = try store.writeInMemory(entry) else {
                    emit(.notStored(.memoryOnly), entry.key, entry.url)
                    return false
                }
                result = written
            } else {
                result = try store.write(entry)
            }
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), entry.key, entry.url)
            if reporting { throw error }
            return false
        }
        for evicted in result.evicted { emit(.evicted, evicted, URL(string: evicted.url)) }
        if result.stored {
            emit(.stored, entry.key, entry.url)
            for variant in dropped {
                remove(variant, url: entry.url)
                emit(.evicted, variant, entry.url)
            }
        } else {
            emit(.notStored(.tooLarge(bytes: entry.byteCount, limit: store.maxEntrySize)), entry.key, entry.url)
        }
        return result.stored
    }

    /// The variants one URL keeps under `Vary`: each combination of the values of the fields
    /// a response names is an entry of its own (its key's `variant`), and the entry stored
    /// under the URL itself (the latest response) lists them. Past this many, storing a new
    /// combination removes the one stored longest ago. Processes writing variants of one URL
    /// at the same moment may each miss the other's newest name; a variant left off the list
    /// still answers its requests, and the store's own limits remove it in time.
    public static let maxVariantsPerURL = Vary.maxVariantsPerURL

    /// Before an entry is written under its URL: lists its variant after those already
    /// listed, and returns the keys of the variants that fall off the list (stored longest
    /// ago), to remove once the write succeeds.
    private func listVariants(in entry: inout CacheEntry) -> [CacheKey] {
        let names = Vary.names(entry.header("Vary")).filter { $0 != "*" }
        guard !names.isEmpty else {
            entry.varyValues[Vary.variantListName] = nil
            return []
        }
        let name = Vary.variantName(names: names, values: entry.varyValues)
        var list = read(entry.key).map(Vary.variantList(of:)) ?? []
        list.removeAll { $0 == name }
        list.append(name)
        var dropped: [CacheKey] = []
        while list.count > Vary.maxVariantsPerURL {
            var key = entry.key
            key.variant = list.removeFirst()
            dropped.append(key)
        }
        entry.varyValues[Vary.variantListName] = list.joined(separator: ",")
        return dropped
    }

    /// Invalidates what is stored for a URL (RFC 9111 section 4.4): the entry under its key
    /// and every variant it lists, plus the variant `headers` select, then reports
    /// `invalidated`.
    func invalidate(_ key: CacheKey, headers: RequestHeaders, url: URL?) {
        var keys: [CacheKey] = []
        if let primary = read(key.primary) {
            var names = Set(Vary.variantList(of: primary))
            let vary = Vary.names(primary.header("Vary")).filter { $0 != "*" }
            if !vary.isEmpty { names.insert(Vary.variantName(names: vary, headers: headers)) }
            for name in names.sorted() {
                var variant = key.primary
                variant.variant = name
                keys.append(variant)
            }
        }
        keys.append(key.primary)
        for key in keys { remove(key, url: url) }
        emit(.invalidated, key.primary, url)
    }

    func remove(_ key: CacheKey, url: URL?) {
        do {
            try store.removeEntry(for: key)
        } catch {
            emit(.storeFailed(reason: "remove: \(error)"), key, url)
        }
    }

    /// Windows set ahead of time for a key, if any.
    func windowsSetAhead(for key: CacheKey) -> CacheWindows? {
        entryWindows.withLock { $0.windows(for: key) }
    }

    /// Claims the one refresh slot for a key in this process; false if a refresh is already running.
    func beginRefresh(_ key: CacheKey) -> Bool {
        refreshing.withLock { $0.insert(key).inserted }
    }

    func endRefresh(_ key: CacheKey) {
        refreshing.withLock { _ = $0.remove(key) }
    }
}

/// Windows set ahead of time, the most recent 10,000 kept.
struct BoundedWindows {
    private var windows: [CacheKey: CacheWindows] = [:]
    private var order: [CacheKey] = []
    private let limit = 10_000

    func windows(for key: CacheKey) -> CacheWindows? {
        windows.isEmpty ? nil : windows[key]
    }

    mutating func set(_ value: CacheWindows?, for key: CacheKey) {
        guard let value else {
            windows[key] = nil
            return
        }
        if windows.updateValue(value, forKey: key) == nil { order.append(key) }
        if order.count > limit {
            let excess = order.count - limit
            for old in order.prefix(excess) { windows[old] = nil }
            order.removeFirst(excess)
        }
    }
}

/// Why a response was not stored, and when (by the cache's clock).
struct NotStoredRecord: Sendable, Equatable {
    var reason: NotStoredReason
    var date: Date
}

/// The last not-stored reason per key, the most recent 1,000 kept.
struct BoundedNotStored {
    private var records: [CacheKey: NotStoredRecord] = [:]
    private var order: [CacheKey] = []
    private let limit = 1_000

    func record(for key: CacheKey) -> NotStoredRecord? {
        records.isEmpty ? nil : records[key]
    }

    mutating func set(_ record: NotStoredRecord, for key: CacheKey) {
        if records.updateValue(record, forKey: key) == nil { order.append(key) }
        if order.count > limit {
            let excess = order.count - limit
            for old in order.prefix(excess) { records[old] = nil }
            order.removeFirst(excess)
        }
    }

    mutating func clear(_ key: CacheKey) {
        guard !records.isEmpty, records.removeValue(forKey: key) != nil else { return }
        order.removeAll { $0 == key }
    }
}

/// Requests in flight per key, so concurrent misses for one key send one request: the first
/// leads, the others wait for its answer.
final class Flights: Sendable {
    enum Role { case leader, follower }

    private let waiting = Mutex<[CacheKey: [UncheckedBox<Exchange>]]>([:])

    func join(_ key: CacheKey, _ exchange: Exchange) -> Role {
        waiting.withLock { waiting in
            if waiting[key] != nil {
                waiting[key]!.append(UncheckedBox(exchange))
                return .follower
            }
            waiting[key] = []
            return .leader
        }
    }

    /// How many requests wait on the flight for a key.
    func followers(of key: CacheKey) -> Int {
        waiting.withLock { $0[key]?.count ?? 0 }
    }

    func leave(_ key: CacheKey, _ exchange: Exchange) {
        waiting.withLock { waiting in
            waiting[key]?.removeAll { $0.value === exchange }
        }
    }

    /// The leader is done: each follower gets what it stored (nil if nothing).
    func end(_ key: CacheKey, entry: CacheEntry?) {
        let followers = waiting.withLock { $0.removeValue(forKey: key) } ?? []
        for follower in followers { follower.value.collapsedResult(entry) }
    }
}
