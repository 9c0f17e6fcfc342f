import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response cache: a configuration, a store and a clock, plus the events it reports.
///
/// Install it on a session with `URLSessionConfiguration.enableHTTPCaching(_:)`. One cache
/// may serve many sessions; each session may have its own cache. The calls here concern the
/// whole cache (events, removal, listing); one request's entry is managed through the
/// `CacheInstallation` that `enableHTTPCaching(_:)` returns, which keys requests as the
/// session does.
public final class HTTPCache: Sendable {
    /// The cache used when none is given: standard windows and a default memory store.
    public static let shared = HTTPCache()

    /// How the cache decides.
    public let configuration: CacheConfiguration
    /// Where the entries live. Reached through the cache only: writing to it directly would
    /// bypass the cache's variant index.
    let store: any ResponseStore
    /// The cache's clock. The default is the system clock.
    let now: @Sendable () -> Date

    /// The engine behind this facade: lookups, writes, flights, events.
    let engine: CacheEngine

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
        engine = CacheEngine(configuration: configuration, store: store, now: now)
    }

    // MARK: - Events

    /// Calls `handler` with every event, on the thread where it happens; keep it quick. That may
    /// be Foundation's shared URLSession queue (a hit from memory), where creating, resuming,
    /// suspending or cancelling a task, or `invalidateAndCancel()`, traps: hop to another queue
    /// for those.
    /// - Returns: a handle whose `cancel()` stops the calls.
    @discardableResult
    public func observe(_ handler: @escaping @Sendable (CacheEvent) -> Void) -> CacheObservation {
        engine.hub.add(handler)
    }

    /// A new stream of every event from now on; ending the iteration ends the stream.
    /// Keeps the newest 4,096 events a slow reader has not taken.
    public func events() -> AsyncStream<CacheEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CacheEvent.self, bufferingPolicy: .bufferingNewest(4096))
        let observation = engine.hub.add { continuation.yield($0) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    // MARK: - Statistics

    /// What the cache has done since it was made or last reset, and what its store holds now:
    /// a consistent snapshot. `prometheusText(prefix:)` exposes it for a `/metrics` route.
    public var statistics: CacheStatistics {
        engine.statistics.snapshot(store: store)
    }

    /// Starts the counters again from zero (the store's gauges are read as they are).
    public func resetStatistics() {
        engine.statistics.reset(since: now())
    }

    // MARK: - Management of the whole cache

    // One request's entry is managed through the `CacheInstallation` of the sessions that
    // use the cache, which keys requests as they do (their own headers included).

    /// Removes every entry.
    /// - Parameter progress: called as entries are removed (often, for a large disk store).
    /// - Throws: the store's error when it cannot remove.
    public func removeAll(progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeAll(progress: progress)
    }

    /// Removes every entry stored at or after `date` (for a response from the network, as of
    /// when its request was sent).
    /// - Parameter progress: called as entries are removed.
    /// - Throws: the store's error when it cannot list or remove.
    public func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try store.removeEntries(storedSince: date, progress: progress)
    }

    /// Removes every entry stored before `date` (for a response from the network, as of when
    /// its request was sent).
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
}
