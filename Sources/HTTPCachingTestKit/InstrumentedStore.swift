import Foundation
import Synchronization
import HTTPCaching

/// A store that passes every call to another store, with hooks on reads and writes: a slow
/// disk, a server that fails, a read held until a test lets it go, all without a timer.
///
/// It never answers `immediateEntry(for:)` from memory (`.needsIO`), so every lookup takes the
/// cache's I/O path, off Foundation's queue, as a disk or Redis store's does. The hooks can be
/// changed while the store is in use.
public final class InstrumentedStore: ResponseStore {
    /// Runs after each read of the wrapped store, with what it found; the read throws what the
    /// hook throws. The default does nothing.
    public typealias ReadHook = @Sendable (CacheKey, CacheEntry?) throws -> Void
    /// Runs before each write; a write whose hook throws does not reach the wrapped store. The
    /// default does nothing.
    public typealias WriteHook = @Sendable (CacheEntry) throws -> Void

    /// The store every call goes to.
    public let inner: any ResponseStore
    private let hooks: Mutex<(read: ReadHook?, write: WriteHook?)>

    /// Wraps `inner`, with the hooks given (none by default).
    public init(_ inner: any ResponseStore, afterRead: ReadHook? = nil, beforeWrite: WriteHook? = nil) {
        self.inner = inner
        hooks = Mutex((afterRead, beforeWrite))
    }

    /// The hook run after each read; nil for none.
    public var afterRead: ReadHook? {
        get { hooks.withLock { $0.read } }
        set { hooks.withLock { $0.read = newValue } }
    }

    /// The hook run before each write; nil for none.
    public var beforeWrite: WriteHook? {
        get { hooks.withLock { $0.write } }
        set { hooks.withLock { $0.write = newValue } }
    }

    /// The wrapped store's entry, once the read hook has run.
    /// - Throws: what the wrapped store or the hook throws.
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        let entry = try inner.entry(for: key)
        try afterRead?(key, entry)
        return entry
    }

    /// Writes to the wrapped store, once the write hook has run.
    /// - Throws: what the hook or the wrapped store throws.
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        try beforeWrite?(entry)
        return try inner.write(entry)
    }

    /// Removes from the wrapped store.
    /// - Throws: what the wrapped store throws.
    public func removeEntry(for key: CacheKey) throws { try inner.removeEntry(for: key) }

    /// Empties the wrapped store.
    /// - Throws: what the wrapped store throws.
    public func removeAll(progress: (RemovalProgress) -> Void) throws { try inner.removeAll(progress: progress) }

    /// Removes from the wrapped store what `predicate` selects.
    /// - Throws: what the wrapped store throws.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        try inner.removeEntries(where: predicate, progress: progress)
    }

    /// The wrapped store's listing.
    /// - Throws: what the wrapped store throws.
    public func entryInfos() throws -> [StoredEntryInfo] { try inner.entryInfos() }

    /// The wrapped store's byte count.
    public var totalBytes: Int { inner.totalBytes }

    /// The wrapped store's entry count.
    public var entryCount: Int { inner.entryCount }

    /// The wrapped store's entry limit.
    public var maxEntrySize: Int { inner.maxEntrySize }

    /// The wrapped store's secret.
    /// - Throws: what the wrapped store throws.
    public func partitionSecret() throws -> [UInt8] { try inner.partitionSecret() }

    /// Claims through the wrapped store.
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool { inner.claimRefresh(of: key, lease: lease) }

    /// Releases through the wrapped store.
    public func releaseRefresh(of key: CacheKey) { inner.releaseRefresh(of: key) }
}
