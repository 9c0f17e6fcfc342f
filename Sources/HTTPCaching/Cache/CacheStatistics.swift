import Foundation
import Synchronization

/// What a cache has done since it was made (or since `HTTPCache.resetStatistics()`), and what
/// its store holds now: `HTTPCache.statistics`, a consistent snapshot.
///
/// Counted as it happens, under one lock, so it costs a hit next to nothing and can stay on.
public struct CacheStatistics: Sendable, Equatable {
    /// Requests answered, by how: `fresh`, `stale`, `revalidated`, `fallback` (from the store),
    /// `miss`, `expired`, `bypass` (from the network).
    public internal(set) var requests: [CacheStatus: Int] = [:]
    /// Requests that waited for another request's answer instead of asking the origin.
    public internal(set) var collapsed = 0
    /// Requests answered from the store by an entry stored for another URL, which its
    /// `No-Vary-Search` lets answer theirs (also counted in `requests`).
    public internal(set) var servedThroughNoVarySearch = 0
    /// Requests sent to the origin: callers', revalidations and background refreshes.
    public internal(set) var originRequests = 0
    /// Body bytes served from the store.
    public internal(set) var bytesServedFromStore = 0
    /// Body bytes received from the origin.
    public internal(set) var bytesFetchedFromOrigin = 0
    /// Responses stored.
    public internal(set) var stored = 0
    /// Responses not stored, by the reason's name (`NotStoredReason.name`).
    public internal(set) var notStored: [String: Int] = [:]
    /// Entries the store evicted to stay within its limits.
    public internal(set) var evictions = 0
    /// Damaged, truncated or foreign entries found and removed.
    public internal(set) var corruptions = 0
    /// Store reads or writes that failed (the request went on without the store).
    public internal(set) var storeFailures = 0
    /// Background refreshes started.
    public internal(set) var refreshesStarted = 0
    /// Background refreshes that stored the origin's answer (or freshened the entry with a 304).
    public internal(set) var refreshesSucceeded = 0
    /// Background refreshes that failed; the stale entry was kept.
    public internal(set) var refreshesFailed = 0
    /// URLs an unsafe method's answer invalidated (its own, its `Location`'s and
    /// `Content-Location`'s), whether or not anything was stored under them.
    public internal(set) var invalidations = 0
    /// Entries the store holds now (its `entryCount`).
    public internal(set) var entries = 0
    /// Bytes the store's entries account for now (its `totalBytes`).
    public internal(set) var bytes = 0
    /// When counting began: the cache's making, or the last reset, by the cache's clock.
    public internal(set) var since: Date

    init(since: Date) {
        self.since = since
    }

    /// Every request counted in `requests`.
    public var requestCount: Int { requests.values.reduce(0, +) }

    /// The requests answered from the store (fresh, stale, revalidated, fallback), as a
    /// fraction of all requests; 0 before the first.
    public var hitRatio: Double {
        let total = requestCount
        guard total > 0 else { return 0 }
        let hits = [CacheStatus.fresh, .stale, .revalidated, .fallback].reduce(0) { $0 + (requests[$1] ?? 0) }
        return Double(hits) / Double(total)
    }
}

/// The counters behind `CacheStatistics`, fed by the engine's events and by the plumbing.
final class StatisticsCounters: Sendable {
    private let counts: Mutex<CacheStatistics>
    /// Off only for `cache-bench`'s comparison (`HTTP_CACHING_STATISTICS=off` when the cache
    /// is made): statistics are meant to stay on.
    private let enabled: Bool

    init(since: Date) {
        counts = Mutex(CacheStatistics(since: since))
        enabled = ProcessInfo.processInfo.environment["HTTP_CACHING_STATISTICS"] != "off"
    }

    /// Counts an event.
    func count(_ kind: CacheEvent.Kind) {
        guard enabled else { return }
        counts.withLock { counts in
            switch kind.value {
            case .served(let status): counts.requests[status, default: 0] += 1
            case .collapsed: counts.collapsed += 1
            case .stored: counts.stored += 1
            case .notStored(let reason): counts.notStored[reason.name, default: 0] += 1
            case .refreshed: counts.refreshesSucceeded += 1
            case .refreshFailed: counts.refreshesFailed += 1
            case .evicted: counts.evictions += 1
            case .invalidated: counts.invalidations += 1
            case .corrupted: counts.corruptions += 1
            case .storeFailed: counts.storeFailures += 1
            case .waitingForSharedFill: break // counted as collapsed when the answer arrives
            }
        }
    }

    /// Counts what events do not tell.
    func add(originRequests: Int = 0, servedFromStore: Int = 0, fetchedFromOrigin: Int = 0, refreshesStarted: Int = 0,
             servedThroughNoVarySearch: Int = 0) {
        guard enabled else { return }
        counts.withLock { counts in
            counts.servedThroughNoVarySearch += servedThroughNoVarySearch
            counts.originRequests += originRequests
            counts.bytesServedFromStore += servedFromStore
            counts.bytesFetchedFromOrigin += fetchedFromOrigin
            counts.refreshesStarted += refreshesStarted
        }
    }

    /// The counters now, with the store's gauges.
    func snapshot(store: any ResponseStore) -> CacheStatistics {
        var snapshot = counts.withLock { $0 }
        snapshot.entries = store.entryCount
        snapshot.bytes = store.totalBytes
        return snapshot
    }

    /// Starts counting again from zero.
    func reset(since: Date) {
        counts.withLock { $0 = CacheStatistics(since: since) }
    }
}
