import Foundation
import Synchronization

/// A memory store in front of another store (usually a `DiskResponseStore`): reads fill
/// memory, writes and removals go to both, and each applies its own limits.
///
/// Sizes, counts, listings, the partition secret and refresh claims are the back store's: it
/// holds everything the memory store holds. A removal or a newer write always wins over a
/// read in flight: a read fills memory only if no write or removal of its key began while it
/// read the back store. Entries a `DiskResponseStore` evicts in the background leave memory
/// too (the tiered store takes over its `evictionHandler`; set the tiered store's instead).
///
/// Memory stays coherent with other processes sharing the back store:
/// - In front of a `DiskResponseStore`, the disk store's journal is read every 10 ms (on one
///   thread for all such stores), and entries another process replaced or removed leave memory;
///   a replaced entry is served by another process at most about 10 ms after its write returned.
/// - In front of a `RedisResponseStore` on one server, memory is a near cache: Redis's
///   client-side caching (`CLIENT TRACKING` in `BCAST` mode on the entries' prefix, over one
///   connection of its own) tells of every entry any process replaces, removes, or Redis
///   expires or evicts, and it leaves memory. Memory serves only while that connection is
///   tracking: from its loss (found at once when the connection closes, within about a second
///   and `commandTimeout` when it goes silent) until tracking is on again, memory is emptied
///   and every read goes to Redis. In front of a Redis Cluster every primary is tracked, in
///   front of a Sentinel-watched primary the one the sentinels name (`RedisInvalidationFleet`):
///   memory serves only while every current primary is tracked.
public final class TieredResponseStore: ResponseStore {
    /// The fast front tier.
    public let memory: MemoryResponseStore
    /// The tier that holds everything.
    public let back: any ResponseStore

    private let shared = Shared()
    let coherence: NearCoherence
    /// For tests: runs in `entry(for:)` after the back store answered, before memory is filled.
    let afterBackRead = Mutex<(@Sendable () -> Void)?>(nil)

    /// A tiered store. The default front is a `MemoryResponseStore` of 32 MiB and 1,000 entries.
    /// In front of a disk or Redis store, memory follows what other processes change (see the
    /// type's summary); in front of Redis this opens one more connection, for invalidations.
    public init(memory: MemoryResponseStore? = nil, back: any ResponseStore) {
        let memory = memory ?? (try! MemoryResponseStore(byteLimit: 32 << 20, countLimit: 1000))
        self.memory = memory
        self.back = back
        let shared = self.shared
        coherence = NearCoherence(source: Self.source(of: back),
                                  drop: { keys in shared.forget(keys, in: memory) },
                                  flush: { shared.forgetAll(in: memory) { $0.removeAll(progress: { _ in }) } })
        if let disk = back as? BackgroundEvicting {
            let previous = disk.evictionHandler
            disk.evictionHandler = { keys in
                shared.forget(keys, in: memory)
                previous?(keys)
                shared.report(keys)
            }
        }
        if let disk = back as? DiskResponseStore {
            let coherence = self.coherence, previous = disk.changeHandler
            disk.changeHandler = { [weak coherence] keys in
                coherence?.changed(keys) // gone with this store, memory and all
                previous?(keys)
            }
            JournalFollower.shared.follow(disk)
        }
        coherence.start()
    }

    deinit { coherence.stop() }

    /// What tells memory of other processes' changes to `back`.
    private static func source(of back: any ResponseStore) -> NearCoherence.Source {
        if back is DiskResponseStore { return .disk }
        guard let redis = back as? RedisResponseStore else { return .none }
        if case .server = redis.backend { return .redis(redis.configuration, redis.layout) }
        return .redisPrimaries(redis.backend, redis.configuration, redis.layout)
    }

    /// Whether memory answers now: always, except in front of Redis while an invalidation
    /// connection is not tracking (before it first is, from its loss until it is back, and
    /// while a new primary of a cluster or Sentinel group is not tracked yet).
    public var servesFromMemory: Bool { coherence.isServing }

    /// Puts an entry into memory; call under `shared.versions`' lock.
    private func fill(_ entry: CacheEntry) -> StoreWriteResult {
        defer { coherence.remember(entry.key, memory: memory) }
        return memory.write(entry)
    }

    /// Called with the keys the back store evicted in the background (a `DiskResponseStore`'s
    /// `evictionHandler`), after they left memory; without a handler they are reported in the
    /// `evicted` of the next write's result. The default is nil.
    var evictionHandler: (@Sendable ([CacheKey]) -> Void)? {
        get { shared.handler.withLock { $0 } }
        set { shared.handler.withLock { $0 = newValue } }
    }

