import Foundation

/// Where a cache keeps its entries: memory, disk, or your own.
///
/// Implementations must be thread-safe: the cache calls them from many threads at once,
/// including from `URLProtocol.startLoading`, so reads should be quick. An entry that cannot
/// be read (corrupt, foreign) is a miss: return nil (and drop it), do not throw.
/// `StoreConformance` in the tests holds the behaviour every store must show.
public protocol ResponseStore: Sendable {
    /// The entry stored under a key, or nil. Counts as a use for least-recently-used eviction.
    func entry(for key: CacheKey) throws -> CacheEntry?
    /// Stores an entry under its key, replacing any earlier one, evicting others as the
    /// store's limits require.
    /// - Returns: whether it was stored and what was evicted to make room.
    @discardableResult
    func write(_ entry: CacheEntry) throws -> StoreWriteResult
    /// Removes the entry stored under a key, if any.
    func removeEntry(for key: CacheKey) throws
    /// Removes every entry.
    func removeAll() throws
    /// Removes every entry stored at or after `date`.
    func removeEntries(storedSince date: Date) throws
    /// The bytes the stored entries account for (see `CacheEntry.byteCount`).
    var totalBytes: Int { get }
    /// How many entries are stored.
    var entryCount: Int { get }
}

/// What a write did.
public struct StoreWriteResult: Sendable, Equatable {
    /// Whether the entry was stored; false when it alone exceeds the store's limits.
    public var stored: Bool
    /// The keys evicted to make room, least recently used first.
    public var evicted: [CacheKey]

    /// A result with the given parts.
    public init(stored: Bool, evicted: [CacheKey] = []) {
        self.stored = stored
        self.evicted = evicted
    }
}
