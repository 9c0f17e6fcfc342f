import Foundation
import Synchronization

/// Something the cache did, with the key and URL it concerned.
public struct CacheEvent: Sendable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// A request was answered, as `CacheStatus` says: from the store (`fresh`, `stale`,
        /// `revalidated`, `fallback`) or from the network (`miss`, `expired`, `bypass`).
        case served(CacheStatus)
        /// The request waited for another request for the same key instead of asking the
        /// origin itself, and got its answer (reported beside `served`).
        case collapsed
        /// A response was written to the store.
        case stored
        /// A response was not stored, and why: the answer to "why is this never cached?".
        case notStored(NotStoredReason)
        /// A background refresh replaced the entry; `bodyChanged` says whether the body differs.
        case refreshed(bodyChanged: Bool)
        /// A background refresh failed; the stale entry was kept.
        case refreshFailed(reason: String)
        /// The store evicted the entry to stay within its limits.
        case evicted
        /// An unsafe method's answer removed the entry stored for a URL.
        case invalidated
        /// A damaged, truncated or foreign entry was found, removed, and treated as a miss.
        case corrupted(reason: String)
        /// The store failed to read or write; the request went on without it.
        case storeFailed(reason: String)
    }

    /// What happened.
    public let kind: Kind
    /// The key concerned.
    public let key: CacheKey
    /// The URL concerned, if known.
    public let url: URL?
    /// When it happened, by the cache's clock.
    public let date: Date

    /// An event with the given parts.
    public init(kind: Kind, key: CacheKey, url: URL?, date: Date) {
        self.kind = kind
        self.key = key
        self.url = url
        self.date = date
    }

    /// The kind and the key.
    public var description: String { "\(kind) \(key)" }
}

/// A registration made by `HTTPCache.observe(_:)`; `cancel()` ends it.
public final class CacheObservation: Sendable {
    private let cancelAction: @Sendable () -> Void

    init(cancel: @escaping @Sendable () -> Void) { cancelAction = cancel }

    /// Stops delivering events to the handler. Safe to call twice.
    public func cancel() { cancelAction() }
}

/// Delivers events to every observer, synchronously on the thread that emits them.
final class EventHub: Sendable {
    private struct Observers {
        var next: UInt64 = 0
        var handlers: [UInt64: @Sendable (CacheEvent) -> Void] = [:]
    }

    private let observers = Mutex(Observers())
    /// A lock-free "anyone listening?" so an unobserved cache pays nothing per request.
    private let count = Atomic<Int>(0)

    var hasObservers: Bool { count.load(ordering: .relaxed) > 0 }

    func add(_ handler: @escaping @Sendable (CacheEvent) -> Void) -> CacheObservation {
        let id = observers.withLock { state in
            state.next += 1
            state.handlers[state.next] = handler
            count.store(state.handlers.count, ordering: .relaxed)
            return state.next
        }
        return CacheObservation { [weak self] in self?.remove(id) }
    }

    private func remove(_ id: UInt64) {
        observers.withLock { state in
            state.handlers[id] = nil
            count.store(state.handlers.count, ordering: .relaxed)
        }
    }

    func emit(_ event: @autoclosure () -> CacheEvent) {
        guard hasObservers else { return }
        // In the order the observers were added.
        let handlers = observers.withLock { $0.handlers.sorted { $0.key < $1.key }.map(\.value) }
        let event = event()
        for handler in handlers { handler(event) }
    }
}
