import Foundation

/// A memory store in front of another store (usually a `DiskResponseStore`): reads fill
/// memory, writes and removals go to both, and each applies its own limits.
///
/// Sizes and counts are the back store's: it holds everything the memory store holds.
public final class TieredResponseStore: ResponseStore {
    /// The fast front tier.
    public let memory: MemoryResponseStore
    /// The tier that holds everything.
    public let back: any ResponseStore

    /// A tiered store. The default front is a `MemoryResponseStore` of 32 MiB and 1,000 entries.
    public init(memory: MemoryResponseStore? = nil, back: any ResponseStore) {
        self.memory = memory ?? (try! MemoryResponseStore(byteLimit: 32 << 20, countLimit: 1000))
        self.back = back
    }

    /// The entry from memory, else from the back store (then kept in memory too).
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        if let entry = memory.entry(for: key) { return entry }
        guard let entry = try back.entry(for: key) else { return nil }
        memory.write(entry)
        return entry
    }

    /// Writes to the back store, then to memory; what the back store evicts leaves memory too.
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        let result = try back.write(entry)
        if result.stored { memory.write(entry) } else { memory.removeEntry(for: entry.key) }
        for key in result.evicted { memory.removeEntry(for: key) }
        return result
    }

    /// Removes the entry from both tiers.
    public func removeEntry(for key: CacheKey) throws {
        memory.removeEntry(for: key)
        try back.removeEntry(for: key)
    }

    /// Removes every entry from both tiers, reporting the back store's progress.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        memory.removeAll(progress: { _ in })
        try back.removeAll(progress: progress)
    }

    /// Removes the matching entries from both tiers, reporting the back store's progress.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        memory.removeEntries(where: predicate, progress: { _ in })
        try back.removeEntries(where: predicate, progress: progress)
    }

    /// The back store's metadata: it holds everything memory holds.
    public func entryInfos() throws -> [StoredEntryInfo] { try back.entryInfos() }

    /// From memory if there; else only a read of the back store can tell.
    public func immediateEntry(for key: CacheKey) -> ImmediateLookup {
        if case .found(let entry) = memory.immediateEntry(for: key) { return .found(entry) }
        return back.immediateEntry(for: key)
    }

    /// The back store's limit.
    public var maxEntrySize: Int { back.maxEntrySize }

    /// The back store's secret.
    public func partitionSecret() throws -> [UInt8] { try back.partitionSecret() }

    /// Claimed in the back store, which other processes share.
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool { back.claimRefresh(of: key, lease: lease) }

    /// Released in the back store.
    public func releaseRefresh(of key: CacheKey) { back.releaseRefresh(of: key) }

    /// The back store's bytes.
    public var totalBytes: Int { back.totalBytes }
    /// The back store's entry count.
    public var entryCount: Int { back.entryCount }
}
