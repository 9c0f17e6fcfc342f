import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a cache does behind its public face: its store, clock and events, the I/O queues store
/// work runs on, lookups and writes that keep `Vary` variants in order, flights of concurrent
/// misses, background refresh slots, and what `explain` remembers. The URLProtocol plumbing and
/// the management calls work through it; `HTTPCache` is the facade users see.
final class CacheEngine: Sendable {
    let configuration: CacheConfiguration
    let store: any ResponseStore
    let now: @Sendable () -> Date
    let hub = EventHub()
    let flights = Flights()
    /// The cache's own timeouts; tests hold them (`Deadlines.holdForTests`).
    let deadlines = Deadlines()
    /// What the cache has done, counted as it happens.
    let statistics: StatisticsCounters
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
    /// Windows set ahead of time for single entries (`setWindows`), the 10,000 most recent.
    let entryWindows = Mutex(BoundedMap<CacheKey, CacheWindows>(limit: 10_000))
    /// Keyed bodies to remove at their next lookup, their URL invalidated.
    let keyedBodyPurges = Mutex(KeyedBodyPurges())
    /// Why the last response for a key was not stored, for `explain`: the 1,000 most recent.
    private let notStored = Mutex(BoundedMap<CacheKey, NotStoredRecord>(limit: 1_000))
    /// Keys whose miss, sent by Foundation's own class (`DirectForward`), was redirected out of
    /// the cache's sight: their misses go through the forwarding session. The 1,000 most recent.
    private let redirecting = Mutex(BoundedMap<CacheKey, Bool>(limit: 1_000))

    init(configuration: CacheConfiguration, store: any ResponseStore, now: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.store = store
        self.now = now
        statistics = StatisticsCounters(since: now())
        storeIsInMemory = store.answersFromMemory
        ioQueues = (0..<8).map { DispatchQueue(label: "HTTPCaching.io.\($0)", qos: .userInitiated) }
        for queue in ioQueues { queue.setSpecific(key: ioQueueKey, value: true) }
        if storeIsInMemory, let known = try? store.partitionSecret() { secret.withLock { $0 = known } }
    }

    /// How many background refreshes are running now.
    var refreshesInFlight: Int {
        refreshing.withLock { $0.count }
    }

    func emit(_ kind: CacheEvent.Kind, _ key: CacheKey, _ url: URL?) {
        statistics.count(kind)
        let date = now()
        switch kind.value {
        case .notStored(let reason):
            notStored.withLock { $0[key.primary] = NotStoredRecord(reason: reason, date: date) }
        case .stored where key.variant == nil:
            notStored.withLock { $0[key] = nil }
        default:
            break
        }
        // An event never carries a password: userinfo is dropped from its URL.
        hub.emit(CacheEvent(kind: kind, key: key, url: url.map(CacheKey.removingUserinfo), date: date))
    }

    /// Why the last response for a key was not stored, if this process saw one since the
    /// last one stored.
    func lastNotStored(_ key: CacheKey) -> NotStoredRecord? {
        notStored.withLock { $0[key.primary] }
    }

    /// Notes that a miss for `key` sent by Foundation's own class was redirected (`redirects`).
    func noteRedirects(_ key: CacheKey) {
        redirecting.withLock { $0[key] = true }
    }

    /// Whether a miss for `key` was redirected out of the cache's sight before.
    func redirects(_ key: CacheKey) -> Bool {
        redirecting.withLock { $0[key] } ?? false
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

    func remove(_ key: CacheKey, url: URL?) {
        do {
            try store.removeEntry(for: key)
        } catch {
            emit(.storeFailed(reason: "remove: \(error)"), key, url)
        }
    }

    /// Windows set ahead of time for a key, if any.
    func windowsSetAhead(for key: CacheKey) -> CacheWindows? {
        entryWindows.withLock { $0[key] }
    }

    /// Claims the one refresh slot for a key in this process; false if a refresh is already running.
    func beginRefresh(_ key: CacheKey) -> Bool {
        refreshing.withLock { $0.insert(key).inserted }
    }

    func endRefresh(_ key: CacheKey) {
        refreshing.withLock { _ = $0.remove(key) }
    }
}

/// Why a response was not stored, and when (by the cache's clock).
struct NotStoredRecord: Sendable, Equatable {
    var reason: NotStoredReason
    var date: Date
}
