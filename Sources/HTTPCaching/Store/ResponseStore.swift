import Foundation

/// Where a cache keeps its entries: memory, disk, or your own.
///
/// Implementations must be thread-safe: the cache calls them from many threads at once,
/// including from `URLProtocol.startLoading`, so reads should be quick. An entry that cannot
/// be read is a miss.
/// `StoreConformance` in the tests holds the behaviour every store must show.
/// An entry found damaged should be removed and reported by throwing
/// `ResponseStoreError.corruptEntry`; the cache treats that as a miss.
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
    /// Removes every entry, reporting progress for large stores.
    func removeAll(progress: (RemovalProgress) -> Void) throws
    /// Removes every entry stored at or after `date`, reporting progress for large stores.
    func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void) throws
    /// The bytes the stored entries account for (see `CacheEntry.byteCount`).
    var totalBytes: Int { get }
    /// How many entries are stored.
    var entryCount: Int { get }
}

extension ResponseStore {
    /// Removes every entry, reporting the start and the end.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        let total = entryCount
        progress(RemovalProgress(removed: 0, total: total))
        try removeAll()
        progress(RemovalProgress(removed: total, total: total))
    }

    /// Removes every entry stored at or after `date`, reporting the start and the end.
    public func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void) throws {
        let before = entryCount
        progress(RemovalProgress(removed: 0, total: before))
        try removeEntries(storedSince: date)
        let removed = before - entryCount
        progress(RemovalProgress(removed: removed, total: removed))
    }
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

/// Errors a store reports while answering.
public enum ResponseStoreError: Error, Equatable, CustomStringConvertible {
    /// The entry for a key could not be read (damaged, truncated or foreign); it was removed.
    /// The cache treats it as a miss and reports a `corrupted` event.
    case corruptEntry(key: CacheKey, reason: String)

    public var description: String {
        switch self {
        case .corruptEntry(let key, let reason): "corrupt entry for \(key) removed: \(reason)"
        }
    }
}
