import Foundation
import Synchronization

/// What keeps a tiered store's memory from serving an entry another process replaced or
/// removed in the back store they share: a Redis store's invalidation messages (client-side
/// caching), or a disk store's journal, followed every 10 ms.
///
/// A ticket is the epoch (bumped by every change told, and whenever telling stops or starts)
/// and whether memory may serve. A read or write takes a ticket before it goes to the back
/// store and fills memory only if the ticket is still current, so an entry read just before
/// its invalidation arrived is never put into memory after it.
final class NearCoherence: Sendable {
    enum Source: Sendable {
        /// The back store is not shared with other processes (memory, a custom store): memory
        /// always serves.
        case none
        /// A disk store: its journal tells what other processes changed.
        case disk
        /// A Redis server: client-side caching tells what anyone changed.
        case redis(RedisConfiguration, RedisEntryLayout)
        /// A Redis Cluster, or the primary Redis Sentinel names: client-side caching on every
        /// primary tells what anyone changed (`RedisInvalidationFleet`).
        case redisPrimaries(RedisBackend, RedisConfiguration, RedisEntryLayout)
    }

    /// Drops from memory the keys the closure gives, run under the tiered store's lock that
    /// also guards every fill (so no fill slips between finding the keys and dropping them).
    typealias Drop = @Sendable (() -> [CacheKey]) -> Void

    let source: Source
    /// `epoch << 1 | serving`.
    private let state: Atomic<UInt64>
    /// The Redis key of each entry in memory, to find it from an invalidation.
    private let redisKeys = Mutex<[[UInt8]: CacheKey]>([:])
    private let listener = Mutex<(any InvalidationFollowing)?>(nil)
    private let drop: Drop
    private let flush: @Sendable () -> Void

    init(source: Source, drop: @escaping Drop, flush: @escaping @Sendable () -> Void) {
        self.source = source
        self.drop = drop
        self.flush = flush
        switch source {
        case .none, .disk: state = Atomic(1)
        case .redis, .redisPrimaries: state = Atomic(0) // until tracking is on
        }
    }

    /// Starts following Redis (nothing for the other sources).
    func start() {
        let up: @Sendable () -> Void = { [self] in setServing(true) }
        let lost: @Sendable () -> Void = { [self] in setServing(false) }
        let told: RedisInvalidationListener.Invalidated = { [self] keys in invalidated(keys) }
        let listener: any InvalidationFollowing
        switch source {
        case .redis(let configuration, let layout):
            listener = RedisInvalidationListener(configuration: configuration, prefix: layout.entryPrefix,
                                                 up: up, lost: lost, invalidated: told)
        case .redisPrimaries(let backend, let configuration, let layout):
            listener = RedisInvalidationFleet(backend: backend, configuration: configuration, prefix: layout.entryPrefix,
                                              up: up, lost: lost, invalidated: told)
        case .none, .disk:
            return
        }
        self.listener.withLock { $0 = listener }
        listener.start()
    }

    /// Stops following (the tiered store is going away).
    func stop() {
        listener.withLock { listener in
            listener?.stop()
            listener = nil // the thread holds it until it ends
        }
    }

    /// The current ticket.
    var ticket: UInt64 { state.load(ordering: .acquiring) }

    /// The primaries followed in front of a Redis Cluster or a Sentinel-watched primary (none
    /// for the other sources).
    var followedPrimaries: [RedisNodeAddress] {
        (listener.withLock { $0 } as? RedisInvalidationFleet)?.primaries ?? []
    }

    /// Whether memory may serve now.
    var isServing: Bool { ticket & 1 == 1 }

    /// Whether a fill that took `ticket` before reading the back store may fill memory: memory
    /// was serving then, and nothing was told since.
    func allows(_ ticket: UInt64) -> Bool {
        ticket & 1 == 1 && state.load(ordering: .acquiring) == ticket
    }

    /// Notes the Redis key of an entry put into memory; call under the lock `Drop` runs under.
    func remember(_ key: CacheKey, memory: MemoryResponseStore) {
        let layout: RedisEntryLayout
        switch source {
        case .redis(_, let redis), .redisPrimaries(_, _, let redis): layout = redis
        case .none, .disk: return
        }
        let redisKey = layout.entryKey(key)
        redisKeys.withLock { keys in
            keys[redisKey] = key
            // Keys memory evicted stay until here: keep only those it still holds.
            if keys.count > 2 * memory.countLimit + 1024 {
                let held = Set(memory.entryInfos().map(\.key))
                keys = keys.filter { held.contains($0.value) }
            }
        }
    }

    /// Keys other processes changed in a disk store (nil: every key).
    func changed(_ keys: [CacheKey]?) {
        bump()
        guard let keys else { return flushAll() }
        if !keys.isEmpty { drop { keys } }
    }

    /// Redis keys anyone changed (nil: every key).
    private func invalidated(_ changed: [[UInt8]]?) {
        bump()
        guard let changed else { return flushAll() }
        drop { [self] in redisKeys.withLock { keys in changed.compactMap { keys.removeValue(forKey: $0) } } }
    }

    private func flushAll() {
        flush()
        redisKeys.withLock { $0.removeAll() }
    }

    private func bump() {
        state.wrappingAdd(2, ordering: .acquiringAndReleasing)
    }

    /// Starts or stops serving from memory, with a new epoch, and empties memory.
    private func setServing(_ serving: Bool) {
        var current = state.load(ordering: .acquiring)
        while true {
            let next = ((current >> 1) &+ 1) << 1 | (serving ? 1 : 0)
            let (exchanged, original) = state.compareExchange(expected: current, desired: next, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        flushAll()
    }
}

/// What follows Redis for a near cache: one server's listener, or a fleet of them.
protocol InvalidationFollowing: Sendable {
    func start()
    func stop()
}

extension RedisInvalidationListener: InvalidationFollowing {}
extension RedisInvalidationFleet: InvalidationFollowing {}

/// Follows the journals of the disk stores behind tiered stores, every 10 ms, on one thread:
/// each store's `tail()` reads what other processes appended (one `stat` and one `fstat` when
/// nothing changed) and tells its `changeHandler`.
final class JournalFollower: Sendable {
    static let shared = JournalFollower()
    /// How often the journals are read.
    static let interval: TimeInterval = 0.01

    private struct Followed: @unchecked Sendable {
        weak var store: DiskResponseStore?
    }

    private let stores = Mutex<(list: [ObjectIdentifier: Followed], running: Bool)>(([:], false))

    /// Follows a store's journal until `unfollow(_:)` or the store goes away.
    func follow(_ store: DiskResponseStore) {
        let start = stores.withLock { state -> Bool in
            state.list[ObjectIdentifier(store)] = Followed(store: store)
            defer { state.running = true }
            return !state.running
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "swift-http-caching.journal-follower"
            thread.start()
        }
    }

    func unfollow(_ store: DiskResponseStore) {
        stores.withLock { _ = $0.list.removeValue(forKey: ObjectIdentifier(store)) }
    }

    /// Reads every followed journal, outside the lock; ends when nothing is followed.
    private func run() {
        while true {
            let followed = stores.withLock { state -> [DiskResponseStore]? in
                state.list = state.list.filter { $0.value.store.map { !$0.isClosed } ?? false }
                if state.list.isEmpty {
                    state.running = false
                    return nil
                }
                return state.list.values.compactMap(\.store)
            }
            guard let followed else { return }
            for store in followed { store.tail() }
            usleep(UInt32(Self.interval * 1e6))
        }
    }
}