    /// The entry from memory (a use the back store is told of), else from the back store
    /// (then kept in memory too, unless a write or removal of the key began meanwhile).
    /// - Throws: what the back store throws.
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        if coherence.isServing, let entry = memory.entry(for: key) {
            back.noteUse(of: key)
            return entry
        }
        let stripe = Shared.stripe(of: key)
        let ticket = coherence.ticket
        let before = shared.versions.withLock { $0[stripe] }
        guard let entry = try back.entry(for: key) else { return nil }
        afterBackRead.withLock { $0 }?()
        shared.versions.withLock { versions in
            if versions[stripe] == before && coherence.allows(ticket) { _ = fill(entry) }
        }
        return entry
    }

    /// Writes to the back store, then to memory (unless the key was evicted, removed or written
    /// again meanwhile); what the back store evicts leaves memory too.
    /// - Throws: what the back store throws (memory then drops the key).
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        var result = StoreWriteResult(stored: false)
        let stripe = Shared.stripe(of: entry.key)
        let ticket = coherence.ticket
        let before = shared.versions.withLock { $0[stripe] }
        defer {
            shared.versions.withLock { versions in
                // An eviction, removal or other write of the key during this one (the back store
                // may evict it in the background before this returns), or a change another
                // process made: memory is not filled.
                let undisturbed = versions[stripe] == before && coherence.allows(ticket)
                versions[stripe] &+= 1
                if result.stored && undisturbed { _ = fill(entry) } else { memory.removeEntry(for: entry.key) }
            }
            shared.forget(result.evicted, in: memory)
        }
        result = try back.write(entry)
        result.evicted += shared.takeUnreported()
        return result
    }

    /// Writes to memory only, after removing the key from the back store (so an older entry
    /// there never answers once memory lets this one go). Memory-only entries are not in the
    /// back store's counts and listings.
    /// - Throws: what the back store's removal throws (memory is then not written).
    public func writeInMemory(_ entry: CacheEntry) throws -> StoreWriteResult? {
        try back.removeEntry(for: entry.key)
        return shared.versions.withLock { versions in
            versions[Shared.stripe(of: entry.key)] &+= 1
            guard coherence.isServing else {
                memory.removeEntry(for: entry.key)
                return StoreWriteResult(stored: false) // memory would not serve it
            }
            return fill(entry)
        }
    }

    /// A writer to the back store that also keeps the body (while it fits memory's entry
    /// limit) to fill memory on commit, under the same rules as `write(_:)`.
    /// - Throws: what the back store's `makeWriter(for:)` throws.
    public func makeWriter(for key: CacheKey) throws -> any ResponseStoreWriter {
        let ticket = coherence.ticket
        let before = shared.versions.withLock { $0[Shared.stripe(of: key)] }
        return TieredWriter(back: try back.makeWriter(for: key), memory: memory, shared: shared, key: key,
                            version: before, coherence: coherence, ticket: ticket)
    }

    /// Removes the entry from both tiers.
    /// - Throws: what the back store throws.
    public func removeEntry(for key: CacheKey) throws {
        memory.removeEntry(for: key)
        defer { shared.forget([key], in: memory) }
        try back.removeEntry(for: key)
    }

    /// Removes every entry from both tiers, reporting the back store's progress.
    /// - Throws: what the back store throws.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        memory.removeAll(progress: { _ in })
        defer { shared.forgetAll(in: memory) { $0.removeAll(progress: { _ in }) } }
        try back.removeAll(progress: progress)
    }

    /// Removes the matching entries from both tiers, reporting the back store's progress.
    /// - Throws: what the back store throws.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        memory.removeEntries(where: predicate, progress: { _ in })
        try back.removeEntries(where: predicate, progress: progress)
        // Reads in flight may have brought removed entries back: keep only what the back store has.
        let remaining = (try? back.entryInfos()).map { Set($0.map(\.key)) }
        shared.forgetAll(in: memory) { memory in
            if let remaining {
                memory.removeEntries(where: { !remaining.contains($0.key) }, progress: { _ in })
            } else {
                memory.removeAll(progress: { _ in })
            }
        }
    }

    /// The back store's metadata: it holds everything memory holds.
    /// - Throws: what the back store throws.
    public func entryInfos() throws -> [StoredEntryInfo] { try back.entryInfos() }

    /// From memory if there; else what the back store can tell without waiting (a disk
    /// store's entry whose bytes are in the page cache, then kept in memory too, under the
    /// same rule as `entry(for:)`).
    public func immediateEntry(for key: CacheKey) -> ImmediateLookup {
        if coherence.isServing, case .found(let entry) = memory.immediateEntry(for: key) { return .found(entry) }
        let stripe = Shared.stripe(of: key)
        let ticket = coherence.ticket
        let before = shared.versions.withLock { $0[stripe] }
        let answer = back.immediateEntry(for: key)
        if case .found(let entry) = answer {
            shared.versions.withLock { versions in
                if versions[stripe] == before && coherence.allows(ticket) { _ = fill(entry) }
            }
        }
        return answer
    }

    /// The back store's limit.
    public var maxEntrySize: Int { back.maxEntrySize }

    /// The back store's secret.
    /// - Throws: what the back store throws.
    public func partitionSecret() throws -> [UInt8] { try back.partitionSecret() }

    /// Claimed in the back store, which other processes share.
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool { back.claimRefresh(of: key, lease: lease) }

    /// The back store's claim, and why not.
    func claim(_ key: CacheKey, lease: TimeInterval) -> ClaimOutcome {
        back.claimOutcome(of: key, lease: lease)
    }

    /// Released in the back store.
    public func releaseRefresh(of key: CacheKey) { back.releaseRefresh(of: key) }

    /// The back store's bytes.
    public var totalBytes: Int { back.totalBytes }
    /// The back store's entry count.
    public var entryCount: Int { back.entryCount }

    /// A tiered store's writer: the back store's, with the body kept for memory while it fits.
    private final class TieredWriter: ResponseStoreWriter, @unchecked Sendable {
        private let back: any ResponseStoreWriter
        private let memory: MemoryResponseStore
        private let shared: Shared
        private let key: CacheKey
        private let version: UInt64
        private let coherence: NearCoherence
        private let ticket: UInt64
        private var kept: Data? = Data()

        init(back: any ResponseStoreWriter, memory: MemoryResponseStore, shared: Shared, key: CacheKey, version: UInt64,
             coherence: NearCoherence, ticket: UInt64) {
            self.back = back
            self.memory = memory
            self.shared = shared
            self.key = key
            self.version = version
            self.coherence = coherence
            self.ticket = ticket
        }

        func append(_ bytes: Data) throws {
            try back.append(bytes)
            guard var body = kept else { return }
            kept = nil // appended to in place, not copied
            guard body.count + bytes.count <= min(memory.maxEntrySize, memory.byteLimit) else { return }
            body.append(bytes)
            kept = body
        }

        var body: Data { get throws { try kept ?? back.body } }

        /// Commits to the back store, then fills memory with what was kept, unless the key was
        /// evicted, removed or written meanwhile.
        func commit(_ entries: [CacheEntry]) throws -> StoreWriteResult {
            var result = StoreWriteResult(stored: false)
            defer {
                shared.versions.withLock { versions in
                    let stripe = Shared.stripe(of: key)
                    let undisturbed = versions[stripe] == version && coherence.allows(ticket)
                    versions[stripe] &+= 1
                    for var entry in entries {
                        if result.stored && undisturbed, let kept {
                            entry.body = kept
                            memory.write(entry)
                            coherence.remember(entry.key, memory: memory)
                        } else {
                            memory.removeEntry(for: entry.key)
                        }
                    }
                }
                shared.forget(result.evicted, in: memory)
            }
            result = try back.commit(entries)
            result.evicted += shared.takeUnreported()
            return result
        }

        func abort() { back.abort() }
    }

    /// What the store and its back store's eviction handler share.
    private final class Shared: Sendable {
        /// Per-key versions, in stripes: bumped by every write and removal, checked by a read
        /// before it fills memory. Keys sharing a stripe only cost a fill now and then.
        let versions = Mutex([UInt64](repeating: 0, count: 64))
        let handler = Mutex<(@Sendable ([CacheKey]) -> Void)?>(nil)
        /// Background evictions waiting for a write to report them (no handler was set).
        private let unreported = Mutex<[CacheKey]>([])

        func report(_ keys: [CacheKey]) {
            if let handler = handler.withLock({ $0 }) { return handler(keys) }
            unreported.withLock { unreported in
                unreported += keys
                if unreported.count > 10_000 { unreported.removeFirst(unreported.count - 10_000) }
            }
        }

        func takeUnreported() -> [CacheKey] {
            unreported.withLock { unreported in
                defer { unreported.removeAll() }
                return unreported
            }
        }

        static func stripe(of key: CacheKey) -> Int { key.hashValue & 63 }

        /// Drops keys from memory, so no read in flight brings them back.
        func forget(_ keys: [CacheKey], in memory: MemoryResponseStore) {
            guard !keys.isEmpty else { return }
            forget({ keys }, in: memory)
        }

        /// Drops from memory the keys `find` gives under the lock every fill takes.
        func forget(_ find: () -> [CacheKey], in memory: MemoryResponseStore) {
            versions.withLock { versions in
                for key in find() {
                    versions[Self.stripe(of: key)] &+= 1
                    memory.removeEntry(for: key)
                }
            }
        }

        /// Changes memory wholesale, so no read in flight brings anything back.
        func forgetAll(in memory: MemoryResponseStore, _ change: (MemoryResponseStore) -> Void) {
            versions.withLock { versions in
                for index in versions.indices { versions[index] &+= 1 }
                change(memory)
            }
        }
    }
}

/// A store that evicts entries in the background, outside any write (the disk store's
/// maintenance), and says which: a tiered store drops them from memory.
protocol BackgroundEvicting: AnyObject {
    /// Called with the keys evicted in the background.
    var evictionHandler: (@Sendable ([CacheKey]) -> Void)? { get set }
}

extension DiskResponseStore: BackgroundEvicting {}

extension TieredResponseStore: ReportingClaims {}
